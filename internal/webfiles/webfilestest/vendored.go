// Package webfilestest checks, in tests, the front-end files a package
// vendors with a make target from npm (the console's, GraphiQL's).
package webfilestest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// CheckVendored checks that the files in assetsDir are the ones the make
// target copied: manifest.json there lists want files, each with the npm
// package and version it came from and its SHA-256, and each file must
// still have that hash and come from the version lockFile (a
// package-lock.json) pins.
func CheckVendored(t *testing.T, assetsDir, lockFile, target string, want int) {
	t.Helper()
	var manifest []struct {
		File, Package, Version string
		SHA256                 string `json:"sha256"`
	}
	readJSON(t, filepath.Join(assetsDir, "manifest.json"), &manifest)
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	readJSON(t, lockFile, &lock)
	if len(manifest) != want {
		t.Errorf("manifest lists %d files, want %d", len(manifest), want)
	}
	for _, m := range manifest {
		body, err := os.ReadFile(filepath.Join(assetsDir, m.File))
		if err != nil {
			t.Error(err)
			continue
		}
		if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != m.SHA256 {
			t.Errorf("%s was changed after it was vendored: run make %s", m.File, target)
		}
		if locked := lock.Packages["node_modules/"+m.Package].Version; locked != m.Version {
			t.Errorf("%s comes from %s %s, but package-lock.json pins %q: run make %s", m.File, m.Package, m.Version, locked, target)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
