package consumer

import (
	"cmp"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/edgemq/edgemq/edge/mq"
)

// ErrAllocate is returned by an AllocateStrategy for inputs it cannot allocate from: an
// empty current client id, an empty client id list, a strategy missing its
// MachineRoomResolver, a resolver that names no room, or a negative
// AllocateConsistentHash.VirtualNodes. (It sits here rather than in types.go because this
// file owns the strategies.)
var ErrAllocate = errors.New("consumer: cannot allocate queues")

// AllocateStrategy assigns a group's queues to its members (RocketMQ's
// AllocateMessageQueueStrategy). Every member computes the same answer from the same sorted
// inputs, so no coordination is needed.
//
// The strategies here sort and de-duplicate copies of their inputs (queues by topic, then
// queue id; client ids lexically), so callers need not sort, and return their queues in
// that order. An empty mqs allocates nothing without an error.
type AllocateStrategy interface {
	Name() string
	// Allocate returns the queues of mqs that belong to currentCID among cids. Inputs are not
	// modified. A currentCID absent from cids gets nothing.
	Allocate(group, currentCID string, mqs []mq.MessageQueue, cids []string) ([]mq.MessageQueue, error)
}

// Interface checks.
var (
	_ AllocateStrategy = AllocateAveragely{}
	_ AllocateStrategy = AllocateAveragelyByCircle{}
	_ AllocateStrategy = AllocateByConfig{}
	_ AllocateStrategy = AllocateByMachineRoom{}
	_ AllocateStrategy = AllocateMachineRoomNearby{}
	_ AllocateStrategy = AllocateConsistentHash{}
)

// compareQueues orders queues by topic, then queue id.
func compareQueues(a, b mq.MessageQueue) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.QueueID, b.QueueID)
}

// allocInput checks the common arguments and returns sorted, de-duplicated copies of mqs and
// cids with the index of currentCID in the copy of cids, or -1 when it is absent.
func allocInput(currentCID string, mqs []mq.MessageQueue, cids []string) ([]mq.MessageQueue, []string, int, error) {
	if currentCID == "" {
		return nil, nil, -1, fmt.Errorf("%w: empty current client id", ErrAllocate)
	}
	if len(cids) == 0 {
		return nil, nil, -1, fmt.Errorf("%w: no client ids", ErrAllocate)
	}
	qs := slices.Clone(mqs)
	slices.SortFunc(qs, compareQueues)
	qs = slices.Compact(qs)
	cs := slices.Clone(cids)
	slices.Sort(cs)
	cs = slices.Compact(cs)
	idx, ok := slices.BinarySearch(cs, currentCID)
	if !ok {
		idx = -1
	}
	return qs, cs, idx, nil
}

// AllocateAveragely gives each member a contiguous block of queues (the default). With 8
// queues and 3 members they get 3, 3 and 2; the first len(mqs) % len(cids) members get one
// more. RocketMQ's AllocateMessageQueueAveragely.
type AllocateAveragely struct{}

// Name implements AllocateStrategy.
func (AllocateAveragely) Name() string { return "AVG" }

// Allocate implements AllocateStrategy.
func (AllocateAveragely) Allocate(group, currentCID string, mqs []mq.MessageQueue, cids []string) ([]mq.MessageQueue, error) {
	qs, cs, idx, err := allocInput(currentCID, mqs, cids)
	if err != nil || idx < 0 {
		return nil, err
	}
	return averageBlock(qs, len(cs), idx), nil
}

// averageBlock returns member idx's block of qs among n members.
func averageBlock(qs []mq.MessageQueue, n, idx int) []mq.MessageQueue {
	if len(qs) == 0 {
		return nil
	}
	mod := len(qs) % n
	size := 1
	if len(qs) > n {
		size = len(qs) / n
		if mod > 0 && idx < mod {
			size++
		}
	}
	start := idx*size + mod
	if mod > 0 && idx < mod {
		start = idx * size
	}
	var out []mq.MessageQueue
	for i := range min(size, len(qs)-start) {
		out = append(out, qs[(start+i)%len(qs)])
	}
	return out
}

// AllocateAveragelyByCircle deals the queues out one at a time: queue i goes to member
// i % len(cids). RocketMQ's AllocateMessageQueueAveragelyByCircle.
type AllocateAveragelyByCircle struct{}

// Name implements AllocateStrategy.
func (AllocateAveragelyByCircle) Name() string { return "AVG_BY_CIRCLE" }

// Allocate implements AllocateStrategy.
func (AllocateAveragelyByCircle) Allocate(group, currentCID string, mqs []mq.MessageQueue, cids []string) ([]mq.MessageQueue, error) {
	qs, cs, idx, err := allocInput(currentCID, mqs, cids)
	if err != nil || idx < 0 {
		return nil, err
	}
	var out []mq.MessageQueue
	for i := idx; i < len(qs); i += len(cs) {
		out = append(out, qs[i])
	}
	return out, nil
}

