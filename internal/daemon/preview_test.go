package daemon_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestSchemaPreview: PUT /api/schema?dry_run=true answers what the change
// would do (each change, whether it needs force, the stored documents it
// affects, why it would be refused even with force) and changes nothing;
// it needs the admin role and reports SDL errors as a put does.
func TestSchemaPreview(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const sdl = "enum Size { S M L }\ntype Shirt { size: Size color: String }\ntype Hat { brim: Int }"
	d.CreateDatabase(t, "s", sdl)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/s",
		`[{"@type":"Shirt","@id":"a","size":"M","color":"red"},{"@type":"Shirt","@id":"b","size":"L"},{"@type":"Shirt","@id":"c","color":"blue"},{"@type":"Hat","@id":"h","brim":3}]`)
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/roles/admin/s", `{"user":"rita","role":"write"}`)

	type change struct {
		Change      string   `json:"change"`
		Destructive bool     `json:"destructive"`
		Documents   int      `json:"documents"`
		IDs         []string `json:"ids"`
	}
	type preview struct {
		Status        string   `json:"api:status"`
		DryRun        bool     `json:"dry_run"`
		SchemaVersion int      `json:"schema_version"`
		Changes       []change `json:"changes"`
		ForceNeeded   bool     `json:"force_needed"`
		Refused       []string `json:"refused"`
	}
	dryRun := func(next string) preview {
		t.Helper()
		r := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/s?dry_run=true", next)
		var p preview
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
		return p
	}
	for _, c := range []struct {
		name, sdl string
		want      preview
	}{
		{"additive", "enum Size { S M L XL }\ntype Shirt { size: Size color: String sleeves: Int }\ntype Hat { brim: Int }",
			preview{"api:success", true, 1, []change{
				{"adds value XL to enum Size", false, 0, []string{}},
				{"adds field Shirt.sleeves Int", false, 0, []string{}},
			}, false, []string{}}},
		{"destructive", "enum Size { S M L }\ntype Shirt { size: Size }",
			preview{"api:success", true, 1, []change{
				{"drops field Shirt.color and its values", true, 2, []string{"Shirt/a", "Shirt/c"}},
				{"drops class Hat and its documents", true, 1, []string{"Hat/h"}},
			}, true, []string{}}},
		{"refused", "enum Size { S L }\ntype Shirt { size: Size! color: String }\ntype Hat { brim: Int }",
			preview{"api:success", true, 1, []change{
				{"makes field Shirt.size required; existing Shirt values must have it", false, 1, []string{"Shirt/c"}},
				{"drops value M of enum Size; stored M values become invalid", true, 1, []string{"Shirt/a"}},
			}, true, []string{
				"cannot make Shirt.size required: 1 stored documents lack it",
				"cannot drop value M of enum Size: 1 stored documents hold it in Shirt.size; change them first",
			}}},
	} {
		if got := dryRun(c.sdl); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	// Nothing changed.
	if r := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/schema/admin/s", nil); string(r.Body) != sdl {
		t.Errorf("the schema after previews: %q", r.Body)
	}
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/document/admin/s?id=Hat/h", nil)

	// Errors are a put's: SDL errors with line and column, the admin role,
	// a bad parameter.
	if r := d.Do(t, dt.Admin(), http.MethodPut, "/api/schema/admin/s?dry_run=true", "type Shirt { size: Siz }"); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "line 1, column 14") {
		t.Errorf("invalid SDL: %d %s", r.Status, r.Body)
	}
	if r := d.Do(t, dt.Basic("rita", "rita-password"), http.MethodPut, "/api/schema/admin/s?dry_run=true", sdl); r.Status != http.StatusForbidden {
		t.Errorf("a writer's preview: %d %s", r.Status, r.Body)
	}
	if r := d.Do(t, dt.Admin(), http.MethodPut, "/api/schema/admin/s?dry_run=maybe", sdl); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "dry_run") {
		t.Errorf("dry_run=maybe: %d %s", r.Status, r.Body)
	}
}

