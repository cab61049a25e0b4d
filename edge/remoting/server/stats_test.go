package server

import (
	"maps"
	"testing"

	"github.com/edgemq/edgemq/edge/remoting"
)

// TestStats: the server counts the connections it accepted and each request and reply by
// code, an unsupported request and its REQUEST_CODE_NOT_SUPPORTED reply too.
func TestStats(t *testing.T) {
	s := startServer(t, openBroker(t, nil), Options{})
	if st := s.Stats(); st.Conns != 0 || st.ConnsAccepted != 0 || len(st.Requests) != 0 || len(st.Replies) != 0 {
		t.Fatalf("fresh server: got %+v, want all zero", st)
	}
	c := dial(t, s.Addr())
	for range 3 {
		c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("x"))
	}
	c.mustCall(remoting.RequestCodeNotSupported, 9999, nil, nil)
	st := s.Stats()
	if st.Conns != 1 || st.ConnsAccepted != 1 {
		t.Errorf("connections: got %d open, %d accepted, want 1, 1", st.Conns, st.ConnsAccepted)
	}
	if want := map[int16]int64{remoting.SendMessageV2: 3, 9999: 1}; !maps.Equal(st.Requests, want) {
		t.Errorf("requests: got %v, want %v", st.Requests, want)
	}
	if want := map[int16]int64{remoting.Success: 3, remoting.RequestCodeNotSupported: 1}; !maps.Equal(st.Replies, want) {
		t.Errorf("replies: got %v, want %v", st.Replies, want)
	}
	c.close()
	c2 := dial(t, s.Addr())
	c2.mustCall(remoting.RequestCodeNotSupported, 9999, nil, nil) // the server admitted it
	c2.close()
	if st := s.Stats(); st.ConnsAccepted != 2 {
		t.Errorf("accepted after a second connection: got %d, want 2", st.ConnsAccepted)
	}
}
