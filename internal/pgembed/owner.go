package pgembed

import (
	"errors"
	"fmt"
	"log/slog"
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
// can reach it. Only a directory it created or an empty one is handed over:
// one that holds files of another user (a cluster made by Sluice run as
// that user) is refused, since giving it away would lock that user out
// of it while the server, run as postgres, could not use it either (its
// files stay that user's).
func makeDataDir(dataDir string, cred *syscall.Credential) error {
	// Parents are made enterable by others: a 0700 parent would lock out the
	// postgres user when we are root.
	if err := os.MkdirAll(filepath.Dir(dataDir), 0o755); err != nil {
		return fmt.Errorf("pgembed: create parent of data dir: %w", err)
	}
	created := true
	if err := os.Mkdir(dataDir, 0o700); errors.Is(err, os.ErrExist) {
		created = false
	} else if err != nil {
		return fmt.Errorf("pgembed: create data dir: %w", err)
	}
	if cred == nil {
		return nil
	}
	if err := checkEnterable(filepath.Dir(dataDir), cred); err != nil {
		return err
	}
	if !created {
		owner, err := ownerOf(dataDir)
		if err != nil {
			return err
		}
		if owner == cred.Uid {
			return nil
		}
		entries, err := os.ReadDir(dataDir)
		if err != nil {
			return fmt.Errorf("pgembed: read data dir: %w", err)
		}
		if len(entries) > 0 {
			what := "files"
			if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err == nil {
				what = "a Postgres cluster"
			}
			return fmt.Errorf("pgembed: data dir %s holds %s of user %s, but Sluice runs as root, so Postgres would run as user %s: run sluice as %s, or hand the directory to %s with `chown -R %d:%d %s` to run as root from now on",
				dataDir, what, userName(owner), userName(cred.Uid), userName(owner), userName(cred.Uid), cred.Uid, cred.Gid, dataDir)
		}
	}
	if err := os.Chown(dataDir, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("pgembed: give data dir to the postgres user: %w", err)
	}
	return nil
}

// groupOrOtherAccess are the mode bits Postgres refuses on its data
// directory (PG_MODE_MASK_GROUP): group write, and anything for others.
const groupOrOtherAccess = 0o027

// makeDataDirPrivate makes the cluster in dataDir 0700 when it is the
// server user's and its mode gives group write or any access to others,
// which Postgres refuses ("data directory ... has invalid permissions").
// Kubernetes gives every directory of a volume mounted with fsGroup that
// mode (group-writable and setgid, 2770), on every mount: the cluster
// would not start again. A directory of another user is left as it is.
func makeDataDirPrivate(dataDir string, cred *syscall.Credential, logger *slog.Logger) error {
	fi, err := os.Stat(dataDir)
	if err != nil {
		return fmt.Errorf("pgembed: check data dir mode: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	serverUID := uint32(os.Geteuid())
	if cred != nil {
		serverUID = cred.Uid
	}
	mode := st.Mode & 0o7777
	if st.Uid != serverUID || mode&groupOrOtherAccess == 0 {
		return nil
	}
	if err := os.Chmod(dataDir, 0o700); err != nil {
		return fmt.Errorf("pgembed: make data dir %s private (mode %04o, which Postgres refuses): %w", dataDir, mode, err)
	}
	logger.Warn("made the postgres data dir private (mode 0700): Postgres refuses to start in one its group may write in or others may enter, and Kubernetes makes the directories of a volume mounted with fsGroup so on every mount",
		"data_dir", dataDir, "mode_was", fmt.Sprintf("%04o", mode))
	return nil
}

// deniedDataDir explains err, the permission error opening dataDir for
// Sluice run as uid:gid (not root), by naming the directory's owner and
// what to run: a cluster made by Sluice run as root belongs to the
// postgres user, one made by Sluice run as another user to that user.
// Without an owner to name (the directory is uid's, or cannot be
// examined) it says only that the open failed.
func deniedDataDir(dataDir string, uid, gid uint32, err error) error {
	owner, ownerErr := ownerOf(dataDir)
	if ownerErr != nil || owner == uid {
		return fmt.Errorf("pgembed: open data dir: %w", err)
	}
	made, runAs := "", userName(owner)
	if pg, lookupErr := user.Lookup("postgres"); lookupErr == nil && pg.Uid == strconv.FormatUint(uint64(owner), 10) {
		made, runAs = ", as a cluster made by Sluice run as root does", "root"
	}
	return fmt.Errorf("pgembed: data dir %s belongs to user %s%s, but Sluice runs as user %s, which cannot open it (%w): run sluice as %s, or hand the directory to %s with `chown -R %d:%d %s` to run sluice as that user from now on",
		dataDir, userName(owner), made, userName(uid), err, runAs, userName(uid), uid, gid, dataDir)
}

// ownerOf returns the uid that owns path.
func ownerOf(path string) (uint32, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("pgembed: check data dir owner: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("pgembed: check data dir owner: no owner for %s", path)
	}
	return st.Uid, nil
}

// userName names uid for a message: "nobody (uid 65534)", or "uid 1234"
// when it has no name.
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username + " (uid " + id + ")"
	}
	return "uid " + id
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
