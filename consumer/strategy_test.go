package consumer

import (
	"errors"
	"fmt"
	"github.com/edgemq/edgemq/edge/mq"
	"math/rand/v2"
	"slices"
	"testing"
)

// queues returns queues 0..n-1 of topic t.
func queues(t string, n int) []mq.MessageQueue {
	out := make([]mq.MessageQueue, n)
	for i := range out {
		out[i] = mq.MessageQueue{Topic: t, QueueID: int32(i)}
	}
	return out
}

// pick returns the queues of topic "t" with the given ids.
func pick(ids ...int32) []mq.MessageQueue {
	var out []mq.MessageQueue
	for _, id := range ids {
		out = append(out, mq.MessageQueue{Topic: "t", QueueID: id})
	}
	return out
}

func clientIDs(ids ...string) []string { return ids }

type allocCase struct {
	name    string
	s       AllocateStrategy
	cid     string
	mqs     []mq.MessageQueue
	cids    []string
	want    []mq.MessageQueue
	wantErr error
}

func runAllocCases(t *testing.T, cases []allocCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mqs, cids := slices.Clone(c.mqs), slices.Clone(c.cids)
			got, err := c.s.Allocate("g", c.cid, c.mqs, c.cids)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
			if !slices.Equal(mqs, c.mqs) || !slices.Equal(cids, c.cids) {
				t.Errorf("inputs modified: %v %v", c.mqs, c.cids)
			}
		})
	}
}

var abc = clientIDs("c0", "c1", "c2")

func TestAllocateAveragely(t *testing.T) {
	s := AllocateAveragely{}
	if s.Name() != "AVG" {
		t.Errorf("Name = %q", s.Name())
	}
	rev := queues("t", 8)
	slices.Reverse(rev)
	runAllocCases(t, []allocCase{
		{"8x3/c0", s, "c0", queues("t", 8), abc, pick(0, 1, 2), nil},
		{"8x3/c1", s, "c1", queues("t", 8), abc, pick(3, 4, 5), nil},
		{"8x3/c2", s, "c2", queues("t", 8), abc, pick(6, 7), nil},
		{"6x3/c1", s, "c1", queues("t", 6), abc, pick(2, 3), nil},
		{"3x5/c2", s, "c2", queues("t", 3), clientIDs("c0", "c1", "c2", "c3", "c4"), pick(2), nil},
		{"3x5/c3", s, "c3", queues("t", 3), clientIDs("c0", "c1", "c2", "c3", "c4"), nil, nil},
		{"unsorted", s, "c0", rev, clientIDs("c2", "c0", "c1"), pick(0, 1, 2), nil},
		{"duplicates", s, "c1", append(queues("t", 4), queues("t", 4)...), clientIDs("c1", "c0", "c1"), pick(2, 3), nil},
		{"0 queues", s, "c0", nil, abc, nil, nil},
		{"missing cid", s, "c9", queues("t", 8), abc, nil, nil},
		{"empty cid", s, "", queues("t", 8), abc, nil, ErrAllocate},
		{"no cids", s, "c0", queues("t", 8), nil, nil, ErrAllocate},
	})
}

func TestAllocateAveragelyByCircle(t *testing.T) {
	s := AllocateAveragelyByCircle{}
	if s.Name() != "AVG_BY_CIRCLE" {
		t.Errorf("Name = %q", s.Name())
	}
	runAllocCases(t, []allocCase{
		{"8x3/c0", s, "c0", queues("t", 8), abc, pick(0, 3, 6), nil},
		{"8x3/c1", s, "c1", queues("t", 8), abc, pick(1, 4, 7), nil},
		{"8x3/c2", s, "c2", queues("t", 8), clientIDs("c2", "c1", "c0"), pick(2, 5), nil},
		{"3x5/c2", s, "c2", queues("t", 3), clientIDs("c0", "c1", "c2", "c3", "c4"), pick(2), nil},
		{"3x5/c4", s, "c4", queues("t", 3), clientIDs("c0", "c1", "c2", "c3", "c4"), nil, nil},
		{"0 queues", s, "c0", nil, abc, nil, nil},
		{"missing cid", s, "c9", queues("t", 8), abc, nil, nil},
		{"empty cid", s, "", queues("t", 8), abc, nil, ErrAllocate},
		{"no cids", s, "c0", queues("t", 8), nil, nil, ErrAllocate},
	})
}