// AllocateByConfig gives this member a fixed list of queues, whatever the other members
// get (RocketMQ's AllocateMessageQueueByConfig). Configured queues missing from mqs are left
// out. Several members configured with the same queue all consume it.
type AllocateByConfig struct {
	// Queues this member consumes.
	Queues []mq.MessageQueue
}

// Name implements AllocateStrategy.
func (AllocateByConfig) Name() string { return "CONFIG" }

// Allocate implements AllocateStrategy.
func (a AllocateByConfig) Allocate(group, currentCID string, mqs []mq.MessageQueue, cids []string) ([]mq.MessageQueue, error) {
	qs, _, idx, err := allocInput(currentCID, mqs, cids)
	if err != nil || idx < 0 {
		return nil, err
	}
	var out []mq.MessageQueue
	for _, q := range qs {
		if slices.Contains(a.Queues, q) {
			out = append(out, q)
		}
	}
	return out, nil
}

// MachineRoomResolver says which machine room (data centre, site, cell) a queue and a
// client are in, for AllocateByMachineRoom and AllocateMachineRoomNearby. Both methods must
// be deterministic; AllocateMachineRoomNearby rejects an empty room.
type MachineRoomResolver interface {
	QueueRoom(queue mq.MessageQueue) string
	ClientRoom(clientID string) string
}

// RoomByPrefix is a simple MachineRoomResolver. A client id of the form room@host@pid (at
// least two '@') is in the room before its first '@'; other client ids, such as the default
// host@pid#n, are in Default. A queue's room is Queues[queue], else Topics[queue.Topic], else
// Default. (RocketMQ reads the room from a "room@broker" broker name; EdgeMQ queues carry no
// broker name, so queue rooms are configured.)
type RoomByPrefix struct {
	// Queues names the room of single queues.
	Queues map[mq.MessageQueue]string
	// Topics names the room of all queues of a topic that are not in Queues.
	Topics map[string]string
	// Default is the room of queues in neither map and of client ids without a room prefix.
	Default string
}

// QueueRoom implements MachineRoomResolver.
func (r RoomByPrefix) QueueRoom(queue mq.MessageQueue) string {
	if room, ok := r.Queues[queue]; ok {
		return room
	}
	if room, ok := r.Topics[queue.Topic]; ok {
		return room
	}
	return r.Default
}

// ClientRoom implements MachineRoomResolver.
func (r RoomByPrefix) ClientRoom(clientID string) string {
	if strings.Count(clientID, "@") >= 2 {
		return clientID[:strings.IndexByte(clientID, '@')]
	}
	return r.Default
}

// AllocateByMachineRoom consumes only the queues in Rooms ("premium" queues), spread over
// all members as RocketMQ's AllocateMessageQueueByMachineRoom does: with
// k = len(premium)/len(cids), member i gets premium[i*k : i*k+k], and the first
// len(premium)%len(cids) members one more from the tail, premium[i + k*len(cids)]. Queues of
// other rooms are allocated to nobody.
type AllocateByMachineRoom struct {
	// Rooms whose queues are consumed.
	Rooms []string
	// Resolver names each queue's room. Required.
	Resolver MachineRoomResolver
}

// Name implements AllocateStrategy.
func (AllocateByMachineRoom) Name() string { return "MACHINE_ROOM" }

// Allocate implements AllocateStrategy.
func (a AllocateByMachineRoom) Allocate(group, currentCID string, mqs []mq.MessageQueue, cids []string) ([]mq.MessageQueue, error) {
	if a.Resolver == nil {
		return nil, fmt.Errorf("%w: %s without a Resolver", ErrAllocate, a.Name())
	}
	qs, cs, idx, err := allocInput(currentCID, mqs, cids)
	if err != nil || idx < 0 {
		return nil, err
	}
	var premium []mq.MessageQueue
	for _, q := range qs {
		if slices.Contains(a.Rooms, a.Resolver.QueueRoom(q)) {
			premium = append(premium, q)
		}
	}
	k, rem := len(premium)/len(cs), len(premium)%len(cs)
	out := slices.Clone(premium[idx*k : idx*k+k])
	if idx < rem {
		out = append(out, premium[idx+k*len(cs)])
	}
	return out, nil
}

// AllocateMachineRoomNearby keeps consumption inside machine rooms (RocketMQ's
// AllocateMachineRoomNearby): the queues of a room with at least one member go to that
// room's members only, allocated by Strategy among them; the queues of a room with no member
// are allocated by Strategy among all members. Every queue and client must have a non-empty
// room.
type AllocateMachineRoomNearby struct {
	// Strategy allocates within a room. Default AllocateAveragely.
	Strategy AllocateStrategy
	// Resolver names the rooms. Required.
	Resolver MachineRoomResolver
}

func (a AllocateMachineRoomNearby) inner() AllocateStrategy {
	if a.Strategy == nil {
		return AllocateAveragely{}
	}
	return a.Strategy
}

