package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestWriteBytesPerUser: the documents one user's writes hold are bounded
// by write_bytes_per_user. While a write whose body stalled after its
// first document of 600 KB holds it, another write of the user's with a
// document of 600 KB waits for it and then is answered 429 with
// Retry-After, naming the setting, having written nothing; once the
// first write's body ends, both are written. The user is an ordinary
// one: the super user is not held to the share. (The engine's tests cover
// write_bytes, the super user and writes larger than the budget.)
func TestWriteBytesPerUser(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.WriteBytesPerUser = 1 << 20 })
	d.CreateDatabase(t, "wb", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/wb", `{"user":"rita","role":"write"}`)
	rita := dt.Basic("rita", "rita-password")
	text := strings.Repeat("x", 600<<10)
	note := func(id string) string { return fmt.Sprintf(`{"@type":"Note","@id":%q,"text":%q}`, id, text) }

	answer := make(chan int, 1)
	feed := stalledWrite(t, d, rita, "/api/document/admin/wb", answer)
	// The write has read its first document once the pipe's write
	// returns; until it has charged it, another write fits beside it, so
	// writes are sent until one is refused (each written is counted).
	if _, err := feed.Write([]byte("[" + note("a") + ",")); err != nil {
		t.Fatal(err)
	}
	written := 0
	for ; ; written++ {
		if written == 20 {
			t.Fatal("no write was refused beside the stalled one")
		}
		r := d.Do(t, rita, "POST", "/api/document/admin/wb", note(fmt.Sprintf("b%d", written)))
		if r.Status == 200 {
			continue
		}
		if r.Status != 429 || !strings.Contains(string(r.Body), "write_bytes_per_user") || r.Header.Get("Retry-After") == "" {
			t.Fatalf("a write past the budget: %d %s (Retry-After %q), want a 429 naming write_bytes_per_user", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
		break
	}
	if _, err := feed.Write([]byte(note("a2") + "]")); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if status := <-answer; status != 200 {
		t.Fatalf("the stalled write, once its body ended: %d", status)
	}
	d.MustDo(t, 200, rita, "POST", "/api/document/admin/wb", note("c"))
	if got, want := countNotes(t, d, "wb"), written+3; got != want {
		t.Fatalf("%d notes, want %d", got, want)
	}
}

// TestWriteBudgetMetrics: sluice_write_bytes is what the documents of
// writes in progress hold of write_bytes, and sluice_write_bytes_waiting
// the writes waiting for it: a write whose body stalled after a document
// of 600 KB holds it, a second write of its user's waits for the user's
// share of 1 MB, and once the first body ends both are written and the
// budget holds nothing.
func TestWriteBudgetMetrics(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.WriteBytesPerUser = 1 << 20 })
	d.CreateDatabase(t, "wb", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/wb", `{"user":"rita","role":"write"}`)
	rita := dt.Basic("rita", "rita-password")
	text := strings.Repeat("x", 600<<10)
	note := func(id string) string { return fmt.Sprintf(`{"@type":"Note","@id":%q,"text":%q}`, id, text) }
	metric := func(name string) float64 {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), name)
	}

	answers := make(chan int, 2)
	feed := stalledWrite(t, d, rita, "/api/document/admin/wb", answers)
	if _, err := feed.Write([]byte("[" + note("a") + ",")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "sluice_write_bytes holds the stalled write's document", func() bool {
		return metric("sluice_write_bytes") >= 600<<10
	})
	go func() { answers <- d.Do(t, rita, "POST", "/api/document/admin/wb", note("b")).Status }()
	eventually.True(t, 5*time.Second, "sluice_write_bytes_waiting counts the second write", func() bool {
		return metric("sluice_write_bytes_waiting") == 1
	})
	if _, err := feed.Write([]byte(note("a2") + "]")); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	for range 2 {
		if status := <-answers; status != 200 {
			t.Fatalf("a write: %d", status)
		}
	}
	if held, waiting := metric("sluice_write_bytes"), metric("sluice_write_bytes_waiting"); held != 0 || waiting != 0 {
		t.Fatalf("once the writes were answered: sluice_write_bytes %v, sluice_write_bytes_waiting %v, want 0 and 0", held, waiting)
	}
}

// stalledWrite starts a POST of a JSON body to path with credentials
// auth, whose body is what the test writes to the returned pipe; its
// status goes to answer once the test closes the pipe (0 if it failed).
func stalledWrite(t *testing.T, d *dt.Daemon, auth dt.Auth, path string, answer chan<- int) *io.PipeWriter {
	t.Helper()
	body, feed := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", d.URL+path, body)
	req.Header.Set("Content-Type", "application/json")
	auth(req)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("the stalled write: %v", err)
			answer <- 0
			return
		}
		resp.Body.Close()
		answer <- resp.StatusCode
	}()
	return feed
}
