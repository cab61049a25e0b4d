// Package pace waits until given instants, precisely enough for a sender paced at tens of
// thousands of messages a second: `edgemq bench -rate` and the benchmarks' paced senders.
//
// At 10,000 sends a second a sender waits about 100 µs between sends, and time.Sleep cannot
// wait that little in a process with nothing else to do: the runtime's poller then sleeps in
// epoll with a timeout of whole milliseconds, so a 100 µs sleep lasts a millisecond and the
// sender catches up with a burst of ten sends, each queued behind the ones before it: a
// latency measured so measures the bursts. A Pacer waits the last stretch on a timerfd read
// through the poller, on Linux, which wakes it when the timer fires: BenchmarkWait100us, on a
// virtual machine of two CPUs, has its waits return 33-35 µs late at the median and 70-79 µs
// at p99, against 0.54-0.55 ms and 1.09-1.10 ms for time.Sleep. The timer is armed and read
// in raw system calls, which the runtime does not count as system calls: each wait would
// otherwise wake the runtime's monitor thread, which then polls every 20 µs for about a
// millisecond on the CPUs the paced work needs.
package pace