// Name implements AllocateStrategy: "MACHINE_ROOM_NEARBY-" and the inner strategy's name.
func (a AllocateMachineRoomNearby) Name() string { return "MACHINE_ROOM_NEARBY-" + a.inner().Name() }

// Allocate implements AllocateStrategy.
func (a AllocateMachineRoomNearby) Allocate(group, currentCID string, mqs []mq.MessageQueue, cids []string) ([]mq.MessageQueue, error) {
	if a.Resolver == nil {
		return nil, fmt.Errorf("%w: %s without a Resolver", ErrAllocate, a.Name())
	}
	qs, cs, idx, err := allocInput(currentCID, mqs, cids)
	if err != nil || idx < 0 {
		return nil, err
	}
	roomQueues := make(map[string][]mq.MessageQueue)
	for _, q := range qs {
		room := a.Resolver.QueueRoom(q)
		if room == "" {
			return nil, fmt.Errorf("%w: no machine room for queue %s/%d", ErrAllocate, q.Topic, q.QueueID)
		}
		roomQueues[room] = append(roomQueues[room], q)
	}
	roomClients := make(map[string][]string)
	for _, c := range cs {
		room := a.Resolver.ClientRoom(c)
		if room == "" {
			return nil, fmt.Errorf("%w: no machine room for client %q", ErrAllocate, c)
		}
		roomClients[room] = append(roomClients[room], c)
	}
	s := a.inner()
	var out []mq.MessageQueue
	// The queues of this member's room, among the members of the room.
	mine := a.Resolver.ClientRoom(currentCID)
	if rq := roomQueues[mine]; len(rq) > 0 {
		got, err := s.Allocate(group, currentCID, rq, roomClients[mine])
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	// The queues of rooms without members, among all members.
	rooms := make([]string, 0, len(roomQueues))
	for room := range roomQueues {
		rooms = append(rooms, room)
	}
	slices.Sort(rooms)
	for _, room := range rooms {
		if _, ok := roomClients[room]; ok {
			continue
		}
		got, err := s.Allocate(group, currentCID, roomQueues[room], cs)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	slices.SortFunc(out, compareQueues)
	return out, nil
}

// AllocateConsistentHash places VirtualNodes points per member on a hash ring; a queue goes
// to the member owning the first point at or after the queue's hash, wrapping around
// (RocketMQ's AllocateMessageQueueConsistentHash). A member joining or leaving moves only
// the queues next to its points.
//
// Point i of member cid hashes the key cid + "-" + i, as RocketMQ's virtual nodes; a queue
// hashes topic + "@" + queue id (RocketMQ hashes MessageQueue.toString(), which names a
// broker, so placements differ from Java clients). Points with equal hashes are ordered by
// client id, the smaller winning.
type AllocateConsistentHash struct {
	// VirtualNodes is the number of ring points per member. Default 10; negative is an error.
	VirtualNodes int
	// Hash maps a key onto the ring. Default: RocketMQ's default, the first 4 bytes of the
	// key's MD5 digest as a big-endian number.
	Hash func(string) uint64
}

// Name implements AllocateStrategy.
func (AllocateConsistentHash) Name() string { return "CONSISTENT_HASH" }

// md5Hash is RocketMQ's default ring hash: the first 4 bytes of MD5, big-endian.
func md5Hash(key string) uint64 {
	sum := md5.Sum([]byte(key))
	return uint64(binary.BigEndian.Uint32(sum[:4]))
}

type ringPoint struct {
	hash uint64
	cid  string
}

// Allocate implements AllocateStrategy.
func (a AllocateConsistentHash) Allocate(group, currentCID string, mqs []mq.MessageQueue, cids []string) ([]mq.MessageQueue, error) {
	if a.VirtualNodes < 0 {
		return nil, fmt.Errorf("%w: VirtualNodes %d", ErrAllocate, a.VirtualNodes)
	}
	qs, cs, idx, err := allocInput(currentCID, mqs, cids)
	if err != nil || idx < 0 {
		return nil, err
	}
	vn := a.VirtualNodes
	if vn == 0 {
		vn = 10
	}
	hash := a.Hash
	if hash == nil {
		hash = md5Hash
	}
	ring := make([]ringPoint, 0, vn*len(cs))
	for _, c := range cs {
		for i := range vn {
			ring = append(ring, ringPoint{hash(c + "-" + strconv.Itoa(i)), c})
		}
	}
	slices.SortFunc(ring, func(x, y ringPoint) int {
		if c := cmp.Compare(x.hash, y.hash); c != 0 {
			return c
		}
		return strings.Compare(x.cid, y.cid)
	})
	var out []mq.MessageQueue
	for _, q := range qs {
		h := hash(q.Topic + "@" + strconv.Itoa(int(q.QueueID)))
		i := sort.Search(len(ring), func(i int) bool { return ring[i].hash >= h })
		if i == len(ring) {
			i = 0
		}
		if ring[i].cid == currentCID {
			out = append(out, q)
		}
	}
	return out, nil
}
