package vfstest

import (
	"bytes"
	"errors"
	"github.com/edgemq/edgemq/store/vfs"
	"io"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// SectorSize is the unit in which CrashFS persists unsynced bytes at a Cut: each sector of
// SectorSize bytes, counted from the start of the file, is written whole or not at all,
// except the one sector a Cut tears.
const SectorSize = 512

// Poison is the byte CrashFS writes over the memory of a released mapping (see CrashFS).
const Poison = 0xDB

// unlimitedTotal is the Total that Usage reports when no capacity is set (1 PiB).
const unlimitedTotal = 1 << 50

// CrashFS is an in-memory FS that simulates power cuts, for tests of code that must survive
// them. It is safe for concurrent use, with the limits on mappings below.
//
// Files. Each file has live content, what the running process reads, and durable content,
// what a power cut leaves. WriteAt, Truncate, Allocate, O_TRUNC and writes through a writable
// mapping change only the live content; File.Sync copies the file's live content and size to
// its durable content. Used space (see SetCapacity) is the sum of the live sizes.
//
// Names. Creating (OpenFile with O_CREATE), renaming and removing a file change the live
// namespace at once and are appended to one ordered list of pending operations for the whole
// FS. SyncDir(dir) makes durable every pending operation up to and including the last one
// that touched dir (its source or destination directory), as a journaling file system
// commits its journal in order: it may thus also make earlier operations in other directories
// durable, which POSIX does not promise, so code under test should still sync each directory
// it changes. With DirSyncNotNeeded set, each operation is durable when it returns.
// Directories (MkdirAll, and Remove of an empty directory) are durable at once.
//
// Cuts. Cut returns the disk as a power cut at that instant leaves it, as a new CrashFS
// whose live and durable contents are equal. It applies a random prefix (possibly empty, possibly
// all) of the pending namespace operations to the durable namespace; then, for each file in
// the result, it starts from the file's durable content and
//   - sets the size to the durable size or, if the live size is larger (a write, Truncate or
//     Allocate extended the file), to the live size with probability 1/2; bytes the cut does
//     not persist past the durable size read as zeros;
//   - takes each SectorSize sector (the last one may be short) whose live bytes differ from
//     the durable ones and lies within that size, and keeps either all its live bytes or all its
//     durable ones, with probability 1/2 each, independently;
//   - except one of those sectors, chosen at random, which is torn: with probability 3/4 a
//     prefix of 1 to n-1 of its n bytes is live and the rest durable, and with probability
//     1/4 each of its bytes whose live value differs from the durable one gets a random value.
//
// So a cut never changes a byte whose live value equals its durable value: bytes synced and
// not written since survive every cut, even in the sector an append is tearing. A Truncate
// that shrank the file is lost unless synced. Every random choice comes from Cut's rng, in
// file name order, so a seed reproduces a cut exactly.
//
// CutClean is the cut that loses exactly what is not durable: durable contents, durable sizes
// and the durable namespace, no pending operation applied. CutAllBut is the cut of a disk
// that did everything asked of it but one step (see Step), and CutNamesOnly that of a disk
// that made every name durable and no unsynced data.
//
// Mappings. Map returns a slice of the file's live buffer itself, so bytes written through it
// are seen by ReadAt and by other mappings, and WriteAt's bytes are seen through it. The
// buffer is moved (reallocated) only while the file has no mapping: a Map, WriteAt, Truncate or
// Allocate that would grow a mapped file past its buffer's capacity fails. Unmap of a file's
// last mapping moves the buffer and fills the released slice with Poison, so that bytes read
// through a mapping after its Unmap (where a real OS would fault, or show another mapping
// that reused the address) are garbage, not the file's bytes. Map reserves
// capacity for its whole length, so once a file is mapped with length n it can grow up to n
// bytes while mapped; Allocate the full segment before mapping it. Map may map past the end
// of the file, but bytes there must not be touched (on a real OS they raise SIGBUS), and bytes
// that come into the file as it grows are zeroed. Do not write through a read-only mapping.
//
// Concurrency. Every method takes one mutex, and ReadAt and WriteAt copy bytes under it. Bytes
// reached through a mapping are not locked, so the race detector accepts one goroutine
// writing bytes [a,b) of a file (through a mapping or WriteAt) while others read bytes below a
// (through a mapping or ReadAt). File.Sync, Cut and CutClean read every live byte of a file,
// and may do so while a goroutine writes to it through a mapping, as fsync and a power cut
// meet a process writing to the page cache: they see some of those bytes, and the race
// detector is told to ignore that read (see snapshot).
//
// The zero CrashFS is not usable; call NewCrashFS.
type CrashFS struct {
	// DirSyncNotNeeded makes creations, renames and removals durable when they return, as if
	// SyncDir followed each one. Set it before the FS is used. A Cut copies it.
	DirSyncNotNeeded bool

	mu       sync.Mutex                      // guards the fields below and every file's metadata and bytes, but not bytes reached through a mapping
	dirs     map[string]bool                 // directories, live and durable (roots are implicit)
	files    map[string]*inode               // live namespace
	durable  map[string]*inode               // durable namespace
	pending  []nsOp                          // namespace operations not yet durable, oldest first
	capacity int64                           // bytes; 0 = unlimited
	usage    func(string) (vfs.Usage, error) // set by SetUsage
	syncErr  error                           // set by FailSync
	stats    CrashStats
}

// CrashStats counts what a CrashFS holds and has done, for assertions in tests.
type CrashStats struct {
	Files      int   // files in the live namespace
	LiveBytes  int64 // sum of the live file sizes: the space SetCapacity limits
	PendingOps int   // creations, renames and removals not yet durable
	Mappings   int   // mappings not yet released by Unmap, over all files
	Syncs      int64 // vfs.File.Sync calls that succeeded
	DirSyncs   int64 // SyncDir calls that succeeded
}

// inode is a file's contents, shared by its open handles, its names and its mappings.
type inode struct {
	data   []byte   // live content: len is the live size; bytes in data[len:cap] are junk
	synced []byte   // durable content and size
	maps   [][]byte // live mappings; while there are any, data's backing array must not move
}

// nsOp is a namespace operation awaiting SyncDir.
type nsOp struct {
	kind opKind
	name string // file created or removed, or rename source
	to   string // rename destination
	ino  *inode // file created or renamed
}

type opKind int

const (
	opCreate opKind = iota
	opRemove
	opRename
)

func (op nsOp) apply(names map[string]*inode) {
	switch op.kind {
	case opCreate:
		names[op.name] = op.ino
	case opRemove:
		delete(names, op.name)
	case opRename:
		delete(names, op.name)
		names[op.to] = op.ino
	}
}

func (op nsOp) touches(dir string) bool {
	return filepath.Dir(op.name) == dir || (op.kind == opRename && filepath.Dir(op.to) == dir)
}

var (
	errMappedGrow  = errors.New("vfs: crashfs: cannot grow a mapped file past its mapped length")
	errNotMapped   = errors.New("vfs: crashfs: slice was not returned by Map or is already unmapped")
	errBadFlag     = errors.New("vfs: crashfs: O_APPEND and O_SYNC are not simulated")
	errNotWritable = errors.New("vfs: crashfs: file not open for writing")
	errNotReadable = errors.New("vfs: crashfs: file not open for reading")
	errNegative    = errors.New("vfs: crashfs: negative offset or size")
	errTooLarge    = errors.New("vfs: crashfs: file too large")
	errIsDir       = errors.New("vfs: crashfs: is a directory")
	errNotDir      = errors.New("vfs: crashfs: not a directory")
	errNotEmpty    = errors.New("vfs: crashfs: directory not empty")
	errRenameDir   = errors.New("vfs: crashfs: renaming directories is not simulated")
)

var (
	_ vfs.FS   = (*CrashFS)(nil)
	_ vfs.File = (*crashFile)(nil)
)

// NewCrashFS returns an empty CrashFS with unlimited capacity.
func NewCrashFS() *CrashFS {
	return &CrashFS{
		dirs:    make(map[string]bool),
		files:   make(map[string]*inode),
		durable: make(map[string]*inode),
	}
}

// SetCapacity limits the used space (the sum of the live sizes of the files that have a
// name; a removed file stops counting at once, even if still open) to n bytes; 0 means
// unlimited. A WriteAt, Truncate or Allocate that would take the used space past n fails with
// an error wrapping ErrNoSpace and changes nothing. Lowering n below the used space removes
// nothing; it only makes growth fail.
func (c *CrashFS) SetCapacity(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.capacity = n
}

// SetUsage makes Usage return fn(dir) instead of figures computed from the capacity, to
// simulate what statfs reports; nil restores the computed figures. fn is called without
// the FS's lock held, so it may call the FS.
func (c *CrashFS) SetUsage(fn func(dir string) (vfs.Usage, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.usage = fn
}

// FailSync makes every File.Sync fail with an error wrapping err, changing nothing, until
// FailSync(nil). Unlike Linux, a failed Sync leaves the live content dirty, so a later
// Sync that succeeds still makes it durable. SyncDir is not affected.
func (c *CrashFS) FailSync(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncErr = err
}

// Stats returns the FS's current counts.
func (c *CrashFS) Stats() CrashStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Files = len(c.files)
	s.LiveBytes = c.usedLocked()
	s.PendingOps = len(c.pending)
	return s
}

// Cut returns the disk as a power cut now would leave it, drawing every choice from rng (see
// CrashFS for the rules): a new CrashFS that shares nothing with c, whose contents are all
// durable. It keeps c's capacity and DirSyncNotNeeded, not its SetUsage and FailSync hooks.
// c stays usable, as the dying process may keep writing, and no longer affects the result.
// The same state and the same rng state give the same result.
func (c *CrashFS) Cut(rng *rand.Rand) *CrashFS {
	if rng == nil {
		panic("vfs: CrashFS.Cut with nil rng")
	}
	return c.cut(rng, nil, nil)
}

// CutClean is Cut losing exactly what is not durable: each file has its durable content
// and size, and no pending namespace operation is applied.
func (c *CrashFS) CutClean() *CrashFS { return c.cut(nil, nil, nil) }

// CutAllBut is the cut of a disk that completed everything asked of it so far except step,
// which the program was about to take: with no rng involved, every file keeps its whole live
// content and size, and every pending namespace operation applies, except that
//   - for StepSync, the file being synced (step.File, which must be a file of c, under
//     whatever name it has now) keeps only its durable content;
//   - for StepSyncDir, only the pending operations before the first one in the directory
//     apply (the journal's order, see CrashFS).
//
// (For StepRename all of them apply: the rename is not pending yet.) Where CutClean loses
// what the program wrote but did not sync, this cut keeps what it wrote, in any order, but
// not what the step was to make durable: a program that counts something as durable
// before the step, or that wrote first what depends on it, is caught by one of the two.
func (c *CrashFS) CutAllBut(step Step) *CrashFS {
	var skip *inode
	if cf, ok := step.File.(*crashFile); ok && step.Op == StepSync {
		skip = cf.ino
	}
	dir := filepath.Clean(step.Path)
	return c.cut(nil, func(ino *inode) bool { return ino != skip }, func(pending []nsOp) int {
		if step.Op != StepSyncDir {
			return len(pending)
		}
		n := 0
		for n < len(pending) && !pending[n].touches(dir) {
			n++
		}
		return n
	})
}

// CutNamesOnly is the cut of a disk whose journal committed every pending namespace
// operation while no unsynced byte reached a file: every name the program created, renamed
// or removed is durable, over its file's durable content only, as a file system that
// commits names ahead of data leaves them. A program that renames a file into place before
// syncing its content is caught by it.
func (c *CrashFS) CutNamesOnly() *CrashFS {
	return c.cut(nil, nil, func(pending []nsOp) int { return len(pending) })
}

// cut takes a cut: with rng, as Cut says; without, each file keeps its live content if keep
// says so and its durable content otherwise, and the first ops(pending) pending namespace
// operations apply (none if ops is nil).
func (c *CrashFS) cut(rng *rand.Rand, keep func(*inode) bool, ops func([]nsOp) int) *CrashFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := maps.Clone(c.durable)
	nops := 0
	switch {
	case rng != nil:
		nops = rng.IntN(len(c.pending) + 1)
	case ops != nil:
		nops = ops(c.pending)
	}
	for _, op := range c.pending[:nops] {
		op.apply(names)
	}
	n := NewCrashFS()
	n.DirSyncNotNeeded = c.DirSyncNotNeeded
	n.capacity = c.capacity
	maps.Copy(n.dirs, c.dirs)
	done := make(map[*inode]*inode)
	for _, name := range slices.Sorted(maps.Keys(names)) {
		old := names[name]
		ino := done[old]
		if ino == nil {
			var data []byte
			if keep != nil && keep(old) {
				data = snapshot(nil, old.data)
			} else {
				data = cutData(old, rng)
			}
			ino = &inode{data: data, synced: slices.Clone(data)}
			done[old] = ino
		}
		n.files[name] = ino
		n.durable[name] = ino
		// A directory removed while the removal of a file in it was not yet durable comes back.
		for d := filepath.Dir(name); !isRoot(d); d = filepath.Dir(d) {
			n.dirs[d] = true
		}
	}
	return n
}

