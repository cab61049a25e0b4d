package ui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// served is a running edgemq serve.
type served struct {
	bin        string
	addr, http string // remoting and HTTP addresses
}

// edgemqBin returns EDGEMQ_BIN, or builds edgemq into a temp dir.
func edgemqBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("EDGEMQ_BIN"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "edgemq")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/edgemq")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startServe starts edgemq serve on a temp data dir with both listeners on free ports, and
// stops it (SIGTERM, expecting exit 0) at the test's end.
func startServe(t *testing.T) *served {
	t.Helper()
	bin := edgemqBin(t)
	cmd := exec.Command(bin, "serve", "-data", filepath.Join(t.TempDir(), "data"), "-server.listen", "127.0.0.1:0",
		"-server.vip_listen", "off", "-http.listen", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads after startup
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("edgemq serve after SIGINT: %v", err)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("edgemq serve did not stop in 30s")
		}
	})
	re := regexp.MustCompile(`^INFO serving.* listen=(\S+) .* http=(\S+)`)
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l := <-lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return &served{bin: bin, addr: m[1], http: m[2]}
			}
		case <-timeout:
			t.Fatal("edgemq serve did not report serving in 60s")
		}
	}
}

// run runs the edgemq CLI against the server and returns its stdout.
func (s *served) run(t *testing.T, args ...string) []byte {
	t.Helper()
	args = append(args[:1:1], append([]string{"-server", s.addr}, args[1:]...)...)
	var out, errOut bytes.Buffer
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("edgemq %v: %v\n%s", args, err, errOut.String())
	}
	return out.Bytes()
}

// apiStatus is the part of /api/status the test compares.
type apiStatus struct {
	Topics []struct {
		Name                            string
		Stored, MessagesIn, MessagesOut int64
	}
	Groups []struct {
		Name string
		Lag  int64
	}
	Uplink struct{ Configured bool }
}

// shown is what the page shows, read from its cells' data-value attributes.
type shown struct {
	Time   string                        `json:"time"`
	Topics map[string]map[string]float64 `json:"topics"`
	Groups map[string]map[string]float64 `json:"groups"`
	Uplink string                        `json:"uplink"`
	Health string                        `json:"health"`
}

const readPage = `(() => {
  const rows = sel => Object.fromEntries([...document.querySelectorAll(sel)].map(tr => [
    tr.dataset.topic || tr.dataset.group,
    Object.fromEntries([...tr.querySelectorAll("td[data-field]")].map(td => [td.dataset.field, Number(td.dataset.value)]))]));
  return {time: document.body.dataset.statusTime || "", topics: rows("tr[data-topic]"), groups: rows("tr[data-group]"),
    uplink: document.getElementById("uplink").textContent, health: document.getElementById("health").textContent};
})()`

// TestStatusPage: the page, refreshed by itself, shows per topic the messages stored, sent
// and pulled, and per group the lag, as /api/status and edgemq stats give them; it says no
// uplink is configured. A screenshot at a phone's width goes to UI_OUT (default out/ui).
func TestStatusPage(t *testing.T) {
	s := startServe(t)
	s.run(t, "send", "-topic", "Orders", "-create", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9", "o10")
	s.run(t, "send", "-topic", "Telemetry", "-create", "t1", "t2", "t3")
	s.run(t, "consume", "-topic", "Orders", "-group", "billing", "-n", "4", "-wait", "10s")

	chrome := os.Getenv("CHROMIUM")
	if chrome == "" {
		for _, c := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(c); err == nil {
				chrome = p
				break
			}
		}
	}
	if chrome == "" {
		t.Fatal("no Chromium: apt-get install chromium, or set CHROMIUM")
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU, chromedp.WindowSize(390, 844))...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate("http://"+s.http+"/"),
		chromedp.WaitReady(`body[data-status-time]`),
	); err != nil {
		t.Fatalf("open the page: %v", err)
	}
	first, err := chromedp.Run(ctx, chromedp.Evaluate[shown](readPage))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	var page shown
	// Wait for the page's own refresh: a status taken later (its time has second precision).
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := chromedp.Do(ctx, chromedp.Sleep(500*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if page, err = chromedp.Run(ctx, chromedp.Evaluate[shown](readPage)); err != nil {
			t.Fatal(err)
		}
		if page.Time != first.Time {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not refresh in 30s (status time %s)", first.Time)
		}
	}

	resp, err := http.Get("http://" + s.http + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var api apiStatus
	if err := json.Unmarshal(body, &api); err != nil {
		t.Fatalf("/api/status: %v\n%s", err, body)
	}

	// edgemq stats: the messages each topic's queues hold, and billing's lag on Orders.
	var stats struct {
		Queues []struct {
			Topic    string
			Messages int64
		}
	}
	if err := json.Unmarshal(s.run(t, "stats", "-json"), &stats); err != nil {
		t.Fatal(err)
	}
	stored := map[string]int64{}
	for _, q := range stats.Queues {
		stored[q.Topic] += q.Messages
	}
	var lags []struct{ Lag int64 }
	if err := json.Unmarshal(s.run(t, "stats", "-group", "billing", "-topic", "Orders", "-json"), &lags); err != nil {
		t.Fatal(err)
	}
	var lag int64
	for _, l := range lags {
		lag += l.Lag
	}

	if len(api.Topics) != 2 || len(page.Topics) != 2 {
		t.Fatalf("topics: page %v, api %+v, want Orders and Telemetry", page.Topics, api.Topics)
	}
	for _, at := range api.Topics {
		pt := page.Topics[at.Name]
		if pt["stored"] != float64(at.Stored) || pt["messagesIn"] != float64(at.MessagesIn) || pt["messagesOut"] != float64(at.MessagesOut) {
			t.Errorf("%s: page shows %v, /api/status says %+v", at.Name, pt, at)
		}
		if pt["stored"] != float64(stored[at.Name]) {
			t.Errorf("%s: page shows %v stored, edgemq stats %d", at.Name, pt["stored"], stored[at.Name])
		}
	}
	if page.Topics["Orders"]["stored"] != 10 || page.Topics["Orders"]["messagesIn"] != 10 || page.Topics["Telemetry"]["stored"] != 3 {
		t.Errorf("page topics %v, want Orders 10 sent and stored, Telemetry 3", page.Topics)
	}
	if len(api.Groups) != 1 || api.Groups[0].Name != "billing" || page.Groups["billing"]["lag"] != float64(api.Groups[0].Lag) ||
		page.Groups["billing"]["lag"] != float64(lag) || lag == 0 || lag > 6 {
		t.Errorf("billing's lag: page %v, /api/status %+v, edgemq stats %d; want equal, 1 to 6", page.Groups, api.Groups, lag)
	}
	if api.Uplink.Configured || !strings.Contains(page.Uplink, "None configured") || page.Health != "healthy" {
		t.Errorf("uplink %q, health %q; want none configured, healthy", page.Uplink, page.Health)
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("UI_OUT")
	if dir == "" {
		dir = "../../out/ui"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "status.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("the screenshot is not a PNG")
	}
}
