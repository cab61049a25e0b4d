package meta

import (
	"fmt"
	"testing"
)

// BenchmarkSetOffsets1000 commits 1000 offsets per transaction, about what
// the broker persists every 5 s for 60 topics of 16 queues.
func BenchmarkSetOffsets1000(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		b.Run(fmt.Sprintf("nosync=%v", noSync), func(b *testing.B) {
			s, err := Open(b.TempDir(), &Options{NoSync: noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			offs := make([]Offset, 1000)
			for i := range offs {
				offs[i] = Offset{Group: fmt.Sprintf("group-%d", i/100), Topic: fmt.Sprintf("topic-%d", i/16%7), QueueID: int32(i % 16)}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for j := range offs {
					offs[j].Offset = int64(i)
				}
				if err := s.SetOffsets(offs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
