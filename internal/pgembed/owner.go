package pgembed

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// serverCredential returns who initdb and the server run as: nil (this
// process's user) normally, or the postgres OS user when this process is
// root, because Postgres refuses to run as root.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgembed: running as root, so Postgres must run as the postgres OS user, but looking it up failed: %w (create that user, or run sluice as a non-root user)", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgembed: postgres user has uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgembed: postgres user has gid %q: %w", u.Gid, err)
	}
	// Groups is empty on purpose: the server must not keep root's groups.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// makeDataDir creates dataDir (0700, as Postgres requires) and, when the
// server runs as another user, hands it to that user after checking the user
// can reach it.
func makeDataDir(dataDir string, cred *syscall.Credential) error {
	// Parents are made enterable by others: a 0700 parent would lock out the
	// postgres user when we are root.
	if err := os.MkdirAll(filepath.Dir(dataDir), 0o755); err != nil {
		return fmt.Errorf("pgembed: create parent of data dir: %w", err)
	}
	if err := os.Mkdir(dataDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("pgembed: create data dir: %w", err)
	}
	if cred == nil {
		return nil
	}
	if err := checkEnterable(filepath.Dir(dataDir), cred); err != nil {
		return err
	}
	if err := os.Chown(dataDir, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("pgembed: give data dir to the postgres user: %w", err)
	}
	return nil
}

// checkEnterable fails unless the user in cred may search dir and every
// directory above it, so the error names the directory instead of Postgres
// failing later with "permission denied".
func checkEnterable(dir string, cred *syscall.Credential) error {
	for {
		fi, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("pgembed: check data dir parents: %w", err)
		}
		perm := fi.Mode().Perm()
		ok := perm&0o001 != 0
		if st, isStat := fi.Sys().(*syscall.Stat_t); isStat {
			ok = ok || (st.Uid == cred.Uid && perm&0o100 != 0) || (st.Gid == cred.Gid && perm&0o010 != 0)
		}
		if !ok {
			return fmt.Errorf("pgembed: running as root, so Postgres runs as the postgres user (uid %d), which cannot enter %s (mode %v): run `chmod o+x %s` or use a data dir under a directory it can enter",
				cred.Uid, dir, perm, dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}
