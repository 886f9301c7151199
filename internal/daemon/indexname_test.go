package daemon_test

import (
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestIndexesOfOneNameAreRefused: two indexes whose Postgres names
// would be one (a collision of the 32-bit hash in them, as
// postgres.TestIndexNamesThatCollide finds) are refused with 400 naming
// both, by a schema change, its dry run and a new database alike; the
// change made one index stand for both.
func TestIndexesOfOneNameAreRefused(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	// Both are Person_fxx…x_89cb8ad5 as index names of class Person.
	const f1, f2 = "fxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx00000326246", "fxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx00001467780"
	sdl := "type Person { name: String " + f1 + ": Int @index " + f2 + ": Int @index }"
	d.CreateDatabase(t, "names", "type Person { name: String }")
	for _, req := range []struct{ method, path, body string }{
		{"PUT", "/api/schema/admin/names?dry_run=true", sdl},
		{"PUT", "/api/schema/admin/names", sdl},
		{"POST", "/api/db/admin/other", `{"schema":"` + sdl + `"}`},
	} {
		res := d.Do(t, dt.Admin(), req.method, req.path, req.body)
		if res.Status != 400 || !strings.Contains(string(res.Body), "the index on Person("+f1+") and the index on Person("+f2+") would both be named Person_fxxx") {
			t.Errorf("%s %s: %d %s, want 400 naming both indexes", req.method, req.path, res.Status, res.Body)
		}
	}
}
