package pgembed

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestServerEnvironmentKeepsSecretsOut: initdb and the server run with
// the few variables they use (TZ passes), not Sluice's whole environment:
// its secrets (SLUICE_ADMIN_PASSWORD…) were readable in
// /proc/<pid>/environ by the server's OS user. Not parallel: it sets the
// environment.
func TestServerEnvironmentKeepsSecretsOut(t *testing.T) {
	t.Setenv("SLUICE_ADMIN_PASSWORD", "not-for-postgres")
	t.Setenv("TZ", "Europe/Paris")
	bin, err := findBinaries("")
	if err != nil {
		t.Fatal(err)
	}
	// initdb, wrapped to write down its environment, beside the real
	// postgres.
	dir, err := os.MkdirTemp("", "pgembed-env-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil { // the postgres user writes there when the tests run as root
		t.Fatal(err)
	}
	initdbEnv := filepath.Join(dir, "initdb.env")
	script := "#!/bin/sh\nenv > " + initdbEnv + "\nexec " + bin.initdb + ` "$@"` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "initdb"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin.postgres, filepath.Join(dir, "postgres")); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(t, newDataDir(t))
	opts.BinDir = dir
	p := start(t, opts)

	b, err := os.ReadFile(initdbEnv)
	if err != nil {
		t.Fatal(err)
	}
	checkEnviron(t, "initdb", strings.Split(string(b), "\n"))
	b, err = os.ReadFile("/proc/" + strconv.Itoa(p.PID()) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	checkEnviron(t, "the postmaster", strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00"))
}

func checkEnviron(t *testing.T, who string, environ []string) {
	t.Helper()
	tz := false
	for _, kv := range environ {
		if strings.HasPrefix(kv, "SLUICE_") {
			t.Errorf("%s has %s in its environment", who, kv)
		}
		tz = tz || kv == "TZ=Europe/Paris"
	}
	if !tz {
		t.Errorf("%s lost TZ; its environment: %q", who, environ)
	}
}
