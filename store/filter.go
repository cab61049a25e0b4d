package store

// Filter selects messages by tag. GetMessages asks MatchHash of the consume-queue entry first
// (cheap, may give false positives) and MatchTag of the record after.
type Filter interface {
	MatchHash(hash int64) bool
	MatchTag(tags string) bool
}
