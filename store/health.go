package store

import (
	"errors"

	"github.com/edgemq/edgemq/store/commitlog"
)

// Err returns the store's disk failure, or nil while the disk works: the commitlog's failed
// fsync (wrapping commitlog.ErrFlush; sticky, as the log refuses writes until reopened), else
// the error of the last append that failed on the disk (a full disk, a file that could not be
// made) until an append succeeds, else that of the last fsync of the consume queues and the
// dispatch checkpoint until one succeeds. An append refused for its input
// (ErrMessageTooLarge, ErrInvalidMessage) or after Close is no disk failure.
func (s *Store) Err() error {
	if err := s.log.Err(); err != nil {
		return err
	}
	if p := s.writeErr.Load(); p != nil {
		return *p
	}
	if p := s.syncErr.Load(); p != nil {
		return *p
	}
	return nil
}

// noteWrite records the outcome of an append's disk work for Err: err nil clears it.
func (s *Store) noteWrite(err error) {
	switch {
	case err == nil:
		if s.writeErr.Load() != nil {
			s.writeErr.Store(nil)
		}
	case errors.Is(err, commitlog.ErrTooLarge), errors.Is(err, commitlog.ErrClosed):
	default:
		e := err // only a failure allocates: appends make none
		s.writeErr.Store(&e)
	}
}

// noteSync records the outcome of a sync of the queues for Err: err nil clears it.
func (s *Store) noteSync(err error) {
	if err == nil {
		if s.syncErr.Load() != nil {
			s.syncErr.Store(nil)
		}
		return
	}
	if !errors.Is(err, ErrClosed) {
		e := err
		s.syncErr.Store(&e)
	}
}
