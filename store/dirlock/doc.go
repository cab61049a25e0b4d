// Package dirlock keeps two broker processes from opening the same data
// directory at once.
//
// [Acquire] takes an exclusive, non-blocking flock(2) on the file LOCK inside
// the directory and writes the holder's process ID into it as decimal text
// followed by a newline. A second Acquire on the same directory fails at once
// with an error that matches [ErrLocked] and names the holder's pid, whether
// the holder is another process or the same one: on Linux a flock belongs to
// the open file description, so two opens of LOCK in one process conflict too.
//
// The kernel drops the lock when the holder exits, however it exits, so a
// LOCK file left behind by a crash holds a stale pid but does not block the
// next Acquire, which overwrites it. [Lock.Release] unlocks but leaves the
// file in place: removing it would let a later Acquire lock a fresh file
// while a racing process still locks the unlinked one.
//
// flock is used on Linux, the BSDs and macOS; on other systems Acquire
// returns an error matching [errors.ErrUnsupported].
package dirlock
