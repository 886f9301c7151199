package graph_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/internal/daemontest"
)

// TestIntrospectionClient runs test/introspection/introspect.mjs: graphql-js
// 16 builds and validates client schemas from the introspection of a
// database whose schema has every kind of field and of _system, and
// validates and runs operations against them. It needs Node 20 and `npm ci`
// in test/introspection, so it runs only when SLUICE_INTROSPECTION_CLIENT=1
// (make test-introspection sets it; make test depends on that target).
func TestIntrospectionClient(t *testing.T) {
	dir := daemontest.NodeProject(t, "SLUICE_INTROSPECTION_CLIENT", "introspection", "graphql")
	t.Parallel()
	sdl, err := os.ReadFile(filepath.Join(dir, "schema.graphql"))
	if err != nil {
		t.Fatal(err)
	}
	d := daemontest.Start(t)
	d.CreateDatabase(t, "every", string(sdl))
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+daemontest.AdminPassword))
	urls := []string{d.URL + "/api/graphql/admin/every", d.URL + "/api/graphql/_system"}
	t.Run("graphql-js", func(t *testing.T) {
		daemontest.RunNode(t, dir, nil, append([]string{"introspect.mjs", auth}, urls...)...)
	})
	t.Run("graphql-core", func(t *testing.T) {
		// Python's graphql-core is not in this project's registries; the
		// check runs where it is installed (pip install graphql-core).
		if exec.Command("python3", "-c", "import graphql").Run() != nil {
			t.Skip("python3 with graphql-core is not installed")
		}
		cmd := exec.Command("python3", append([]string{"introspect.py", auth}, urls...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil {
			t.Fatalf("graphql-core failed: %v", err)
		}
	})
}
