// Package commitlog is EdgeMQ's append-only record log: segmented, preallocated files written
// and read through shared memory mappings, checksummed record by record, with group-commit
// fsync, background preparation of the next segment, crash recovery, and retention by age,
// byte quota and file-system fill.
//
// It knows bytes, positions and store times only; the message codec, consume queues and
// everything RocketMQ live above it, in package store. The byte layout is specified in
// store/FORMAT.md; in short:
//
// Segment file: named %020d.log of its base position; SegmentSize bytes, preallocated;
// a 64-byte header (two identical 32-byte copies: magic "EMQL", format version, payload
// version, base position, base time in unix ms, CRC32-C); then frames back to back; then
// zeros. A zero byte where a frame would start ends the segment's data.
//
// Frame: uvarint n | u32 CRC32-C (big-endian) | zigzag varint (storeTime - baseTime) | payload,
// where n counts the varint and the payload and the CRC covers every byte of the frame except
// itself.
//
// A record's position is its segment's base plus its byte offset in the file: a stable,
// unique id that never changes while the record exists. Segment k+1's base is segment k's
// base plus SegmentSize, so positions grow and file names sort.
//
// Durability: in FlushSync mode Append+WaitDurable return only after an fsync covering the
// records; in FlushAsync mode a flush runs every FlushInterval or FlushBytes. A new segment's
// name is made durable (rename + directory fsync) before any record is written into it.
//
// Resident set: of the mappings, about Options.ResidentBytes just behind the write position
// stay in the process's RSS; older pages, flushed or not, and pages readers faulted in
// further back are dropped from it (madvise, not unmap: they stay in the page cache, dirty
// ones until the next fsync). See resident.go.
//
// Prefaulting: with async flush, while the log is written faster than Options.PrefaultRate,
// a goroutine maps the Options.PrefaultBytes ahead of the write position for writing, so
// that appends do not take a page fault per new page under the append lock; when it falls
// behind, an appender maps the next pages itself after its append. See prefault.go.
//
// Write buffer: with Options.WriteBuffer (by default with FlushSync), appends gather records
// in memory and write them to the segment file in one pwrite when the buffer is full, at a
// roll, before every fsync and, with FlushSync, before a lazy append returns; reads of
// records still in the buffer copy them from it. With FlushSync the buffer's write-out also
// writes zeros Options.ZeroAhead past the records, so that later records land on blocks
// written before and an fsync does not commit the file system's journal for them. See
// wbuf.go.
//
// Recovery (Open): from the checkpoint (the last flushed position, rewritten after flushes)
// the log walks frames to the first one that is not whole: a zero byte ends a segment and the
// walk goes on in the next one; a frame that fails its length or CRC is cut. Cut bytes, and
// any non-zero bytes after the end of the last segment, are saved in a .broken file
// (<segment>.<offset>.<recovery>.broken), then zeroed, so that no stale bytes can later be
// mistaken for a record. Segments recovery cannot serve are moved aside as .broken files, or
// removed if they held no record; Open then deletes the oldest .broken files beyond
// Options.MaxBrokenBytes, and Log.Recovery says what was cut. Reads verify each frame's CRC
// again, so damage in data older than the checkpoint is reported as a *CorruptError and
// never returned as a record.
package commitlog
