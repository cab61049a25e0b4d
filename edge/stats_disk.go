package edge

import (
	"fmt"

	"github.com/edgemq/edgemq/store/vfs"
)

// DiskStats is what the file system holding the broker's data dir says of its space.
type DiskStats struct {
	// Dir is the broker's data dir.
	Dir string
	// TotalBytes is the file system's size, FreeBytes what an unprivileged writer may still
	// use of it (statfs's f_bavail).
	TotalBytes, FreeBytes uint64
}

// UsedBytes is the space of the file system not free for the broker.
func (d DiskStats) UsedBytes() uint64 { return d.TotalBytes - min(d.FreeBytes, d.TotalBytes) }

// DiskStats asks the file system holding the data dir for its size and free space (the
// store's file system layer, Options.Store.FS). Errors: ErrClosed, or the statfs error.
func (b *Broker) DiskStats() (DiskStats, error) {
	if err := b.check(); err != nil {
		return DiskStats{}, err
	}
	fs := vfs.OS
	if b.opts.Store != nil && b.opts.Store.FS != nil {
		fs = b.opts.Store.FS
	}
	dir := b.st.Dir()
	u, err := fs.Usage(dir)
	if err != nil {
		return DiskStats{Dir: dir}, fmt.Errorf("edge: disk stats: %w", err)
	}
	return DiskStats{Dir: dir, TotalBytes: u.Total, FreeBytes: u.Free}, nil
}
