package edge

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// TestPullViewsOrPark: a suspended pull that finds nothing is parked without blocking its
// caller, and its wake is called once, by whichever comes first: a message it wants, its
// wait running out, its ctx's end, the broker's Close; a message of another tag wakes
// nothing. Found messages, or a pull without Suspend, return at once unparked, wake never
// called.
func TestPullViewsOrPark(t *testing.T) {
	q := mq.MessageQueue{Topic: "H"}
	count := func(n *int) func(*store.View) { return func(*store.View) { *n++ } }
	park := func(t *testing.T, b *Broker, ctx context.Context, req mq.PullRequest) *atomic.Int32 {
		t.Helper()
		var woke atomic.Int32
		var n int
		res, parked, err := b.PullViewsOrPark(ctx, req, count(&n), func() { woke.Add(1) })
		if err != nil || !parked || n != 0 || res.Status != 0 {
			t.Fatalf("PullViewsOrPark = %+v, parked %v, %v, %d visited; want parked", res, parked, err, n)
		}
		holdParked(t, b, 1)
		return &woke
	}
	woken := func(t *testing.T, b *Broker, woke *atomic.Int32, want int32) {
		t.Helper()
		synctest.Wait()
		if got := woke.Load(); got != want {
			t.Fatalf("woken %d times, want %d", got, want)
		}
		if want > 0 && b.hold.parked() != 0 {
			t.Fatalf("%d pulls parked after the wake", b.hold.parked())
		}
	}
	req := mq.PullRequest{Group: "g", Queue: q, Filter: "A", Suspend: true, MaxWait: 5 * time.Second}

	t.Run("arrival", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := holdBroker(t, Options{})
			woke := park(t, b, context.Background(), req)
			holdSend(t, b, "H", 1, "A") // another queue
			holdSend(t, b, "H", 0, "B") // another tag
			woken(t, b, woke, 0)
			holdSend(t, b, "H", 0, "A")
			woken(t, b, woke, 1)
			time.Sleep(10 * time.Second) // its timer and ctx watch were stopped
			woken(t, b, woke, 1)
			var n int
			res, err := b.PullViews(context.Background(), mq.PullRequest{Group: "g", Queue: q, Filter: "A"}, count(&n))
			if err != nil || res.Status != mq.PullFound || n != 1 {
				t.Fatalf("read again: %+v, %v, %d visited", res, err, n)
			}
		})
	})
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := holdBroker(t, Options{})
			woke := park(t, b, context.Background(), req)
			time.Sleep(5*time.Second - time.Nanosecond)
			woken(t, b, woke, 0)
			time.Sleep(time.Nanosecond)
			woken(t, b, woke, 1)
		})
	})
	t.Run("ctx", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := holdBroker(t, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			woke := park(t, b, ctx, req)
			cancel()
			woken(t, b, woke, 1)
			time.Sleep(10 * time.Second)
			woken(t, b, woke, 1)
		})
	})
	t.Run("close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := holdBroker(t, Options{})
			woke := park(t, b, context.Background(), req)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			woken(t, b, woke, 1)
			if _, parked, err := b.PullViewsOrPark(context.Background(), req, count(new(int)), func() {}); parked || !errors.Is(err, ErrClosed) {
				t.Fatalf("after Close: parked %v, %v; want %v", parked, err, ErrClosed)
			}
		})
	})
	t.Run("unparked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := holdBroker(t, Options{})
			holdSend(t, b, "H", 0, "A")
			var woke atomic.Int32
			wake := func() { woke.Add(1) }
			var n int
			res, parked, err := b.PullViewsOrPark(context.Background(), req, count(&n), wake)
			if err != nil || parked || res.Status != mq.PullFound || n != 1 || res.NextBeginOffset != 1 {
				t.Fatalf("with a message: %+v, parked %v, %v, %d visited", res, parked, err, n)
			}
			res, parked, err = b.PullViewsOrPark(context.Background(), mq.PullRequest{Group: "g", Queue: q, Offset: 1, Filter: "A"}, count(&n), wake)
			if err != nil || parked || res.Status != mq.PullNoNewMsg {
				t.Fatalf("without Suspend: %+v, parked %v, %v", res, parked, err)
			}
			if _, _, err := b.PullViewsOrPark(context.Background(), req, nil, wake); !errors.Is(err, mq.ErrInvalidArgument) {
				t.Fatalf("nil visit: %v", err)
			}
			if _, _, err := b.PullViewsOrPark(context.Background(), req, count(&n), nil); !errors.Is(err, mq.ErrInvalidArgument) {
				t.Fatalf("nil wake: %v", err)
			}
			woken(t, b, &woke, 0)
		})
	})
}
