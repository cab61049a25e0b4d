package mq

import (
	"fmt"
	"strings"
)

// TagFilter is RocketMQ's TAG expression: "*" (or "") matches every message, "A || B" a
// message whose tag is A or B.
type TagFilter struct {
	all  bool
	tags []string
}

// matchAll is the filter of "*": filters are never changed once parsed, so one serves all.
var matchAll = &TagFilter{all: true}

// ParseTagFilter parses a TAG expression. A tag may not be empty or contain "||". Errors
// wrap ErrInvalidArgument. The filter returned is read-only (every "*" shares one).
func ParseTagFilter(expr string) (*TagFilter, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return matchAll, nil
	}
	f := &TagFilter{}
	for _, t := range strings.Split(expr, "||") {
		t = strings.TrimSpace(t)
		if t == "" {
			return nil, fmt.Errorf("%w: empty tag in expression %q", ErrInvalidArgument, expr)
		}
		f.tags = append(f.tags, t)
	}
	return f, nil
}

// All reports whether the filter matches every message.
func (f *TagFilter) All() bool { return f.all }

// Tags returns the tags of the expression (none for "*").
func (f *TagFilter) Tags() []string { return f.tags }

// Match reports whether a message with tag tags passes the filter.
func (f *TagFilter) Match(tags string) bool {
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