// TestDatabaseRole: the database listing and a database's answer say the
// caller's role on it.
func TestDatabaseRole(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "one", "type A { n: Int }")
	d.CreateDatabase(t, "two", "type A { n: Int }")
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/roles/admin/two", `{"user":"rita","role":"write"}`)
	roles := func(auth dt.Auth) map[string]string {
		var list []struct{ Path, Role string }
		if err := json.Unmarshal(d.MustDo(t, http.StatusOK, auth, http.MethodGet, "/api/db", nil).Body, &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, db := range list {
			out[db.Path] = db.Role
		}
		return out
	}
	if got, want := roles(dt.Admin()), map[string]string{"admin/one": "admin", "admin/two": "admin"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the super user's databases: %v, want %v", got, want)
	}
	rita := dt.Basic("rita", "rita-password")
	if got, want := roles(rita), map[string]string{"admin/two": "write"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rita's databases: %v, want %v", got, want)
	}
	if r := d.MustDo(t, http.StatusOK, rita, http.MethodGet, "/api/db/admin/two", nil); !strings.Contains(string(r.Body), `"role":"write"`) {
		t.Errorf("GET /api/db/admin/two as rita: %s", r.Body)
	}
}

// TestIndexOverTooLongStoredValues: adding @index over a stored value too
// long for a btree index is refused with a 409 naming the index, nothing
// of it applied, and a dry run says so beforehand, naming the documents;
// an index over short values passes. The put answered 500 "internal
// error" and the dry run nothing.
func TestIndexOverTooLongStoredValues(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const sdl = "type Note { text: String short: String }"
	d.CreateDatabase(t, "idx", sdl)
	// Random hex does not compress below the 2,704-byte bound.
	long := make([]byte, 4000)
	if _, err := rand.Read(long); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/idx",
		`[{"@type":"Note","@id":"long","text":"`+hex.EncodeToString(long)+`","short":"a"},{"@type":"Note","@id":"n","text":"b","short":"c"}]`)

	const indexed = "type Note { text: String @index short: String }"
	var p struct {
		Changes []struct {
			Change    string   `json:"change"`
			Documents int      `json:"documents"`
			IDs       []string `json:"ids"`
		} `json:"changes"`
		ForceNeeded bool     `json:"force_needed"`
		Refused     []string `json:"refused"`
	}
	r := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/idx?dry_run=true", indexed)
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	const why = "cannot add the index on Note(text): 1 stored documents hold values too large for it"
	if len(p.Refused) != 1 || !strings.HasPrefix(p.Refused[0], why) || p.ForceNeeded ||
		len(p.Changes) != 1 || p.Changes[0].Documents != 1 || !reflect.DeepEqual(p.Changes[0].IDs, []string{"Note/long"}) {
		t.Errorf("dry run: %s", r.Body)
	}
	for _, path := range []string{"/api/schema/admin/idx", "/api/schema/admin/idx?force=true"} {
		r = d.MustDo(t, http.StatusConflict, dt.Admin(), http.MethodPut, path, indexed)
		if body := string(r.Body); !strings.Contains(body, "cannot add the index on Note(text): a stored document holds a value too large for it") {
			t.Errorf("%s: %s", path, body)
		}
	}
	if r := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/schema/admin/idx", nil); string(r.Body) != sdl {
		t.Errorf("the schema after the refused change: %q", r.Body)
	}
	// Short values only: the dry run refuses nothing, and the change applies.
	const short = "type Note { text: String short: String @index }"
	r = d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/idx?dry_run=true", short)
	if err := json.Unmarshal(r.Body, &p); err != nil || len(p.Refused) != 0 || p.Changes[0].Documents != 0 {
		t.Errorf("dry run of an index over short values: %s", r.Body)
	}
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/idx", short)
}
