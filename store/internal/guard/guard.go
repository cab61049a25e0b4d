// Package guard runs the calls of the store's hostile-input tests, so that a call that
// panics or hangs fails its test, naming the call, instead of crashing or stalling the suite.
package guard

import (
	"fmt"
	"runtime/debug"
	"testing"
	"time"
)

// Timeout is how long Call waits for a call to return.
const Timeout = 10 * time.Second

// Call runs f and returns its error; it fails t if f panics or has not returned after
// Timeout.
func Call(t testing.TB, name string, f func() error) error {
	t.Helper()
	type result struct {
		err   error
		panic string
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- result{panic: fmt.Sprintf("%v\n%s", r, debug.Stack())}
			}
		}()
		ch <- result{err: f()}
	}()
	select {
	case r := <-ch:
		if r.panic != "" {
			t.Fatalf("%s panicked: %s", name, r.panic)
		}
		return r.err
	case <-time.After(Timeout):
		t.Fatalf("%s has not returned after %v", name, Timeout)
		return nil
	}
}
