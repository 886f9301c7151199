package pgembed

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrBinariesNotFound is wrapped by Start's error when the Postgres server
// binaries cannot be found. The full error says how to install them.
var ErrBinariesNotFound = errors.New("postgres server binaries (initdb, postgres) not found")

const installHint = "install the PostgreSQL server with `apt-get install postgresql` (Debian/Ubuntu) " +
	"or `brew install postgresql@15` (macOS), or set SLUICE_DATABASE_URL to use an existing Postgres server instead"

// binaries are the paths of the server programs Start runs.
type binaries struct {
	dir      string
	initdb   string
	postgres string
}

// findBinaries returns the server binaries in binDir or, when binDir is
// empty, in the first directory that has both: the one holding postgres on
// PATH, then the versioned directories, newest version first.
func findBinaries(binDir string) (binaries, error) {
	if binDir != "" {
		if b, ok := binariesIn(binDir); ok {
			return b, nil
		}
		return binaries{}, fmt.Errorf("pgembed: %w in %s (the configured bin dir): %s", ErrBinariesNotFound, binDir, installHint)
	}
	var dirs []string
	if p, err := exec.LookPath("postgres"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	// Distributions put versioned server binaries off PATH: Debian/Ubuntu
	// packages, and Homebrew's keg-only postgresql@N.
	versioned := []struct{ glob, prefix string }{
		{"/usr/lib/postgresql/*/bin", ""},
		{"/opt/homebrew/opt/postgresql@*/bin", "postgresql@"},
		{"/usr/local/opt/postgresql@*/bin", "postgresql@"},
	}
	for _, v := range versioned {
		matches, _ := filepath.Glob(v.glob) // the patterns are valid
		sort.SliceStable(matches, func(i, j int) bool {
			return version(matches[i], v.prefix) > version(matches[j], v.prefix)
		})
		dirs = append(dirs, matches...)
	}
	for _, dir := range dirs {
		if b, ok := binariesIn(dir); ok {
			return b, nil
		}
	}
	return binaries{}, fmt.Errorf("pgembed: %w on PATH or in /usr/lib/postgresql/*/bin: %s", ErrBinariesNotFound, installHint)
}

// binariesIn reports whether dir holds executable initdb and postgres.
func binariesIn(dir string) (binaries, bool) {
	b := binaries{dir: dir, initdb: filepath.Join(dir, "initdb"), postgres: filepath.Join(dir, "postgres")}
	// LookPath on a path with a separator only checks that it is executable.
	if _, err := exec.LookPath(b.initdb); err != nil {
		return binaries{}, false
	}
	if _, err := exec.LookPath(b.postgres); err != nil {
		return binaries{}, false
	}
	return b, true
}

// version returns the Postgres version a versioned bin dir is named after
// (15 for /usr/lib/postgresql/15/bin, 9.6 for .../9.6/bin), or -1.
func version(binDir, prefix string) float64 {
	name := strings.TrimPrefix(filepath.Base(filepath.Dir(binDir)), prefix)
	v, err := strconv.ParseFloat(name, 64)
	if err != nil {
		return -1
	}
	return v
}
