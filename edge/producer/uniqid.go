package producer

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// uniqIDs makes RocketMQ's unique message ids (UNIQ_KEY, Java's MessageClientIDSetter):
//
//	offset  bytes  field
//	0       4      IPv4 address of the host
//	4       2      process id (low 16 bits)
//	6       4      a random number per generator (Java: the class loader's hash)
//	10      4      milliseconds since the start of the current month (local time), wrapping
//	14      2      counter
//
// as 32 upper-case hex digits.
type uniqIDs struct {
	prefix  string // hex of bytes 0..9
	counter atomic.Uint32

	mu         sync.Mutex // guards the month bounds
	monthStart time.Time
	nextMonth  time.Time
}

func newUniqIDs() *uniqIDs {
	var b [10]byte
	ip := hostIPv4()
	copy(b[:4], ip[:])
	binary.BigEndian.PutUint16(b[4:], uint16(os.Getpid()))
	binary.BigEndian.PutUint32(b[6:], rand.Uint32())
	return &uniqIDs{prefix: strings.ToUpper(hex.EncodeToString(b[:]))}
}

// hostIPv4 returns the host's first non-loopback IPv4 address, preferring private ones
// (as Java's UtilAll.getIP), else 127.0.0.1.
func hostIPv4() [4]byte {
	best := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := pfx.Addr().Unmap()
		if !ip.Is4() || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		if ip.IsPrivate() {
			return ip.As4()
		}
		if best.IsLoopback() {
			best = ip
		}
	}
	return best.As4()
}

// next returns a new id.
func (u *uniqIDs) next() string {
	now := time.Now()
	u.mu.Lock()
	if !now.Before(u.nextMonth) || now.Before(u.monthStart) {
		y, m, _ := now.Date()
		u.monthStart = time.Date(y, m, 1, 0, 0, 0, 0, now.Location())
		u.nextMonth = u.monthStart.AddDate(0, 1, 0)
	}
	start := u.monthStart
	u.mu.Unlock()
	var b [6]byte
	binary.BigEndian.PutUint32(b[:], uint32(now.Sub(start).Milliseconds()))
	binary.BigEndian.PutUint16(b[4:], uint16(u.counter.Add(1)))
	const hexdig = "0123456789ABCDEF"
	var out [64]byte // the prefix is 20 hex digits
	id := append(out[:0], u.prefix...)
	for _, c := range b {
		id = append(id, hexdig[c>>4], hexdig[c&15])
	}
	return string(id)
}
