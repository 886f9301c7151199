package daemon_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestHistoryHidesFieldsDroppedSince: a field both the commit's schema and
// today's declare, but whose values a forced schema change in between
// dropped (P.ssn, dropped and added again as an Int; P.tag, dropped and
// added again as it was), is left out of a reader's /api/history,
// /api/changes and GraphQL _ChangeSet (the redaction subscriptions share),
// as a read as of the commit leaves it out naming it in
// Sluice-Hidden-Fields; the other fields are shown, and a database admin
// sees it all. Before, the reader saw "ssn":"111-22", a string under what
// is now an Int field, and "tag":"t-1", values the admin removed.
func TestHistoryHidesFieldsDroppedSince(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "dropped", "type P { name: String ssn: String tag: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/dropped", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/dropped", `{"@type":"P","@id":"a","name":"Ann","ssn":"111-22","tag":"t-1"}`)
	p1 := dbPosition(t, d, "dropped")
	var versions []struct{ Commit string }
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/dropped?id=P/a", nil).Body, &versions); err != nil || len(versions) != 1 {
		t.Fatalf("history: %v %+v", err, versions)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/dropped?force=true", "type P { name: String }")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/dropped?force=true", "type P { name: String ssn: Int tag: String }")

	r := d.MustDo(t, 200, rita, "GET", "/api/document/admin/dropped?id=P/a&as_of="+url.QueryEscape(p1), nil)
	if strings.Contains(string(r.Body), "ssn") || strings.Contains(string(r.Body), "tag") || r.Header.Get("Sluice-Hidden-Fields") != "P.ssn, P.tag" {
		t.Errorf("as of %s: %s, Sluice-Hidden-Fields %q, want no ssn nor tag, P.ssn, P.tag", p1, r.Body, r.Header.Get("Sluice-Hidden-Fields"))
	}
	changeSet := `{ _ChangeSet(commit: "` + versions[0].Commit + `") { P_added { _id name ssn tag } } }`
	for _, c := range []struct{ what, body string }{
		{"history", string(d.MustDo(t, 200, rita, "GET", "/api/history/admin/dropped?id=P/a", nil).Body)},
		{"changes", string(d.MustDo(t, 200, rita, "GET", "/api/changes/admin/dropped?after=0", nil).Body)},
		{"_ChangeSet", gqlData(t, d, rita, "dropped", changeSet)},
	} {
		// Quoted: a position's epoch is random letters, and "…wt-1-0"
		// holds t-1.
		if strings.Contains(c.body, `"111-22"`) || strings.Contains(c.body, `"t-1"`) || !strings.Contains(c.body, `"Ann"`) {
			t.Errorf("rita's %s: %s, want Ann without the ssn and tag dropped since", c.what, c.body)
		}
	}
	if body := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/history/admin/dropped?id=P/a", nil).Body); !strings.Contains(body, `"ssn":"111-22"`) || !strings.Contains(body, `"tag":"t-1"`) {
		t.Errorf("the admin's history: %s, want the ssn as written", body)
	}
}