func TestAllocateByConfig(t *testing.T) {
	s := AllocateByConfig{Queues: append(pick(5, 1, 42), mq.MessageQueue{Topic: "u", QueueID: 1})}
	if s.Name() != "CONFIG" {
		t.Errorf("Name = %q", s.Name())
	}
	runAllocCases(t, []allocCase{
		{"c0", s, "c0", queues("t", 8), abc, pick(1, 5), nil},
		{"c2 same", s, "c2", queues("t", 8), abc, pick(1, 5), nil},
		{"0 queues", s, "c0", nil, abc, nil, nil},
		{"missing cid", s, "c9", queues("t", 8), abc, nil, nil},
		{"empty cid", s, "", queues("t", 8), abc, nil, ErrAllocate},
		{"no cids", s, "c0", queues("t", 8), nil, nil, ErrAllocate},
	})
}

// evenOdd puts the even queues of topic "t" in room A and the odd ones in room B.
func evenOdd(n int) RoomByPrefix {
	r := RoomByPrefix{Queues: map[mq.MessageQueue]string{}}
	for _, q := range queues("t", n) {
		r.Queues[q] = map[bool]string{true: "A", false: "B"}[q.QueueID%2 == 0]
	}
	return r
}

func TestAllocateByMachineRoom(t *testing.T) {
	s := AllocateByMachineRoom{Rooms: []string{"A"}, Resolver: evenOdd(8)}
	if s.Name() != "MACHINE_ROOM" {
		t.Errorf("Name = %q", s.Name())
	}
	both := AllocateByMachineRoom{Rooms: []string{"B", "A"}, Resolver: evenOdd(8)}
	runAllocCases(t, []allocCase{
		// premium q0 q2 q4 q6 over 3: one each, and c0 also takes the tail q6.
		{"A/c0", s, "c0", queues("t", 8), abc, pick(0, 6), nil},
		{"A/c1", s, "c1", queues("t", 8), abc, pick(2), nil},
		{"A/c2", s, "c2", queues("t", 8), abc, pick(4), nil},
		{"AB/c0", both, "c0", queues("t", 8), abc, pick(0, 1, 6), nil},
		{"AB/c1", both, "c1", queues("t", 8), abc, pick(2, 3, 7), nil},
		{"AB/c2", both, "c2", queues("t", 8), abc, pick(4, 5), nil},
		{"no room", AllocateByMachineRoom{Rooms: []string{"Z"}, Resolver: evenOdd(8)}, "c0", queues("t", 8), abc, nil, nil},
		{"0 queues", s, "c0", nil, abc, nil, nil},
		{"missing cid", s, "c9", queues("t", 8), abc, nil, nil},
		{"empty cid", s, "", queues("t", 8), abc, nil, ErrAllocate},
		{"no cids", s, "c0", queues("t", 8), nil, nil, ErrAllocate},
		{"no resolver", AllocateByMachineRoom{Rooms: []string{"A"}}, "c0", queues("t", 8), abc, nil, ErrAllocate},
	})
}

