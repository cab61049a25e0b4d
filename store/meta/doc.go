// Package meta keeps the broker's metadata in one bbolt file, meta.db, in the
// data directory: consumer offsets, topic and subscription-group
// configuration, delay-level progress, uplink cursors and store settings.
//
// A [Store] is safe for concurrent use. Every method is one bbolt
// transaction, so a batch passed to SetOffsets, SetDelayProgress or
// PutUplinkCursors is committed whole or not at all. Deleting an entry that
// does not exist is not an error.
//
// # Buckets
//
// Each kind of entry lives in its own top-level bucket; Open creates any that
// are missing.
//
//	bucket     key                            value
//	offsets    queue key(group, topic, queue) int64, 8 bytes big-endian
//	topics     topic name                     msgp map of Topic
//	groups     group name                     msgp map of Group
//	delay      level, uint32 big-endian       int64, 8 bytes big-endian
//	uplink     queue key(name, topic, queue)  msgp map of UplinkCursor
//	settings   "settings"                     msgp map of Settings
//
// # Queue keys
//
// Entries about one queue of a topic, seen by a group or an uplink, use
//
//	offset  size  field
//	0       2     len(a), uint16 big-endian, 1..MaxNameLen
//	2       n     a (group or uplink name)
//	2+n     2     len(b), uint16 big-endian, 1..MaxNameLen
//	4+n     m     b (topic)
//	4+n+m   4     queue ID, uint32 big-endian, 0..2^31-1
//
// The length prefixes make the key unambiguous whatever bytes a name holds,
// and make every key of one group (or one group and topic) share a prefix, so
// such a range is one cursor seek. Keys sort by group (shorter names first,
// then bytewise), then topic the same way, then queue ID numerically; Offsets
// and UplinkCursors return entries in that order.
//
// # Values
//
// Topic, Group, UplinkCursor and Settings are msgpack maps written by code
// that github.com/tinylib/msgp generates into records_gen.go (run go generate
// after changing records.go). Map keys are the msg field tags, so fields can
// be added without a migration: old readers skip unknown keys and new readers
// leave missing fields zero. The name fields stored in a value must match its
// key.
//
// A value or key that does not decode is reported as a [*CorruptError]
// matching [ErrCorrupt]; nothing stored in the file can make the package
// panic. bbolt checksums only its meta pages and trusts the others: a damaged
// page makes it panic or fault on an address past its mapping, which every
// call that reaches bbolt catches (with runtime/debug.SetPanicOnFault) and
// reports as a [*CorruptError] saying the file is damaged. Damage that sends
// bbolt into unbounded recursion would still crash the process; none was
// seen in the bit-flip test.
package meta
