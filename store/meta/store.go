package meta

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FileName is the name of the metadata file inside the data directory.
const FileName = "meta.db"

// Bucket names; doc.go lists each bucket's keys and values.
const (
	bucketOffsets  = "offsets"
	bucketTopics   = "topics"
	bucketGroups   = "groups"
	bucketDelay    = "delay"
	bucketUplink   = "uplink"
	bucketSettings = "settings"
)

// buckets lists every bucket Open creates.
var buckets = []string{bucketOffsets, bucketTopics, bucketGroups, bucketDelay, bucketUplink, bucketSettings}

// settingsKey is the only key of the settings bucket.
var settingsKey = []byte("settings")

// Options configures Open. A nil *Options, or a zero field, takes the value
// in DefaultOptions.
type Options struct {
	// Timeout is how long Open waits for another process to release its
	// lock on meta.db before failing with an error matching bbolt's
	// ErrTimeout. A negative Timeout fails at once. Default 1 s.
	Timeout time.Duration

	// NoSync skips the fsync after each commit, so a crash can lose or
	// corrupt recent writes. For tests only. Default false.
	NoSync bool
}

// DefaultOptions are the options Open uses for a nil *Options and for zero
// fields.
var DefaultOptions = Options{
	Timeout: time.Second,
}

// Store is the broker's metadata, backed by dir/meta.db. It is safe for
// concurrent use; it starts no goroutines.
type Store struct {
	db     *bolt.DB
	closed atomic.Bool
}

// Open opens or creates dir/meta.db, which must be in an existing directory
// (not ""), and creates any missing buckets.
func Open(dir string, opts *Options) (s *Store, err error) {
	o := DefaultOptions
	if opts != nil {
		o = *opts
		if o.Timeout == 0 {
			o.Timeout = DefaultOptions.Timeout
		}
	}
	if dir == "" { // else meta.db would be made in the working directory
		return nil, errors.New("meta: empty dir path")
	}
	path := filepath.Join(dir, FileName)
	var db *bolt.DB
	defer func() {
		if err != nil && db != nil {
			db.Close()
		}
	}()
	defer catchDamage("open "+path, &err, debug.SetPanicOnFault(true)) // bbolt reads the freelist
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: o.Timeout, NoSync: o.NoSync})
	if err != nil {
		return nil, fmt.Errorf("meta: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range buckets {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("meta: open %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file after any transactions in progress end. Later calls
// of any method, Close included, return ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("meta: close: %w", err)
	}
	return nil
}

// checkOpen returns ErrClosed after Close: for calls with nothing to do.
func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// view runs fn in a read-only transaction; op names the caller in errors.
func (s *Store) view(op string, fn func(*bolt.Tx) error) (err error) {
	if s.closed.Load() {
		return ErrClosed
	}
	defer catchDamage(op, &err, debug.SetPanicOnFault(true))
	return wrapErr(op, s.db.View(fn))
}

// update runs fn in a read-write transaction; op names the caller in errors.
func (s *Store) update(op string, fn func(*bolt.Tx) error) (err error) {
	if s.closed.Load() {
		return ErrClosed
	}
	defer catchDamage(op, &err, debug.SetPanicOnFault(true))
	return wrapErr(op, s.db.Update(fn))
}

// catchDamage, deferred by a caller of bbolt that turned panics on faults on (its old
// setting is was), turns a panic into a *CorruptError in *err. bbolt trusts the pages of
// meta.db but for their meta pages: reading a damaged one it faults on an address past its
// mapping or indexes out of range, and would crash the process. (View and Update roll the
// transaction back as the panic passes.) Damage that sends bbolt into unbounded recursion
// still crashes it: the Go runtime does not recover from stack exhaustion.
func catchDamage(op string, err *error, was bool) {
	debug.SetPanicOnFault(was)
	if r := recover(); r != nil {
		*err = &CorruptError{Op: op, Err: fmt.Errorf("%s is damaged: %v", FileName, r)}
	}
}

// wrapErr names op in err unless err already says what failed.
func wrapErr(op string, err error) error {
	var ce *CorruptError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bolt.ErrDatabaseNotOpen):
		return ErrClosed
	case errors.As(err, &ce), errors.Is(err, ErrInvalidKey):
		return err
	default:
		return fmt.Errorf("meta: %s: %w", op, err)
	}
}

// bucket returns the named bucket of tx, or a CorruptError if it is missing.
func bucket(tx *bolt.Tx, op, name string) (*bolt.Bucket, error) {
	b := tx.Bucket([]byte(name))
	if b == nil {
		return nil, &CorruptError{Op: op, Bucket: name, Err: errors.New("bucket missing")}
	}
	return b, nil
}

// scanPrefix calls fn for each entry of b whose key starts with prefix, in
// key order, stopping at the first error.
func scanPrefix(b *bolt.Bucket, prefix []byte, fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// PutSettings stores the store-wide settings, replacing any stored before.
func (s *Store) PutSettings(st Settings) error {
	const op = "put settings"
	return s.update(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bucketSettings)
		if err != nil {
			return err
		}
		return b.Put(settingsKey, encode(st))
	})
}

// Settings returns the stored settings, and false if none were stored.
func (s *Store) Settings() (Settings, bool, error) {
	const op = "settings"
	var (
		st Settings
		ok bool
	)
	err := s.view(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bucketSettings)
		if err != nil {
			return err
		}
		v := b.Get(settingsKey)
		if v == nil {
			return nil
		}
		if st, err = decodeSettings(v); err != nil {
			return &CorruptError{Op: op, Bucket: bucketSettings, Key: settingsKey, Err: err}
		}
		ok = true
		return nil
	})
	if err != nil {
		return Settings{}, false, err
	}
	return st, ok, nil
}
