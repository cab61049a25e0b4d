// Package cqueue implements a consume queue: the dense index of one (topic, queue id) in
// the message store. The entry at queue offset i says where the queue's i-th message sits
// in the commitlog; a consumer reads entries, then the records they point at.
//
// # Entry
//
// An entry is EntrySize (20) bytes, big-endian, with no checksum of its own (the commitlog
// record it points at has one):
//
//	offset  size  field    type   valid values
//	0       8     pos      int64  >= MinPos (64): commitlog position of the record
//	8       4     size     int32  > 0: size of the record in bytes
//	12      8     tagHash  int64  any: hash of the message tag, for filtering
//
// No record starts below the commitlog's file header, so an all-zero entry is never a
// real one: it means "no entry", the end of the data. Files are created zero-filled.
//
// # Files
//
// A queue lives in a directory of its own. Each file holds SegmentEntries entries (Options;
// default 65536, 1.25 MiB) in slots 0..SegmentEntries-1, the entry at queue offset base+i in
// slot i. A file is named "%020d.cq" for base, the queue offset of its first slot, so names
// sort in offset order; each file's base is the previous one's plus SegmentEntries. The
// first file's base is the offset the queue started at, which need not be 0 (a queue may
// start at any offset after retention or a rebuild). There is no header and no version:
// a format change must change the extension.
//
// Files are created at full size (File.Allocate), so writing an entry never needs space.
// Only the last file, the active one, is written, through a writable mapping; sealed
// (full) files are read with ReadAt, keeping a queue's address space at one file, which
// matters on 32-bit ARM with hundreds of queues. Of the active file's mapping, about
// Options.ResidentBytes (64 KiB) behind the last entry stays in the process's resident set;
// older pages are dropped from it (resident.go), so hundreds of queues do not each hold a
// file's worth of RSS.
//
// # Durability
//
// An appended entry is durable after Sync. A file is created (under a temporary name,
// next.cq.tmp, when made ahead by Prepare), allocated at full size and synced before it gets
// its name, so its size is durable first. When the active file fills, the next one becomes
// active; the full file is synced later, by the next Sync or Prepare, or by the next switch
// at the latest, which also syncs the directory if a name is not yet durable. So after a
// power cut every file but the last two is whole, and of those two only the last may be
// missing, and either may end in a torn or partly written tail.
//
// Entries carry no checksum, so recovery can only cut what does not decode: an unsynced
// entry whose sector was torn, or filled with garbage, by the power cut may come back as a
// valid-looking entry with wrong values. The store must not trust entries past its last
// Sync: it truncates the queue there (TruncateFrom) and dispatches again from the
// commitlog, whose records are checksummed.
//
// # Recovery
//
// Open keeps the newest run of contiguous files and removes any file before a gap (the
// remains of a DeleteBefore or rebase cut short). In the last file, the data ends at the
// first all-zero entry, or at the first non-zero entry that does not decode: Max is the
// offset of that slot. That entry and every byte after it in the file are zeroed (and
// logged), so a stale entry past the end can never come back once later slots are
// written. The file before the last is scanned too: if one of its entries does not decode
// (its sync had not happened), the queue ends there and the last file is removed. Older
// files are not scanned. A next.cq.tmp left by Prepare is removed. Min is the base of the first file: a Min moved
// inside a file by DeleteBefore is not persisted, and the store repeats DeleteBefore
// after Open. The store then compares the queue with the commitlog (Last, Search) and
// calls TruncateFrom for entries past the commitlog's end.
package cqueue