// snapshot appends src to dst. It reads bytes another goroutine may be writing through a
// mapping at that moment, as a real fsync or power cut reads the page cache while the process
// writes to it: whichever bytes it sees are a correct model, so the race detector is told to
// look away.
//
//go:norace
func snapshot(dst, src []byte) []byte {
	if cap(dst) < len(src) {
		dst = make([]byte, len(src))
	}
	dst = dst[:len(src)]
	for i := range src {
		dst[i] = src[i]
	}
	return dst
}

// cutData returns the content ino has after a cut; rng nil loses every unsynced byte.
// It reads live bytes that the dying process may be writing through a mapping (see snapshot).
//
//go:norace
func cutData(ino *inode, rng *rand.Rand) []byte {
	live, dur := ino.data, ino.synced
	if rng == nil {
		return snapshot(nil, dur)
	}
	live = snapshot(nil, live)
	size := len(dur)
	if len(live) > size && rng.IntN(2) == 0 {
		size = len(live)
	}
	out := make([]byte, size)
	copy(out, dur)
	end := min(size, len(live)) // past the live size, a shrink not synced: keep durable bytes
	var dirty []int
	for off := 0; off < end; off += SectorSize {
		e := min(off+SectorSize, end)
		if !bytes.Equal(live[off:e], out[off:e]) {
			dirty = append(dirty, off)
		}
	}
	if len(dirty) == 0 {
		return out
	}
	torn := rng.IntN(len(dirty))
	for i, off := range dirty {
		e := min(off+SectorSize, end)
		switch {
		case i != torn:
			if rng.IntN(2) == 0 {
				copy(out[off:e], live[off:e])
			}
		case rng.IntN(4) == 0:
			for j := off; j < e; j++ {
				if out[j] != live[j] {
					out[j] = byte(rng.Uint32())
				}
			}
		default:
			p := rng.IntN(2) // a 1-byte sector: all or nothing
			if e-off > 1 {
				p = 1 + rng.IntN(e-off-1)
			}
			copy(out[off:off+p], live[off:off+p])
		}
	}
	return out
}

