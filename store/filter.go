package store

// Filter selects messages by tag. GetMessages asks MatchHash of the consume-queue entry first
// (cheap, may give false positives) and MatchTag of the record after, before it copies the
// message: tags aliases the store's memory, so MatchTag must not keep it past its return.
type Filter interface {
	MatchHash(hash int64) bool
	MatchTag(tags string) bool
}
