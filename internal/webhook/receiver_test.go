package webhook_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// The end-to-end webhook tests deliver to test/webhooks/receiver.mjs, which
// verifies every signature with the standardwebhooks npm package (the
// reference implementation). They need `npm ci` in test/webhooks, so they
// run only when SLUICE_WEBHOOK_RECEIVER=1 (make test-webhooks, part of make
// test).

// delivery is one request the receiver got.
type delivery struct {
	Path        string  `json:"path"`
	ID          string  `json:"id"`
	Timestamp   string  `json:"timestamp"`
	Signatures  int     `json:"signatures"`
	ContentType string  `json:"contentType"`
	UserAgent   string  `json:"userAgent"`
	Verified    bool    `json:"verified"`
	Error       string  `json:"error"`
	Answered    int     `json:"answered"`
	Events      []event `json:"events"`
}

type event struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Subject string          `json:"subject"`
	Data    json.RawMessage `json:"data"`
}

// receiver is a running receiver.mjs.
type receiver struct {
	t     *testing.T
	port  int
	stdin io.Writer
	mu    sync.Mutex // serializes commands
	acks  chan struct{}
	// got receives every delivery, in arrival order.
	got chan delivery
}

// startReceiver starts receiver.mjs, or skips t without the receiver.
func startReceiver(t *testing.T) *receiver {
	t.Helper()
	if os.Getenv("SLUICE_WEBHOOK_RECEIVER") != "1" {
		t.Skip("set SLUICE_WEBHOOK_RECEIVER=1 (make test-webhooks) to run the webhook receiver")
	}
	dir, err := filepath.Abs("../../test/webhooks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks")); err != nil {
		t.Fatalf("the receiver is not installed: run npm ci in %s (%v)", dir, err)
	}
	cmd := exec.Command("node", "receiver.mjs")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, stdin: stdin, acks: make(chan struct{}, 1), got: make(chan delivery, 100000)}
	listening := make(chan int, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var line struct {
				Type string `json:"type"`
				Port int    `json:"port"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Errorf("receiver wrote %q: %v", sc.Text(), err)
				continue
			}
			switch line.Type {
			case "listening":
				listening <- line.Port
			case "ok":
				r.acks <- struct{}{}
			case "delivery":
				var d delivery
				if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
					t.Errorf("receiver wrote %q: %v", sc.Text(), err)
				}
				r.got <- d
			default:
				t.Errorf("receiver: %s", sc.Text())
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close() // the receiver exits when its input ends
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = cmd.Wait()
	})
	select {
	case r.port = <-listening:
	case <-exited:
		t.Fatal("the receiver exited before listening")
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver did not listen within 30s")
	}
	return r
}

// url returns the receiver's URL for path.
func (r *receiver) url(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(r.port) + path
}

// do sends a command and waits for its acknowledgement.
func (r *receiver) do(cmd map[string]any) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := json.Marshal(cmd)
	if _, err := r.stdin.Write(append(b, '\n')); err != nil {
		r.t.Fatal(err)
	}
	select {
	case <-r.acks:
	case <-time.After(30 * time.Second):
		r.t.Fatalf("the receiver did not acknowledge %s", b)
	}
}

// next returns the next delivery, failing the test after within.
func (r *receiver) next(within time.Duration) delivery {
	r.t.Helper()
	select {
	case d := <-r.got:
		return d
	case <-time.After(within):
		r.t.Fatalf("no delivery within %s", within)
		return delivery{}
	}
}

// nextNew returns the next delivery whose id is not in seen, and adds
// it: deliveries are at least once, and a deliverer whose lease ran out
// (a loaded machine) sends again what it had not recorded.
func (r *receiver) nextNew(seen map[string]bool, within time.Duration) delivery {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		d := r.next(time.Until(deadline))
		if !seen[d.ID] {
			seen[d.ID] = true
			return d
		}
	}
}

// noneNew fails the test if a delivery whose id is not in seen is
// waiting (see nextNew).
func (r *receiver) noneNew(seen map[string]bool) {
	r.t.Helper()
	for {
		select {
		case d := <-r.got:
			if !seen[d.ID] {
				r.t.Fatalf("unexpected delivery %s (events %v)", d.ID, d.Events)
			}
		default:
			return
		}
	}
}

// none fails the test if a delivery is waiting.
func (r *receiver) none() {
	r.t.Helper()
	select {
	case d := <-r.got:
		r.t.Fatalf("unexpected delivery %s (events %v)", d.ID, d.Events)
	default:
	}
}

// fastRetries is a daemon with short retry waits and timeout, and
// loopback allowed: the receiver runs on this machine. Its deliverer's
// lease is the default (10 s), not short: a lease of 2 s ran out on a
// loaded machine (a renewal late by a second), and the next generation
// sent again what the last had not recorded, a duplicate the tests that
// count requests or read them in order fail on. The lease a test hands
// over is the killed replica's (TestWebhookKill9HandsOver).
func fastRetries(c *config.Config) {
	c.WebhookRetrySchedule = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	c.WebhookTimeout = time.Second
	c.WebhookAllowNetworks = loopback
}

// hook is a webhook as made through the API.
type hook struct {
	ID     int64  `json:"id"`
	Secret string `json:"secret"`
}

// createHook makes a webhook on admin/<db> with body (JSON) and tells the
// receiver its secret for path.
func createHook(t *testing.T, d *dt.Daemon, r *receiver, db, path, body string) hook {
	t.Helper()
	res := d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/"+db, body)
	var h hook
	if err := json.Unmarshal(res.Body, &h); err != nil || h.ID == 0 || !strings.HasPrefix(h.Secret, "whsec_") {
		t.Fatalf("create webhook: %s (%v)", res.Body, err)
	}
	if r != nil {
		r.do(map[string]any{"cmd": "secret", "path": path, "secrets": []string{h.Secret}})
	}
	return h
}

// status returns webhook id of admin/<db> as GET answers it.
func status(t *testing.T, d *dt.Daemon, db string, id int64) map[string]any {
	t.Helper()
	res := d.MustDo(t, 200, dt.Admin(), "GET", fmt.Sprintf("/api/webhooks/admin/%s/%d", db, id), nil)
	var m map[string]any
	if err := json.Unmarshal(res.Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitStatus polls webhook id until cond holds of its status, for at most
// within.
func waitStatus(t *testing.T, d *dt.Daemon, db string, id int64, within time.Duration, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		m := status(t, d, db, id)
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook %d: condition not met within %s; status %v", id, within, m)
		}
		<-tick.C
	}
}

// insert commits one Person document, Person/<name>, on admin/<db>
// through d.
func insert(t *testing.T, d *dt.Daemon, db, name string) {
	t.Helper()
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/"+db, fmt.Sprintf(`{"@type":"Person","@id":%q,"name":%q}`, name, name))
}
