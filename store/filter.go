package store

import (
	"fmt"
	"strings"
)

// Filter selects messages by tag. GetMessages asks MatchHash of the consume-queue entry first
// (cheap, may give false positives) and MatchTag of the record after.
type Filter interface {
	MatchHash(hash int64) bool
	MatchTag(tags string) bool
}

// TagFilter is RocketMQ's TAG expression: "*" (or "") matches everything, "A || B" matches a
// message whose tag is A or B.
type TagFilter struct {
	all    bool
	tags   []string
	hashes []int64
}

// ParseTagFilter parses a TAG expression. A tag may not be empty or contain "||".
func ParseTagFilter(expr string) (*TagFilter, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return &TagFilter{all: true}, nil
	}
	f := &TagFilter{}
	for _, t := range strings.Split(expr, "||") {
		t = strings.TrimSpace(t)
		if t == "" {
			return nil, fmt.Errorf("store: empty tag in expression %q", expr)
		}
		f.tags = append(f.tags, t)
		f.hashes = append(f.hashes, TagHash(t))
	}
	return f, nil
}

// All reports whether the filter matches every message.
func (f *TagFilter) All() bool { return f.all }

// Tags returns the tags of the expression (none for "*").
func (f *TagFilter) Tags() []string { return f.tags }

// MatchHash implements Filter.
func (f *TagFilter) MatchHash(h int64) bool {
	if f.all {
		return true
	}
	for _, x := range f.hashes {
		if x == h {
			return true
		}
	}
	return false
}

// MatchTag implements Filter.
func (f *TagFilter) MatchTag(tags string) bool {
	if f.all {
		return true
	}
	for _, t := range f.tags {
		if t == tags {
			return true
		}
	}
	return false
}

// String returns the expression in canonical form.
func (f *TagFilter) String() string {
	if f.all {
		return "*"
	}
	return strings.Join(f.tags, " || ")
}
