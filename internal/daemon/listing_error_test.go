package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestListingFailingBeforeItsFirstByte: a document listing whose
// statement fails in Postgres before any document was sent (here another
// session cancels it while it waits for a lock) is answered as an
// ordinary error: its status, a JSON error body, and no header of the
// listing it did not give (its read position), in NDJSON and as a list.
func TestListingFailingBeforeItsFirstByte(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people", `{"@type":"Person","@id":"x","name":"X"}`)
	pg := watchPostgres(t, d)
	for _, path := range []string{"/api/document/admin/people", "/api/document/admin/people?as_list=true"} {
		release := pg.lockClass(d, "people", "Person")
		req, err := http.NewRequest("GET", d.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		dt.Admin()(req)
		type answer struct {
			resp *http.Response
			body []byte
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- answer{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- answer{resp, b, err}
		}()
		var pids []int32
		pg.until("the listing's statement waits for the lock", func() bool { pids = pg.waiting(); return len(pids) == 1 })
		if _, err := pg.conn.Exec(context.Background(), "SELECT pg_cancel_backend($1)", pids[0]); err != nil {
			t.Fatal(err)
		}
		a := <-done
		release()
		if a.err != nil {
			t.Fatalf("GET %s cancelled in Postgres: %v", path, a.err)
		}
		var e struct {
			Status  string `json:"api:status"`
			Message string `json:"api:message"`
		}
		if a.resp.StatusCode != 503 || a.resp.Header.Get("Content-Type") != "application/json; charset=utf-8" ||
			json.Unmarshal(a.body, &e) != nil || e.Status != "api:server_error" || e.Message == "" {
			t.Errorf("GET %s cancelled in Postgres: %d %q %s", path, a.resp.StatusCode, a.resp.Header.Get("Content-Type"), a.body)
		}
		if h := a.resp.Header.Get("Sluice-Position"); h != "" {
			t.Errorf("GET %s cancelled in Postgres: its error carries the read position of the listing it did not give: %s", path, h)
		}
	}
}
