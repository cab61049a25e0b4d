package remoting

import (
	"errors"
	"fmt"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

func TestPullFiltersCache(t *testing.T) {
	var pf pullFilters
	a, err := pf.get("TagA || TagB")
	if err != nil {
		t.Fatal(err)
	}
	if a.expr != "TagA || TagB" || !a.f.Match("TagB") || a.f.Match("TagC") {
		t.Fatalf("parsed %q: %+v", "TagA || TagB", a)
	}
	if b, _ := pf.get("TagA || TagB"); b != a {
		t.Error("the same expression was parsed again")
	}
	if all, _ := pf.get("*"); all.expr != "*" || !all.f.Match("anything") {
		t.Errorf(`"*" parsed as %+v`, all)
	}
	if _, err := pf.get("TagA || "); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Errorf("a bad expression: %v, want ErrInvalidArgument", err)
	}
	// Past the cap, expressions are still parsed right, and the cache stops growing.
	for i := range maxPullFilters + 10 {
		expr := fmt.Sprintf("T%d", i)
		f, err := pf.get(expr)
		if err != nil || f.expr != expr || !f.f.Match(expr) || f.f.Match("other") {
			t.Fatalf("%s: %+v, %v", expr, f, err)
		}
	}
	n := 0
	pf.m.Range(func(_, _ any) bool { n++; return true })
	if n != maxPullFilters || pf.n.Load() != maxPullFilters {
		t.Errorf("cache holds %d (counted %d), want the cap %d", n, pf.n.Load(), maxPullFilters)
	}
	if allocs := testing.AllocsPerRun(100, func() { pf.get("TagA || TagB") }); allocs != 0 {
		t.Errorf("a cached expression allocates %v times", allocs)
	}
}