// isRoot reports whether p is "." or a root such as "/": a directory that always exists.
func isRoot(p string) bool { return filepath.Dir(p) == p }

// dirLocked reports whether the cleaned path dir is a directory.
func (c *CrashFS) dirLocked(dir string) bool { return isRoot(dir) || c.dirs[dir] }

// usedLocked returns the sum of the live file sizes.
func (c *CrashFS) usedLocked() int64 {
	var n int64
	for _, ino := range c.files {
		n += int64(len(ino.data))
	}
	return n
}

// logLocked records a namespace operation, durable at once if DirSyncNotNeeded.
func (c *CrashFS) logLocked(op nsOp) {
	c.pending = append(c.pending, op)
	if c.DirSyncNotNeeded {
		c.commitLocked(len(c.pending))
	}
}

// commitLocked makes the first n pending operations durable.
func (c *CrashFS) commitLocked(n int) {
	for _, op := range c.pending[:n] {
		op.apply(c.durable)
	}
	c.pending = slices.Delete(c.pending, 0, n)
}

// OpenFile opens the named file. It supports os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_CREATE,
// os.O_EXCL and os.O_TRUNC, and fails for os.O_APPEND and os.O_SYNC; perm is ignored. A file
// created here is durable only after SyncDir on its directory; O_TRUNC is a write, durable
// after File.Sync.
func (c *CrashFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&(os.O_APPEND|os.O_SYNC) != 0 {
		return nil, &os.PathError{Op: "open", Path: name, Err: errBadFlag}
	}
	p := filepath.Clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirLocked(filepath.Dir(p)) {
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if c.dirLocked(p) {
		return nil, &os.PathError{Op: "open", Path: name, Err: errIsDir}
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	f := &crashFile{fs: c, name: name, read: acc != os.O_WRONLY, write: acc != os.O_RDONLY}
	if flag&os.O_TRUNC != 0 && !f.write {
		return nil, &os.PathError{Op: "open", Path: name, Err: errNotWritable}
	}
	ino := c.files[p]
	switch {
	case ino == nil && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case ino != nil && flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case ino == nil:
		ino = &inode{}
		c.files[p] = ino
		c.logLocked(nsOp{kind: opCreate, name: p, ino: ino})
	}
	if flag&os.O_TRUNC != 0 {
		ino.data = ino.data[:0]
	}
	f.ino = ino
	return f, nil
}

// Remove removes a file, durable after SyncDir on its directory, or an empty directory,
// durable at once. Open handles and mappings of a removed file stay usable.
func (c *CrashFS) Remove(name string) error {
	p := filepath.Clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files[p] != nil {
		delete(c.files, p)
		c.logLocked(nsOp{kind: opRemove, name: p})
		return nil
	}
	if isRoot(p) || !c.dirs[p] {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	for q := range c.files {
		if filepath.Dir(q) == p {
			return &os.PathError{Op: "remove", Path: name, Err: errNotEmpty}
		}
	}
	for q := range c.dirs {
		if filepath.Dir(q) == p {
			return &os.PathError{Op: "remove", Path: name, Err: errNotEmpty}
		}
	}
	delete(c.dirs, p)
	return nil
}

// Rename renames a file, replacing newname if it is a file; the rename is durable after
// SyncDir on either directory involved (see CrashFS). Directories cannot be renamed.
func (c *CrashFS) Rename(oldname, newname string) error {
	from, to := filepath.Clean(oldname), filepath.Clean(newname)
	c.mu.Lock()
	defer c.mu.Unlock()
	ino := c.files[from]
	switch {
	case ino == nil && c.dirLocked(from):
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errRenameDir}
	case ino == nil || !c.dirLocked(filepath.Dir(to)):
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	case c.dirLocked(to):
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errIsDir}
	case from == to:
		return nil
	}
	delete(c.files, from)
	c.files[to] = ino
	c.logLocked(nsOp{kind: opRename, name: from, to: to, ino: ino})
	return nil
}

// MkdirAll creates dir and its parents; directories are durable at once. perm is ignored.
func (c *CrashFS) MkdirAll(dir string, perm os.FileMode) error {
	p := filepath.Clean(dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	var todo []string
	for d := p; !isRoot(d); d = filepath.Dir(d) {
		if c.files[d] != nil {
			return &os.PathError{Op: "mkdir", Path: d, Err: errNotDir}
		}
		todo = append(todo, d)
	}
	for _, d := range todo {
		c.dirs[d] = true
	}
	return nil
}

// ReadDir returns the names of the files and directories in dir, sorted.
func (c *CrashFS) ReadDir(dir string) ([]string, error) {
	p := filepath.Clean(dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirLocked(p) {
		return nil, &os.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	var names []string
	for q := range c.files {
		if filepath.Dir(q) == p {
			names = append(names, filepath.Base(q))
		}
	}
	for q := range c.dirs {
		if filepath.Dir(q) == p && q != p {
			names = append(names, filepath.Base(q))
		}
	}
	slices.Sort(names)
	return names, nil
}

// SyncDir makes durable every pending namespace operation up to and including the last one
// in dir (see CrashFS).
func (c *CrashFS) SyncDir(dir string) error {
	p := filepath.Clean(dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirLocked(p) {
		return &os.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	for i := len(c.pending) - 1; i >= 0; i-- {
		if c.pending[i].touches(p) {
			c.commitLocked(i + 1)
			break
		}
	}
	c.stats.DirSyncs++
	return nil
}

// Usage returns what SetUsage's function returns, if set. Otherwise Total is the capacity
// (1 PiB when unlimited) and Free is Total less the used space (0 if that is negative).
func (c *CrashFS) Usage(dir string) (vfs.Usage, error) {
	c.mu.Lock()
	if fn := c.usage; fn != nil {
		c.mu.Unlock()
		return fn(dir)
	}
	defer c.mu.Unlock()
	if !c.dirLocked(filepath.Clean(dir)) {
		return vfs.Usage{}, &os.PathError{Op: "statfs", Path: dir, Err: fs.ErrNotExist}
	}
	total := int64(unlimitedTotal)
	if c.capacity > 0 {
		total = c.capacity
	}
	return vfs.Usage{Total: uint64(total), Free: uint64(max(total-c.usedLocked(), 0))}, nil
}

// crashFile is an open file of a CrashFS.
type crashFile struct {
	fs          *CrashFS
	ino         *inode
	name        string // as opened
	read, write bool
	closed      bool // guarded by fs.mu
}

// checkLocked returns the error for op on f if f is closed or not open for writing when
// write is set.
func (f *crashFile) checkLocked(op string, write bool) error {
	switch {
	case f.closed:
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	case write && !f.write:
		return &os.PathError{Op: op, Path: f.name, Err: errNotWritable}
	}
	return nil
}

// growLocked makes the live size at least n, failing for lack of space or if the buffer would
// have to move under a mapping. slack reserves extra capacity, for appends.
func (f *crashFile) growLocked(op string, n int64, slack bool) error {
	ino := f.ino
	old := len(ino.data)
	if n <= int64(old) {
		return nil
	}
	if n > math.MaxInt {
		return &os.PathError{Op: op, Path: f.name, Err: errTooLarge}
	}
	if c := f.fs.capacity; c > 0 && f.fs.usedLocked()+n-int64(old) > c {
		return &os.PathError{Op: op, Path: f.name, Err: vfs.ErrNoSpace}
	}
	if err := ino.reserve(int(n), slack); err != nil {
		return &os.PathError{Op: op, Path: f.name, Err: err}
	}
	ino.data = ino.data[:n]
	clear(ino.data[old:])
	return nil
}

// reserve makes cap(ino.data) at least n, moving the buffer only if nothing maps it.
func (ino *inode) reserve(n int, slack bool) error {
	if n <= cap(ino.data) {
		return nil
	}
	if len(ino.maps) > 0 {
		return errMappedGrow
	}
	c := n
	if slack {
		c = max(n, 2*cap(ino.data))
	}
	data := make([]byte, len(ino.data), c)
	copy(data, ino.data)
	ino.data = data
	return nil
}

// ReadAt reads the live content, like os.File.ReadAt: fewer than len(p) bytes come with io.EOF.
func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch {
	case f.closed:
		return 0, &os.PathError{Op: "read", Path: f.name, Err: os.ErrClosed}
	case !f.read:
		return 0, &os.PathError{Op: "read", Path: f.name, Err: errNotReadable}
	case off < 0:
		return 0, &os.PathError{Op: "read", Path: f.name, Err: errNegative}
	case off >= int64(len(f.ino.data)):
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt writes to the live content, extending the file if needed (a gap reads as zeros).
// It writes all of p or, on error, nothing.
func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: errNegative}
	}
	if off > math.MaxInt-int64(len(p)) { // off+len(p) would overflow
		return 0, &os.PathError{Op: "write", Path: f.name, Err: errTooLarge}
	}
	if err := f.growLocked("write", off+int64(len(p)), true); err != nil {
		return 0, err
	}
	return copy(f.ino.data[off:], p), nil
}

// Sync makes the file's live content and size durable, or fails as FailSync says.
func (f *crashFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("sync", false); err != nil {
		return err
	}
	if err := f.fs.syncErr; err != nil {
		return &os.PathError{Op: "sync", Path: f.name, Err: err}
	}
	f.ino.synced = snapshot(f.ino.synced[:0], f.ino.data)
	f.fs.stats.Syncs++
	return nil
}

// Truncate changes the live size; bytes past the old size read as zeros.
func (f *crashFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: errNegative}
	}
	if size < int64(len(f.ino.data)) {
		f.ino.data = f.ino.data[:size]
		return nil
	}
	return f.growLocked("truncate", size, false)
}

// Allocate extends the live size to size if it is smaller (with zeros), or fails with
// ErrNoSpace. Like a write, the new size is durable only after Sync.
func (f *crashFile) Allocate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("fallocate", true); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "fallocate", Path: f.name, Err: errNegative}
	}
	return f.growLocked("fallocate", size, false)
}

