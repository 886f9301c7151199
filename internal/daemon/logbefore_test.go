package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestLogBeforeAnyCommitID: /api/log's ?before= takes any commit id a
// client may send, up to the largest 64-bit integer, and answers the
// commits below it: one past 2^31-1 was a 500 (Postgres typed the
// parameter int4). before=0 names no page (the commits before commit 0
// are none) and is refused, not answered as the newest page; so is
// before= given empty (a script's unset variable), and /api/changes'
// after= and limit= given empty: after= read from the start of the
// log, as if absent, so a client that lost its cursor read every
// commit again instead of being told.
func TestLogBeforeAnyCommitID(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "logs", "type Person { name: String }")
	for _, n := range []string{"a", "b", "c"} {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/logs", `{"@type":"Person","@id":"`+n+`","name":"`+n+`"}`)
	}
	ids := func(path string) string {
		t.Helper()
		var page []struct{ ID string }
		if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", path, nil).Body, &page); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var out []string
		for _, c := range page {
			out = append(out, c.ID)
		}
		return strings.Join(out, ",")
	}
	all := ids("/api/log/admin/logs")
	if all != "3,2,1" {
		t.Fatalf("log: %s, want 3,2,1", all)
	}
	for before, want := range map[string]string{
		"2":                   "1",
		"4":                   all,
		"2147483647":          all,
		"2147483648":          all,
		"9223372036854775807": all,
	} {
		if got := ids("/api/log/admin/logs?before=" + before); got != want {
			t.Errorf("before=%s: %s, want %s", before, got, want)
		}
	}
	for _, before := range []string{"0", "-1", "9223372036854775808", "x", ""} {
		r := d.Do(t, dt.Admin(), "GET", "/api/log/admin/logs?before="+before, nil)
		if typ, msg := errBody(t, r); r.Status != 400 || typ != "api:BadRequest" || !strings.Contains(msg, `before="`+before+`"`) {
			t.Errorf("before=%s: %d %s %q, want 400 naming the parameter", before, r.Status, typ, msg)
		}
	}
	for _, param := range []string{"after", "limit"} {
		r := d.Do(t, dt.Admin(), "GET", "/api/changes/admin/logs?"+param+"=", nil)
		if typ, msg := errBody(t, r); r.Status != 400 || typ != "api:BadRequest" || !strings.Contains(msg, "query parameter "+param) {
			t.Errorf("/api/changes?%s=: %d %s %q, want 400 naming the parameter", param, r.Status, typ, msg)
		}
	}
}
