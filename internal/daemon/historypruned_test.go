package daemon_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/postgres"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestHistorySaysWhatWasPruned: the last page of a document's history
// names, in Sluice-History-Pruned, the end of the newest pruned commit
// when the document existed there, so a client can tell a document's
// first version from the oldest one retention left. The history stopped
// at the oldest retained commit and said nothing: a document created in
// a pruned commit and updated since listed its update alone, and one
// never changed since listed nothing, as one that never was does.
func TestHistorySaysWhatWasPruned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dt.Start(t)
	d.CreateDatabase(t, "pruned", "type Person { name: String! }")
	for _, w := range []struct{ method, body string }{
		// 1, pruned below: old, quiet and gone are created.
		{"POST", `[{"@type":"Person","@id":"old","name":"Old"},{"@type":"Person","@id":"quiet","name":"Quiet"},{"@type":"Person","@id":"gone","name":"Gone"}]`},
		{"PUT", `{"@type":"Person","@id":"Person/old","name":"Old 2"}`},   // 2
		{"POST", `{"@type":"Person","@id":"new","name":"New"}`},           // 3
		{"PUT", `{"@type":"Person","@id":"Person/new","name":"New 2"}`},   // 4
		{"PUT", `{"@type":"Person","@id":"Person/gone","name":"Gone 2"}`}, // 5
		{"DELETE", `["Person/gone"]`}, // 6
	} {
		d.MustDo(t, 200, dt.Admin(), w.method, "/api/document/admin/pruned", w.body)
	}
	epoch, _, _ := strings.Cut(headPosition(t, d, "pruned"), "-")

	// Commit 1 is older than the retention; the prune removes it alone.
	pg, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	if _, err := pg.Exec(ctx, `UPDATE sluice.commits SET committed_at = now() - interval '2 hours'
		WHERE seq = 1 AND db_id = (SELECT id FROM sluice.databases WHERE org = 'admin' AND name = 'pruned')`); err != nil {
		t.Fatal(err)
	}
	store, err := postgres.Open(ctx, d.DatabaseURL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Prune(ctx, time.Now(), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	boundary := epoch + "-1-2147483647"

	for _, c := range []struct {
		id, before string
		ops        []string
		pruned     string
	}{
		// Its update is retained, its creation is not.
		{"Person/old", "", []string{"updated"}, boundary},
		// A page holding no version, before its retained update: that
		// update, read forward, says it existed at the boundary.
		{"Person/old", epoch + "-2-0", nil, boundary},
		// Never changed since its creation, which was pruned: every
		// version is gone, and it exists now.
		{"Person/quiet", "", nil, boundary},
		// Its update and delete are retained, its creation is not.
		{"Person/gone", "", []string{"deleted", "updated"}, boundary},
		// Created after the boundary: its whole history is listed.
		{"Person/new", "", []string{"updated", "added"}, ""},
		// Before its creation it did not exist.
		{"Person/new", epoch + "-3-0", nil, ""},
		{"Person/nobody", "", nil, ""},
	} {
		path := "/api/history/admin/pruned?id=" + c.id
		if c.before != "" {
			path += "&before=" + url.QueryEscape(c.before)
		}
		r := d.MustDo(t, 200, dt.Admin(), "GET", path, nil)
		var page []struct{ Op string }
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatalf("%s: %v: %s", path, err, r.Body)
		}
		var ops []string
		for _, v := range page {
			ops = append(ops, v.Op)
		}
		if strings.Join(ops, ",") != strings.Join(c.ops, ",") || r.Header.Get("Link") != "" {
			t.Errorf("%s: %s (Link %q), want ops %v and no Link", path, r.Body, r.Header.Get("Link"), c.ops)
		}
		if got := r.Header.Get("Sluice-History-Pruned"); got != c.pruned {
			t.Errorf("%s: Sluice-History-Pruned %q, want %q", path, got, c.pruned)
		}
	}
	// A page that does not reach the boundary does not say it; the last
	// one, reached by its Link, does.
	r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/pruned?id=Person/gone&count=1", nil)
	next, ok := strings.CutSuffix(strings.TrimPrefix(r.Header.Get("Link"), "<"), `>; rel="next"`)
	if !ok || r.Header.Get("Sluice-History-Pruned") != "" {
		t.Fatalf("the first page of gone's history: %s (Link %q, Sluice-History-Pruned %q)", r.Body, r.Header.Get("Link"), r.Header.Get("Sluice-History-Pruned"))
	}
	r = d.MustDo(t, 200, dt.Admin(), "GET", next, nil)
	if !strings.Contains(string(r.Body), `"op":"updated"`) || r.Header.Get("Link") != "" || r.Header.Get("Sluice-History-Pruned") != boundary {
		t.Errorf("the last page of gone's history: %s (Link %q, Sluice-History-Pruned %q)", r.Body, r.Header.Get("Link"), r.Header.Get("Sluice-History-Pruned"))
	}
	// The position it names reads the oldest state still known.
	r = d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/pruned?id=Person/old&as_of="+url.QueryEscape(boundary), nil)
	if !strings.Contains(string(r.Body), `"name":"Old"`) {
		t.Errorf("old as of %s: %s", boundary, r.Body)
	}
}
