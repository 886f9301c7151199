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

// TestHistoryHidesClassesDroppedSince: the documents of a class that a
// forced schema change dropped (Item), made an interface (Pet) or made a
// subdocument type (Box), and that a later change made a document class
// again, lost every value they held then: a reader's /api/history,
// /api/changes and a REST stream resumed from before show their images
// as a dropped class's, "@id" and "@type" alone (GraphQL's _ChangeSet,
// sharing that redaction, no value), as a read as of then refuses them;
// a database admin sees them as written. Before, the
// reader saw "code":"secret-text", a string under what is now an Int
// field, and the others' values the admin removed, where a field
// retyped in a class that stayed was hidden.
func TestHistoryHidesClassesDroppedSince(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const sdl = "type Item { name: String! code: String }\ntype Pet { name: String! tag: String }\ntype Box { label: String }"
	d.CreateDatabase(t, "recreated", sdl)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/recreated", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	p0 := dbPosition(t, d, "recreated")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/recreated", `[{"@type":"Item","@id":"a","name":"A","code":"secret-text"},
		{"@type":"Pet","@id":"p","name":"pet-name","tag":"pet-tag"},{"@type":"Box","@id":"b","label":"box-label"}]`)
	p1 := dbPosition(t, d, "recreated")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/recreated?force=true",
		"interface Pet { name: String! }\ntype Cat implements Pet { indoor: Boolean }\ntype Box @subdocument { label: String }\ntype Shelf { box: Box }")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/recreated?force=true",
		"type Item { name: String! code: Int }\ntype Pet { name: String! tag: String }\ntype Box { label: String }")

	secrets := []string{`"secret-text"`, `"pet-name"`, `"pet-tag"`, `"box-label"`}
	shows := func(body string) string {
		for _, s := range secrets {
			if strings.Contains(body, s) {
				return s
			}
		}
		return ""
	}
	for class, id := range map[string]string{"Item": "Item/a", "Pet": "Pet/p", "Box": "Box/b"} {
		if r := d.Do(t, rita, "GET", "/api/document/admin/recreated?type="+class+"&as_of="+url.QueryEscape(p1), nil); r.Status != 400 {
			t.Errorf("%s as of %s: %d %s, want a 400", class, p1, r.Status, r.Body)
		}
		history := string(d.MustDo(t, 200, rita, "GET", "/api/history/admin/recreated?id="+id, nil).Body)
		if s := shows(history); s != "" || !strings.Contains(history, `"document":{"@id":"`+id+`","@type":"`+class+`"}`) {
			t.Errorf("rita's history of %s: %s, want the document without %s", class, history, s)
		}
	}
	if body := string(d.MustDo(t, 200, rita, "GET", "/api/changes/admin/recreated?after=0", nil).Body); shows(body) != "" || !strings.Contains(body, `{"@id":"Item/a","@type":"Item"}`) {
		t.Errorf("rita's changes: %s, want Item/a as @id and @type alone", body)
	}
	st := d.MustOpenStream(t, rita, dt.StreamRequest{Path: "/api/subscribe/admin/recreated/Item", Header: []string{"Last-Event-ID", p0}})
	defer st.Close()
	st.Next() // : connected
	if f := st.Event(); shows(f.String()) != "" || !strings.Contains(f.String(), `"Item/a"`) {
		t.Errorf("rita's Item stream from before the insert: %s, want Item/a without its values", f)
	}
	// _ChangeSet shares the redaction: Item/a has no code to show (the
	// admin's is null too, a string under an Int).
	if got := gqlData(t, d, rita, "recreated", `{ _ChangeSet(commit: "1") { Item_added { _id code } Pet_added { _id tag } } }`); got != `{"_ChangeSet":{"Item_added":[{"_id":"Item/a","code":null}],"Pet_added":[{"_id":"Pet/p","tag":null}]}}` {
		t.Errorf("rita's _ChangeSet: %s, want Item/a and Pet/p without their values", got)
	}
	if body := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/recreated?after=0", nil).Body); !strings.Contains(body, `"code":"secret-text"`) || !strings.Contains(body, `"tag":"pet-tag"`) {
		t.Errorf("the admin's changes: %s, want the values as written", body)
	}
}
