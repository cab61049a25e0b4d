package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/vfs"
)

// TestReadYourWrites: an acknowledged message is visible to every read path when it is
// acknowledged, with 32 appenders, in both flush modes: right after Append returns, and
// inside AppendAsync's done (called from the acknowledgement goroutine in sync mode, and
// before AppendAsync returns in async mode; a check there sees the store as the
// acknowledgement leaves it, before any later dispatch could hide a missing one), across
// segment rolls (a segment's first record is dispatched from the log). MaxOffset
// counts the message, GetMessages at its offset returns it, ReadMessage at its position reads
// it, and OffsetByTime brackets it: its store time gives an offset at or before it, the next
// millisecond one after it.
func TestReadYourWrites(t *testing.T) {
	for _, fl := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		for _, async := range []bool{false, true} {
			name := fl.String() + "/Append"
			if async {
				name = fl.String() + "/AppendAsync"
			}
			t.Run(name, func(t *testing.T) {
				s := openStore(t, t.TempDir(), Options{Flush: fl, SegmentSize: testSeg}) // a few segment rolls
				defer s.Close()
				const producers, each = 32, 60
				pad := bytes.Repeat([]byte{'p'}, 300)
				var bad atomic.Int64
				check := func(m *Message) {
					if err := visible(s, m); err != nil && bad.Add(1) <= 3 {
						t.Error(err)
					}
				}
				var wg sync.WaitGroup
				for p := range producers {
					wg.Go(func() {
						for i := range each {
							m := msg("RYW", int32(p%4), p*each+i)
							m.Body = append(m.Body, pad...)
							if !async {
								if err := s.Append([]*Message{m}); err != nil {
									t.Error(err)
									return
								}
								check(m)
								continue
							}
							acked := make(chan struct{})
							err := s.AppendAsync([]*Message{m}, func(err error) {
								if err != nil {
									t.Error(err)
								} else {
									check(m)
								}
								close(acked)
							})
							if err != nil {
								t.Error(err)
								return
							}
							<-acked
						}
					})
				}
				wg.Wait()
				if n := bad.Load(); n > 0 {
					t.Fatalf("%d of %d acknowledged messages were not visible at their acknowledgement", n, producers*each)
				}
			})
		}
	}
}

// visible reports the read paths m, just acknowledged, is missing from.
func visible(s *Store, m *Message) error {
	var errs []error
	if max := s.MaxOffset(m.Topic, m.QueueID); max <= m.QueueOffset {
		errs = append(errs, fmt.Errorf("MaxOffset %d, want > %d", max, m.QueueOffset))
	}
	res, err := s.GetMessages(m.Topic, m.QueueID, m.QueueOffset, 1, nil)
	if err != nil || res.Status != Found || len(res.Messages) != 1 || res.Messages[0].Pos != m.Pos || !bytes.Equal(res.Messages[0].Body, m.Body) {
		errs = append(errs, fmt.Errorf("GetMessages at its offset: %v, %d messages, err %v", res.Status, len(res.Messages), err))
	}
	if r, err := s.ReadMessage(m.Pos); err != nil || r.QueueOffset != m.QueueOffset || !bytes.Equal(r.Body, m.Body) {
		errs = append(errs, fmt.Errorf("ReadMessage at its position: %+v, %v", r, err))
	}
	if off, err := s.OffsetByTime(m.Topic, m.QueueID, m.StoreTime); err != nil || off > m.QueueOffset {
		errs = append(errs, fmt.Errorf("OffsetByTime(its store time) = %d, %v; want <= %d", off, err, m.QueueOffset))
	}
	if off, err := s.OffsetByTime(m.Topic, m.QueueID, m.StoreTime+1); err != nil || off <= m.QueueOffset {
		errs = append(errs, fmt.Errorf("OffsetByTime(its store time + 1 ms) = %d, %v; want > %d", off, err, m.QueueOffset))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s/%d@%d (pos %d):\n%w", m.Topic, m.QueueID, m.QueueOffset, m.Pos, err)
	}
	return nil
}

// TestAppendWaitsForDispatch: while the dispatch token is held, an Append does not return,
// in either flush mode: its message is not visible yet; once the token is released, Append
// returns with the message visible.
func TestAppendWaitsForDispatch(t *testing.T) {
	for _, fl := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		t.Run(fl.String(), func(t *testing.T) {
			s := openStore(t, t.TempDir(), Options{Flush: fl})
			defer s.Close()
			appendN(t, s, "W", 0, 0, 1) // the queue exists
			s.dmu.Lock()
			m := msg("W", 0, 1)
			returned := make(chan error, 1)
			go func() { returned <- s.Append([]*Message{m}) }()
			select {
			case err := <-returned:
				s.unlockDispatch()
				t.Fatalf("Append returned (%v) while the dispatch token was held", err)
			case <-time.After(50 * time.Millisecond):
			}
			s.unlockDispatch()
			if err := <-returned; err != nil {
				t.Fatal(err)
			}
			if err := visible(s, m); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// queueFullFS fails the creation of consume-queue files with ErrNoSpace while full is set.
type queueFullFS struct {
	vfs.FS
	full *atomic.Bool
}

func (f queueFullFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if f.full.Load() && flag&os.O_CREATE != 0 && strings.Contains(name, queuesDir) {
		return nil, &os.PathError{Op: "open", Path: name, Err: vfs.ErrNoSpace}
	}
	return f.FS.OpenFile(name, flag, perm)
}

// TestAppendWhileQueueFull: when a consume queue cannot take its entries (its next file
// cannot be created on a full disk), Append still returns, nil, in either flush mode: the
// message is stored, and its entry is written once the queue can take it, when the next
// append comes.
func TestAppendWhileQueueFull(t *testing.T) {
	for _, fl := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		t.Run(fl.String(), func(t *testing.T) {
			full := new(atomic.Bool)
			s := openStore(t, t.TempDir(), Options{FS: queueFullFS{vfs.OS, full}, Flush: fl, QueueSegmentEntries: 16})
			defer s.Close()
			appendN(t, s, "F", 0, 0, 8) // before the dispatcher makes the next file ahead
			full.Store(true)
			appendN(t, s, "F", 0, 8, 8) // the queue's first file is full
			returned := make(chan error, 1)
			go func() {
				for i := 16; i < 20; i++ {
					if err := s.Append([]*Message{msg("F", 0, i)}); err != nil {
						returned <- err
						return
					}
				}
				returned <- nil
			}()
			select {
			case err := <-returned:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Append hangs while its queue cannot take entries")
			}
			if got := s.MaxOffset("F", 0); got != 16 {
				t.Fatalf("max offset %d with the queue full, want 16", got)
			}
			full.Store(false)
			m := msg("F", 0, 20)
			if err := s.Append([]*Message{m}); err != nil {
				t.Fatal(err)
			}
			if err := visible(s, m); err != nil {
				t.Fatal(err)
			}
			if got := len(getAll(t, s, "F", 0, nil)); got != 21 {
				t.Fatalf("%d messages after the queue took entries again, want 21", got)
			}
		})
	}
}
