package consumer

import "time"

// clockBase is the origin of monoNow's clock.
var clockBase = time.Now()

// monoNow reads the consumer's clock: nanoseconds since clockBase on the monotonic clock (0,
// which it reads only at clockBase, can mean "not set"). It reads one clock where time.Now
// reads two, and the times the consumer keeps as integers are on it rather than on the wall
// clock: consume start times (ConsumeTimeout), last pull times (PullExpiry) and last lock
// times (LockExpiry). A step of the wall clock, as when a gateway without a real-time clock
// boots with a stale time and NTP then sets it, would otherwise expire all of them at once
// (every message in consumption sent back, every queue dropped and pulled again) or keep
// them from expiring for the step's length.
func monoNow() int64 { return int64(time.Since(clockBase)) }

// monoOf returns t on monoNow's clock: by its monotonic reading when it has one (as
// time.Now's results do), else by its wall reading.
func monoOf(t time.Time) int64 { return int64(t.Sub(clockBase)) }