func TestAllocateRoomByPrefix(t *testing.T) {
	r := RoomByPrefix{
		Queues:  map[mq.MessageQueue]string{{Topic: "t", QueueID: 1}: "Q"},
		Topics:  map[string]string{"t": "T"},
		Default: "D",
	}
	for _, c := range []struct{ got, want string }{
		{r.QueueRoom(mq.MessageQueue{Topic: "t", QueueID: 1}), "Q"},
		{r.QueueRoom(mq.MessageQueue{Topic: "t", QueueID: 2}), "T"},
		{r.QueueRoom(mq.MessageQueue{Topic: "u", QueueID: 1}), "D"},
		{r.ClientRoom("hz@10.0.0.1@123"), "hz"},
		{r.ClientRoom("10.0.0.1@123#0"), "D"},
		{r.ClientRoom("plain"), "D"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestAllocateMachineRoomNearby(t *testing.T) {
	// Rooms: q0-q3 A, q4-q5 B, q6-q7 C (no member).
	r := RoomByPrefix{Queues: map[mq.MessageQueue]string{}}
	for _, q := range queues("t", 8) {
		r.Queues[q] = []string{"A", "A", "A", "A", "B", "B", "C", "C"}[q.QueueID]
	}
	cids := clientIDs("B@h3@3", "A@h1@1", "A@h2@2")
	avg := AllocateMachineRoomNearby{Resolver: r}
	circle := AllocateMachineRoomNearby{Strategy: AllocateAveragelyByCircle{}, Resolver: r}
	if got := avg.Name(); got != "MACHINE_ROOM_NEARBY-AVG" {
		t.Errorf("Name = %q", got)
	}
	if got := circle.Name(); got != "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE" {
		t.Errorf("Name = %q", got)
	}
	noRoom := RoomByPrefix{Queues: map[mq.MessageQueue]string{{Topic: "t", QueueID: 0}: "A"}}
	runAllocCases(t, []allocCase{
		{"avg/A1", avg, "A@h1@1", queues("t", 8), cids, pick(0, 1, 6), nil},
		{"avg/A2", avg, "A@h2@2", queues("t", 8), cids, pick(2, 3, 7), nil},
		{"avg/B3", avg, "B@h3@3", queues("t", 8), cids, pick(4, 5), nil},
		{"circle/A1", circle, "A@h1@1", queues("t", 8), cids, pick(0, 2, 6), nil},
		{"circle/A2", circle, "A@h2@2", queues("t", 8), cids, pick(1, 3, 7), nil},
		{"circle/B3", circle, "B@h3@3", queues("t", 8), cids, pick(4, 5), nil},
		{"0 queues", avg, "A@h1@1", nil, cids, nil, nil},
		{"missing cid", avg, "A@h9@9", queues("t", 8), cids, nil, nil},
		{"empty cid", avg, "", queues("t", 8), cids, nil, ErrAllocate},
		{"no cids", avg, "A@h1@1", queues("t", 8), nil, nil, ErrAllocate},
		{"no resolver", AllocateMachineRoomNearby{}, "A@h1@1", queues("t", 8), cids, nil, ErrAllocate},
		{"queue without room", AllocateMachineRoomNearby{Resolver: noRoom}, "A@h1@1", queues("t", 2), cids, nil, ErrAllocate},
		{"client without room", AllocateMachineRoomNearby{Resolver: noRoom}, "A@h1@1", queues("t", 1), append(cids, "h@1"), nil, ErrAllocate},
	})
}

// tableHash hashes keys by a fixed table; unknown keys hash to 0.
func tableHash(m map[string]uint64) func(string) uint64 {
	return func(k string) uint64 { return m[k] }
}

func TestAllocateConsistentHash(t *testing.T) {
	if got := (AllocateConsistentHash{}).Name(); got != "CONSISTENT_HASH" {
		t.Errorf("Name = %q", got)
	}
	// Ring: a-0 at 100, b-0 at 200. A queue goes to the first point at or after its hash,
	// wrapping past the end.
	ring := AllocateConsistentHash{VirtualNodes: 1, Hash: tableHash(map[string]uint64{
		"a-0": 100, "b-0": 200,
		"t@0": 50, "t@1": 150, "t@2": 250, "t@3": 100, "t@4": 200,
	})}
	tie := AllocateConsistentHash{VirtualNodes: 1, Hash: tableHash(map[string]uint64{
		"a-0": 100, "b-0": 100, "t@0": 100,
	})}
	ab := clientIDs("b", "a")
	runAllocCases(t, []allocCase{
		{"ring/a", ring, "a", queues("t", 5), ab, pick(0, 2, 3), nil},
		{"ring/b", ring, "b", queues("t", 5), ab, pick(1, 4), nil},
		{"tie goes to smaller id", tie, "a", queues("t", 1), ab, pick(0), nil},
		{"tie loser", tie, "b", queues("t", 1), ab, nil, nil},
		{"0 queues", ring, "a", nil, ab, nil, nil},
		{"missing cid", ring, "z", queues("t", 5), ab, nil, nil},
		{"empty cid", ring, "", queues("t", 5), ab, nil, ErrAllocate},
		{"no cids", ring, "a", queues("t", 5), nil, nil, ErrAllocate},
		{"negative nodes", AllocateConsistentHash{VirtualNodes: -1}, "a", queues("t", 5), ab, nil, ErrAllocate},
	})
}

func TestAllocateConsistentHashDefaults(t *testing.T) {
	// RocketMQ's MD5 hash: the first 4 digest bytes, big-endian (values from Python hashlib).
	for k, want := range map[string]uint64{"t@0": 4188347351, "c-0": 1675877464, "abc": 2416005272} {
		if got := md5Hash(k); got != want {
			t.Errorf("md5Hash(%q) = %d, want %d", k, got, want)
		}
	}
	// Default VirtualNodes is 10: counting calls of the hash per member.
	calls := 0
	s := AllocateConsistentHash{Hash: func(k string) uint64 { calls++; return md5Hash(k) }}
	if _, err := s.Allocate("g", "a", nil, clientIDs("a", "b")); err != nil {
		t.Fatal(err)
	}
	if calls != 20 {
		t.Errorf("hash calls for 2 members = %d, want 20 (10 virtual nodes each)", calls)
	}
}

// TestAllocateConsistentHashStable checks the point of consistent hashing: when a member
// leaves, only its queues move.
func TestAllocateConsistentHashStable(t *testing.T) {
	s := AllocateConsistentHash{}
	mqs := queues("t", 64)
	owner := func(cids []string) map[mq.MessageQueue]string {
		m := map[mq.MessageQueue]string{}
		for _, c := range cids {
			got, err := s.Allocate("g", c, mqs, cids)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range got {
				m[q] = c
			}
		}
		return m
	}
	before := owner(clientIDs("c0", "c1", "c2", "c3"))
	after := owner(clientIDs("c0", "c1", "c3"))
	moved := 0
	for q, c := range before {
		if c != "c2" && after[q] != c {
			t.Errorf("%v moved from %s to %s though %s stayed", q, c, after[q], c)
		}
		if c == "c2" {
			moved++
		}
	}
	if moved == 0 || moved == len(mqs) {
		t.Errorf("c2 owned %d of %d queues; want a share", moved, len(mqs))
	}
}

// TestAllocateStrategiesPartition: for every strategy but AllocateByConfig, the members'
// allocations together are exactly the queues, none given twice, whatever order each member
// sees its inputs in.
func TestAllocateStrategiesPartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rooms := []string{"r0", "r1", "r2"}
	for iter := range 300 {
		var mqs []mq.MessageQueue
		for topic := range 1 + rng.IntN(3) {
			mqs = append(mqs, queues(fmt.Sprint("t", topic), rng.IntN(12))...)
		}
		var cids []string
		for i := range 1 + rng.IntN(8) {
			cids = append(cids, fmt.Sprintf("%s@h%d@%d", rooms[rng.IntN(len(rooms))], i, i))
		}
		res := RoomByPrefix{Queues: map[mq.MessageQueue]string{}}
		for _, q := range mqs {
			res.Queues[q] = rooms[rng.IntN(len(rooms))]
		}
		strategies := []AllocateStrategy{
			AllocateAveragely{},
			AllocateAveragelyByCircle{},
			AllocateByMachineRoom{Rooms: rooms, Resolver: res},
			AllocateMachineRoomNearby{Resolver: res},
			AllocateMachineRoomNearby{Strategy: AllocateAveragelyByCircle{}, Resolver: res},
			AllocateMachineRoomNearby{Strategy: AllocateConsistentHash{}, Resolver: res},
			AllocateConsistentHash{VirtualNodes: 1 + rng.IntN(20)},
		}
		for _, s := range strategies {
			seen := map[mq.MessageQueue]string{}
			for _, c := range cids {
				m, cs := slices.Clone(mqs), slices.Clone(cids)
				rng.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
				rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
				got, err := s.Allocate("g", c, m, cs)
				if err != nil {
					t.Fatalf("#%d %s: %v", iter, s.Name(), err)
				}
				for _, q := range got {
					if !slices.Contains(mqs, q) {
						t.Fatalf("#%d %s: %v is not one of the queues", iter, s.Name(), q)
					}
					if prev, dup := seen[q]; dup {
						t.Fatalf("#%d %s: %v to both %s and %s", iter, s.Name(), q, prev, c)
					}
					seen[q] = c
				}
			}
			if len(seen) != len(mqs) {
				t.Fatalf("#%d %s: %d of %d queues allocated (%d members)", iter, s.Name(), len(seen), len(mqs), len(cids))
			}
		}
	}
}