// Size returns the live size.
func (f *crashFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("stat", false); err != nil {
		return 0, err
	}
	return int64(len(f.ino.data)), nil
}

// Map returns the first length bytes of the live buffer, with len and cap length (see
// CrashFS). A writable mapping needs a file open for writing.
func (f *crashFile) Map(length int, writable bool) ([]byte, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("mmap", writable); err != nil {
		return nil, err
	}
	if length < 0 {
		return nil, &os.PathError{Op: "mmap", Path: f.name, Err: errNegative}
	}
	if length == 0 {
		return nil, nil
	}
	if err := f.ino.reserve(length, false); err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.name, Err: err}
	}
	m := f.ino.data[:length:length]
	f.ino.maps = append(f.ino.maps, m)
	f.fs.stats.Mappings++
	return m, nil
}

// Unmap releases a mapping Map returned; it works after Close too. Releasing the file's last
// mapping poisons its memory (see CrashFS).
func (f *crashFile) Unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	i := slices.IndexFunc(f.ino.maps, func(m []byte) bool { return len(m) == len(b) && &m[0] == &b[0] })
	if i < 0 {
		return &os.PathError{Op: "munmap", Path: f.name, Err: errNotMapped}
	}
	f.ino.maps = slices.Delete(f.ino.maps, i, i+1)
	f.fs.stats.Mappings--
	if len(f.ino.maps) == 0 {
		// Nothing maps the buffer now: move the file's bytes away and poison the memory
		// released, so that a use after Unmap reads garbage (see CrashFS).
		data := make([]byte, len(f.ino.data), cap(f.ino.data))
		copy(data, f.ino.data)
		f.ino.data = data
		for i := range b {
			b[i] = Poison
		}
	}
	return nil
}

// Close closes the handle; mappings stay valid until Unmap.
func (f *crashFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	f.closed = true
	return nil
}

// Name returns the name the file was opened with.
func (f *crashFile) Name() string { return f.name }

// DropResident is a no-op: a CrashFS mapping is ordinary memory.
func (f *crashFile) DropResident([]byte) error { return nil }

// Populate is a no-op: a CrashFS mapping is ordinary memory, and populating writes nothing.
func (f *crashFile) Populate([]byte) error { return nil }
