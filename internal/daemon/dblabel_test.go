package daemon_test

import (
	"encoding/json"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestDatabaseWithoutLabelAgreesAcrossAPIs: a database made without a
// label or a comment (or with "", which is none) shows null for both in
// GET /api/db and GET /api/db/{org}/{db}, as its UserDatabase document in
// _system does to GraphQL; one made with them shows them in all three.
// REST showed "" where _system showed null.
func TestDatabaseWithoutLabelAgreesAcrossAPIs(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/admin/bare", `{"schema":"type T { n: Int }"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/admin/blank", `{"label":"","comment":"","schema":"type T { n: Int }"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/admin/named", `{"label":"Named","comment":"a note","schema":"type T { n: Int }"}`)

	want := map[string][2]any{"admin/bare": {nil, nil}, "admin/blank": {nil, nil}, "admin/named": {"Named", "a note"}}
	check := func(where string, db map[string]any) {
		t.Helper()
		w := want[db["path"].(string)]
		if db["label"] != w[0] || db["comment"] != w[1] {
			t.Errorf("%s: %s has label %#v and comment %#v, want %#v and %#v", where, db["path"], db["label"], db["comment"], w[0], w[1])
		}
	}
	var list []map[string]any
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/db", nil).Body, &list); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, db := range list {
		if _, ok := want[db["path"].(string)]; ok {
			check("GET /api/db", db)
			seen++
		}
	}
	if seen != len(want) {
		t.Fatalf("GET /api/db lists %d of the %d databases: %v", seen, len(want), list)
	}
	for path := range want {
		var one map[string]any
		if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/db/"+path, nil).Body, &one); err != nil {
			t.Fatal(err)
		}
		check("GET /api/db/"+path, one)
	}

	body, _ := json.Marshal(map[string]string{"query": `{ UserDatabase(orderBy: {name: ASC}) { organization name label comment } }`})
	var res struct {
		Data struct {
			UserDatabase []map[string]any
		}
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/_system", body, "Content-Type", "application/json").Body, &res); err != nil {
		t.Fatal(err)
	}
	seen = 0
	for _, db := range res.Data.UserDatabase {
		db["path"] = db["organization"].(string) + "/" + db["name"].(string)
		if _, ok := want[db["path"].(string)]; ok {
			check("_system", db)
			seen++
		}
	}
	if seen != len(want) {
		t.Fatalf("_system shows %d of the %d databases: %v", seen, len(want), res.Data.UserDatabase)
	}
}
