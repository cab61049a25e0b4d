package uplink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting/server"
)

// TestUplinkSignsForACL: toward a hub with ACL on, up and down rules with an account's
// credentials forward and mirror; with a wrong secret an up rule forwards nothing, backs
// off and says why.
func TestUplinkSignsForACL(t *testing.T) {
	p := filepath.Join(t.TempDir(), "acl.toml")
	if err := os.WriteFile(p, []byte(`
[[accounts]]
accessKey = "gateway7"
secretKey = "s3cret-s3cret"
defaultTopicPerm = "PUB|SUB"
defaultGroupPerm = "SUB"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	acl, err := server.LoadACL(p)
	if err != nil {
		t.Fatal(err)
	}
	h := &hub{t: t, dir: t.TempDir(), acl: acl}
	h.start("127.0.0.1:0")
	t.Cleanup(h.stop)
	for _, name := range []string{"T", "cmd"} {
		if err := h.b.CreateTopic(edge.TopicConfig{Name: name, ReadQueues: 2, WriteQueues: 2}); err != nil {
			t.Fatal(err)
		}
	}
	sendUniq(t, h.b, "cmd", 0, 50)
	local := openLocal(t, t.TempDir(), nil)
	if err := local.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 2, WriteQueues: 2}); err != nil {
		t.Fatal(err)
	}
	sendN(t, local, "T", 0, 100)
	good := Upstream{Addrs: h.addr, Kind: KindEdgeMQ, AccessKey: "gateway7", SecretKey: "s3cret-s3cret"}
	bad := good
	bad.SecretKey = "wrong"
	u := startUplink(t, local, Options{
		Up: []UpRule{
			{Name: "good", Topics: []string{"T"}, Upstream: good},
			{Name: "bad", Topics: []string{"T"}, TopicTemplate: "bad-{topic}", Upstream: bad},
		},
		Down: []DownRule{{Name: "d", Topic: "cmd", LocalTopic: "cmd-local", Upstream: good}}})
	waitFor(t, 30*time.Second, "100 forwarded and 50 mirrored", func() bool {
		s := u.Stats()
		return s.Up[0].Forwarded == 100 && s.Down[0].Received == 50
	})
	waitFor(t, 10*time.Second, "the bad rule's failure", func() bool { return u.Stats().Up[1].Failures > 0 })
	s := u.Stats().Up[1]
	if s.Forwarded != 0 || count(t, h.b, "bad-T") != 0 || !strings.Contains(strings.ToLower(s.LastError), "permission") {
		t.Errorf("wrong secret: %d forwarded, %d upstream, last error %q; want none, and a permission error",
			s.Forwarded, count(t, h.b, "bad-T"), s.LastError)
	}
	if n := count(t, h.b, "T"); n != 100 {
		t.Errorf("upstream T holds %d, want 100", n)
	}
}
