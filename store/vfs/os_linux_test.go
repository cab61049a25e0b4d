package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgemq/edgemq/store/internal/smaps"
)

// mappingRss returns the resident bytes of the mappings of the file name: what counts in the
// process's RSS, not the page cache.
func mappingRss(t *testing.T, name string) int64 {
	t.Helper()
	n, found := smaps.ForTest(t, smaps.File(name))
	if !found {
		t.Fatalf("no mapping of %s in %s", name, smaps.Path)
	}
	return n
}

// cachedPages returns how many pages of f's first size bytes are in the page cache.
func cachedPages(t *testing.T, f File, size int) int {
	t.Helper()
	m, err := f.Map(size, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Unmap(m)
	vec := make([]byte, (size+os.Getpagesize()-1)/os.Getpagesize())
	// x/sys has no Mincore wrapper on Linux.
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestDropResidentKeepsUnsyncedWrites is the fact the commitlog's and the consume queues'
// drop-behind-write rests on: MADV_DONTNEED on a shared file mapping only takes the pages
// out of this process's page tables; the dirty bit of a page written through the mapping
// goes to the page-cache page (mm/memory.c, zap_pte_range: folio_mark_dirty), so nothing
// is lost, and a later fdatasync writes it. The test writes through the mapping, drops
// before any sync, checks the pages left the mapping's RSS, syncs, evicts the file's now
// clean pages from the page cache (so the reads below come from the disk, unless the
// kernel keeps them), and reads the file back with pread and through a fresh mapping.
func TestDropResidentKeepsUnsyncedWrites(t *testing.T) {
	const size = 4 << 20
	page := os.Getpagesize()
	name := filepath.Join(t.TempDir(), "seg")
	f := mustOpen(t, OS, name, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	defer f.Close()
	if err := f.Allocate(size); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(size, true)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	for i := 0; i < size; i += page {
		copy(want[i:i+page], bytes.Repeat([]byte(fmt.Sprintf("page %08d ", i/page)), page/13+1))
	}
	copy(m, want)
	if got := mappingRss(t, name); got < size {
		t.Fatalf("mapping RSS after writing %d bytes through it = %d", size, got)
	}

	// Drop the second half first, then everything: the first half was written and
	// dropped, the second half dropped twice; none of it was synced.
	if err := f.DropResident(m[size/2:]); err != nil {
		t.Fatal(err)
	}
	if err := f.DropResident(m); err != nil {
		t.Fatal(err)
	}
	if got := mappingRss(t, name); got != 0 {
		t.Errorf("mapping RSS after DropResident = %d, want 0", got)
	}
	// A dropped page written again faults back in; drop it again at once.
	copy(m[page:], "rewritten")
	copy(want[page:], "rewritten")
	if err := f.DropResident(m[:2*page]); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("pread before sync differs from what was written through the mapping (err %v)", err)
	}

	mustSync(t, f)
	if err := f.Unmap(m); err != nil {
		t.Fatal(err)
	}
	// The pages are clean now, unless the dirty bits were lost (then they were clean all
	// along): evict them, so that the reads come from the disk.
	if err := unix.Fadvise(int(f.(osFile).Fd()), 0, size, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d pages still in the page cache after sync and FADV_DONTNEED", cachedPages(t, f, size), size/page)

	clear(got)
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("pread after sync differs from what was written through the mapping (err %v)", err)
	}
	g := mustOpen(t, OS, name, os.O_RDONLY)
	defer g.Close()
	if err := unix.Fadvise(int(g.(osFile).Fd()), 0, size, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	fresh, err := g.Map(size, false)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Unmap(fresh)
	if !bytes.Equal(fresh, want) {
		t.Fatal("a fresh mapping after sync differs from what was written through the old one")
	}
}

// TestWritableMapIsPaged: a writable mapping is advised MADV_RANDOM (VmFlags "rr" in
// /proc/self/smaps), so that writes through it dirty single pages, not the large page-cache
// folios a fault would otherwise allocate (see File.Map); a read-only one is not.
func TestWritableMapIsPaged(t *testing.T) {
	dir := t.TempDir()
	smaps.SkipIfAdviceIgnored(t)
	for _, writable := range []bool{true, false} {
		name := filepath.Join(dir, fmt.Sprintf("w%v", writable))
		f, err := OS.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Allocate(4 << 20); err != nil {
			t.Fatal(err)
		}
		m, err := f.Map(4<<20, writable)
		if err != nil {
			t.Fatal(err)
		}
		flags := vmFlags(t, name)
		f.Unmap(m)
		f.Close()
		if random := bytes.Contains(flags, []byte(" rr")); random != writable {
			t.Errorf("writable %v: VmFlags%s: random-access advice %v, want %v", writable, flags, random, writable)
		}
	}
}

// vmFlags returns the VmFlags of the mapping of the file name, with a leading space; it
// skips t when there is none to read.
func vmFlags(t *testing.T, name string) []byte {
	t.Helper()
	flags, found, err := smaps.VmFlags(smaps.File(name))
	if err != nil || !found || flags == "" {
		t.Skipf("no VmFlags for %s in %s: %v", name, smaps.Path, err)
	}
	return []byte(" " + flags)
}

// TestPopulate: Populate maps the pages of a writable mapping (they count in its RSS)
// without changing the file: what was written stays, the rest reads as zeros. Where the OS
// cannot (Linux before 5.14, qemu-user), it says so with errors.ErrUnsupported.
func TestPopulate(t *testing.T) {
	const size = 1 << 20
	name := filepath.Join(t.TempDir(), "seg")
	f := mustOpen(t, OS, name, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	defer f.Close()
	if err := f.Allocate(size); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("written before"), 4096); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(size, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Unmap(m)
	smaps.SkipIfAdviceIgnored(t)
	if err := f.Populate(m[:size/2]); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if got := mappingRss(t, name); got < size/2 || got >= size {
		t.Errorf("mapping RSS after populating half of %d bytes = %d", size, got)
	}
	want := make([]byte, size)
	copy(want[4096:], "written before")
	got := make([]byte, size)
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) || !bytes.Equal(m, want) {
		t.Fatalf("populating changed the file (err %v)", err)
	}
}
