package server

import (
	"testing"

	"github.com/edgemq/edgemq/edge/remoting"
)

// TestConns: Conns counts the open client connections, and drops a closed one.
func TestConns(t *testing.T) {
	s := startServer(t, openBroker(t, nil), Options{})
	if n := s.Conns(); n != 0 {
		t.Fatalf("%d connections before any client", n)
	}
	c1, c2 := dial(t, s.Addr()), dial(t, s.Addr())
	for _, c := range []*client{c1, c2} { // a reply: the server has the connection
		c.mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil)
	}
	if n := s.Conns(); n != 2 {
		t.Fatalf("%d connections with two clients", n)
	}
	c1.close()
	waitConns(t, s, 1)
	if n := s.Conns(); n != 1 {
		t.Fatalf("%d connections after one of two closed", n)
	}
}
