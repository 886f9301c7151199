package pgembed

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Tool returns the path of the Postgres program name (pg_ctl,
// pg_basebackup, initdb…) in the directory Start would take its server
// from for binDir, and the credential it must run with: nil, or the
// postgres OS user when this process is root. It is for code that runs
// clusters of its own, such as internal/pgtest's replicated clusters.
func Tool(binDir, name string) (string, *syscall.Credential, error) {
	bin, err := findBinaries(binDir)
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(bin.dir, name)
	if _, err := os.Stat(path); err != nil {
		// postgres on PATH may be a link into the directory that has the
		// rest (/usr/local/bin/postgres -> /usr/lib/postgresql/15/bin).
		real, lerr := filepath.EvalSymlinks(bin.postgres)
		if lerr != nil {
			return "", nil, fmt.Errorf("pgembed: %s is not beside postgres in %s: %w", name, bin.dir, err)
		}
		path = filepath.Join(filepath.Dir(real), name)
		if _, err := os.Stat(path); err != nil {
			return "", nil, fmt.Errorf("pgembed: %s is not beside postgres in %s or %s: %w", name, bin.dir, filepath.Dir(real), err)
		}
	}
	cred, err := serverCredential()
	if err != nil {
		return "", nil, err
	}
	return path, cred, nil
}
