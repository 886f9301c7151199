package daemon_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestSlowLargeWriteHoldsNoLocks: a write of many documents whose body is
// still arriving holds no transaction: the body is read into a temporary
// file before the write begins, so another client can change a document
// the write replaces meanwhile; the write then commits whole, after it.
// With write_spool_bytes 0 the body is read as it arrives, inside the
// transaction, and such a write still succeeds.
func TestSlowLargeWriteHoldsNoLocks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := dt.Start(t, func(c *config.Config) { c.WriteSpoolDir = dir })
	d.CreateDatabase(t, "spool", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/spool", `{"@type":"Note","@id":"n0","text":"old"}`)

	// n0 first, then 400 notes of 1 KiB: 101 documents make the write a
	// large one, and the rest is more than a spool holds in memory.
	const n = 400
	var head strings.Builder
	head.WriteString(`[{"@type":"Note","@id":"n0","text":"replaced"}`)
	for i := range n {
		fmt.Fprintf(&head, `,{"@type":"Note","@id":"x%d","text":"%s"}`, i, strings.Repeat("y", 1024))
	}
	body, feed := io.Pipe()
	go func() { _, _ = feed.Write([]byte(head.String())) }() // and, for now, no "]"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "PUT", d.URL+"/api/document/admin/spool?create=true", body)
	req.Header.Set("Content-Type", "application/json")
	dt.Admin()(req)
	answer := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("the large write: %v", err)
			close(answer)
			return
		}
		answer <- resp
	}()

	eventually.True(t, 30*time.Second, "the write's body held in a temporary file", func() bool {
		return spoolBytes(t, d) > 0
	})
	// While the rest of the body has not come, n0 is not locked.
	patch, err := patchWithin(d, 20*time.Second, "/api/document/admin/spool?id=Note/n0", `{"text":"patched"}`)
	if err != nil || patch != 200 {
		t.Fatalf("a patch of a document the unfinished write replaces: %d %v", patch, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the spool's file has a name in %s: %v", dir, entries)
	}

	go func() { _, _ = feed.Write([]byte("]")); feed.Close() }()
	resp, ok := <-answer
	if !ok {
		t.FailNow()
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the large write: %d %s", resp.StatusCode, b)
	}
	if doc := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/spool?id=Note/n0", nil).Body; !strings.Contains(string(doc), `"replaced"`) {
		t.Errorf("n0 after the large write committed: %s", doc)
	}
	if got := countNotes(t, d, "spool"); got != n+1 {
		t.Errorf("%d notes, want %d", got, n+1)
	}
	eventually.True(t, 10*time.Second, "the spool's bytes given back", func() bool { return spoolBytes(t, d) == 0 })

	// Without a spool, the same write is read as it arrives.
	d2 := dt.Start(t, func(c *config.Config) { c.WriteSpoolBytes = 0 })
	d2.CreateDatabase(t, "spool", "type Note { text: String }")
	d2.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/spool?create=true", head.String()+"]", "Content-Type", "application/json")
	if got := countNotes(t, d2, "spool"); got != n+1 {
		t.Errorf("without a spool: %d notes, want %d", got, n+1)
	}
}

// patchWithin sends a merge patch and returns its status, or an error if
// it is not answered within limit.
func patchWithin(d *dt.Daemon, limit time.Duration, path, patch string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "PATCH", d.URL+path, strings.NewReader(patch))
	req.Header.Set("Content-Type", "application/merge-patch+json")
	dt.Admin()(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// spoolBytes reads sluice_write_spool_bytes from the daemon's metrics.
func spoolBytes(t *testing.T, d *dt.Daemon) float64 {
	t.Helper()
	r := d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil)
	sc := bufio.NewScanner(strings.NewReader(string(r.Body)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "sluice_write_spool_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("sluice_write_spool_bytes %q", v)
			}
			return f
		}
	}
	t.Fatalf("no sluice_write_spool_bytes in /metrics")
	return 0
}

// countNotes counts the Notes of database admin/db.
func countNotes(t *testing.T, d *dt.Daemon, db string) int {
	t.Helper()
	r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/"+db+"?type=Note", nil)
	return strings.Count(string(r.Body), "\n")
}

// TestSpooledKeyedWriteHashesEveryByte: a keyed write whose body is
// spooled (in memory and in a file) is replayed for the same body, and
// refused (422) for one that differs only in its last, spooled, document:
// the request's hash sees every byte the spool read.
func TestSpooledKeyedWriteHashesEveryByte(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "sk", "type Note { text: String }")
	body := func(last string) string {
		var b strings.Builder
		b.WriteString("[")
		for i := range 600 {
			if i > 0 {
				b.WriteString(",")
			}
			text := strings.Repeat("y", 1024)
			if i == 599 {
				text = last
			}
			fmt.Fprintf(&b, `{"@type":"Note","@id":"n%d","text":%q}`, i, text)
		}
		b.WriteString("]")
		return b.String()
	}
	first := d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/sk?create=true", body("a"), "Content-Type", "application/json", "Idempotency-Key", "k")
	sameAnswer(t, first, d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/sk?create=true", body("a"), "Content-Type", "application/json", "Idempotency-Key", "k"))
	if other := d.Do(t, dt.Admin(), "PUT", "/api/document/admin/sk?create=true", body("b"), "Content-Type", "application/json", "Idempotency-Key", "k"); other.Status != 422 {
		t.Errorf("a retry differing in its last document: %d %.300s", other.Status, other.Body)
	}
}
