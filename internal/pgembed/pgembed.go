package pgembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// smartShutdownWait bounds how long Stop waits for the sessions to end
// before it ends them (a fast shutdown).
const smartShutdownWait = time.Second

// Up reports whether the server accepts connections: it became ready,
// and has not exited since (or been stopped). While a supervised restart
// is under way it is false, so that a client can refuse to connect
// rather than fill the log with the refusals of a server starting up.
func (p *Postgres) Up() bool { return p.up.Load() }

// port is the server's port. Nothing listens on TCP; the port only names the
// socket file (.s.PGSQL.5432), which lives in the data directory, so it
// cannot clash with another server.
const port = 5432

// Options configures Start.
type Options struct {
	// DataDir is the cluster's data directory, e.g. <sluice data_dir>/pg.
	// Start creates it with initdb when it holds no cluster yet (in
	// DataDir+".initdb", renamed to DataDir once whole) and reuses the
	// cluster afterwards. The server's Unix socket lives in it too, so
	// it must be short enough for a socket path (at most 93 bytes on Linux)
	// and hold no comma, which would split it in a list of directories.
	DataDir string
	// BinDir is the directory holding initdb and postgres. Empty means
	// search PATH, then /usr/lib/postgresql/*/bin and the Homebrew
	// postgresql@* directories, newest version first.
	BinDir string
	// Settings are extra server settings (name to value), passed as
	// `-c name=value` after the defaults so they override them.
	// listen_addresses, port and unix_socket_directories cannot be set:
	// URL depends on them.
	Settings map[string]string
	// Logger receives the server's log lines and pgembed's own messages.
	// Nil discards them.
	Logger *slog.Logger
	// RestartDelay is the wait before the first restart of a server that
	// exited unexpectedly; it doubles with each restart within
	// RestartWindow, up to maxRestartDelay. Zero means 500 ms.
	RestartDelay time.Duration
	// MaxRestarts is how many unexpected exits within RestartWindow are
	// followed by a restart; the next one makes the supervisor give up
	// (see Failed). Zero means 5; a negative value means no restart.
	MaxRestarts int
}

// Postgres is a running embedded server. Its methods are safe for
// concurrent use. Call Stop when done: it owns a child process, the
// goroutines waiting for and supervising it and a lock on the data
// directory.
//
// The server is supervised: when it exits without Stop asking (killed, or
// crashed), it is restarted after a delay that doubles with each restart
// (Options.RestartDelay, 500 ms by default, at most 8 s). More than
// Options.MaxRestarts unexpected exits within RestartWindow make it give
// up: Failed is closed and Err says why.
type Postgres struct {
	dataDir string
	logger  *slog.Logger
	logs    *logWriter
	lock    *os.File // holds the flock on dataDir
	path    string   // the postgres binary
	args    []string
	env     []string // serverEnv's
	cred    *syscall.Credential

	mu  sync.Mutex
	cur *server // the latest server process; replaced by a restart

	restartDelay time.Duration
	maxRestarts  int
	now          func() time.Time

	stopping atomic.Bool // set by Stop, so an exit is not reported as unexpected
	draining atomic.Bool // set by Draining
	// up is set while the server accepts connections: from the moment it
	// is ready until the supervisor sees it exit, or Stop begins.
	up        atomic.Bool
	stopSuper context.CancelFunc
	superDone chan struct{} // closed when supervise returns
	failed    chan struct{} // closed when supervise gave up
	failErr   error         // why; read only after failed is closed
	restarted atomic.Int64  // restarts that became ready
	stopOnce  sync.Once
	stopErr   error
}

// server is one run of the postgres binary.
type server struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait has returned
	err    error         // cmd.Wait's result; read only after exited is closed
}

// defaultSettings are the server settings before Options.Settings is applied.
func defaultSettings(dataDir string) map[string]string {
	return map[string]string{
		"listen_addresses":        "",
		"port":                    strconv.Itoa(port),
		"unix_socket_directories": dataDir,
		"max_connections":         "100",
		// Modest: Sluice is one process among others on the machine.
		"shared_buffers": "128MB",
		// Every Sluice session turns JIT off; so does the server, for any
		// other client, since the Docker image carries no LLVM.
		"jit": "off",
		// Lines go to our logger, which adds its own timestamp.
		"logging_collector": "off",
		"log_destination":   "stderr",
		"log_line_prefix":   "",
	}
}

// Start runs the embedded server for opts.DataDir and returns once it
// accepts connections. It runs initdb when the directory holds no cluster,
// stops a server left running by a previous owner that died, and reuses the
// existing cluster otherwise.
//
// The error wraps ErrBinariesNotFound when initdb and postgres cannot be
// found, and says how to install them. Start also fails when another process
// owns the data directory, when the directory's path is too long for a Unix
// socket or holds a comma, and when the server does not start; that error
// ends with the server's last log lines. If ctx ends before the server is ready, Start
// stops it and returns an error wrapping ctx's.
func Start(ctx context.Context, opts Options) (*Postgres, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.DataDir == "" {
		return nil, errors.New("pgembed: DataDir is empty")
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgembed: resolve data dir: %w", err)
	}
	if err := checkSocketPath(dataDir); err != nil {
		return nil, err
	}
	settings := defaultSettings(dataDir)
	for name, value := range opts.Settings {
		switch name {
		case "listen_addresses", "port", "unix_socket_directories":
			return nil, fmt.Errorf("pgembed: setting %s is managed by pgembed and cannot be overridden", name)
		}
		settings[name] = value
	}
	bin, err := findBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	if err := makeDataDir(dataDir, cred); err != nil {
		return nil, err
	}
	lock, err := lockDataDir(ctx, dataDir)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			lock.Close()
		}
	}()

	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		replaced, err := createCluster(ctx, bin, dataDir, cred, logger)
		if err != nil {
			return nil, err
		}
		if replaced {
			// The directory locked is the empty one the cluster
			// replaced: lock the cluster's, then let the old one go (a
			// Start waiting for it finds it replaced, and waits for the
			// new one).
			newLock, err := lockDataDir(ctx, dataDir)
			if err != nil {
				return nil, err
			}
			lock.Close()
			lock = newLock
		}
	} else if err != nil {
		return nil, fmt.Errorf("pgembed: check for an existing cluster: %w", err)
	}
	if err := makeDataDirPrivate(dataDir, cred, logger); err != nil {
		return nil, err
	}
	if err := stopLeftover(ctx, dataDir, logger); err != nil {
		return nil, err
	}

	p := &Postgres{
		dataDir:      dataDir,
		logger:       logger,
		logs:         newLogWriter(logger),
		lock:         lock,
		path:         bin.postgres,
		args:         serverArgs(dataDir, settings),
		env:          serverEnv(os.Environ()),
		cred:         cred,
		restartDelay: opts.RestartDelay,
		maxRestarts:  opts.MaxRestarts,
		now:          time.Now,
		superDone:    make(chan struct{}),
		failed:       make(chan struct{}),
	}
	p.logs.stopping, p.logs.draining = &p.stopping, &p.draining
	if p.restartDelay <= 0 {
		p.restartDelay = defaultRestartDelay
	}
	if p.maxRestarts == 0 {
		p.maxRestarts = defaultMaxRestarts
	}
	s := p.launch()
	started = true // from here on, Stop releases the lock
	p.cur = s
	superCtx, stopSuper := context.WithCancel(context.WithoutCancel(ctx))
	p.stopSuper = stopSuper
	if err := p.waitReady(ctx, s); err != nil {
		close(p.superDone) // nothing to supervise
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = p.Stop(stopCtx) // the start error matters more than how the stop went
		return nil, err
	}
	p.up.Store(true)
	go p.supervise(superCtx)
	logger.Info("embedded postgres ready", "data_dir", dataDir, "pid", s.cmd.Process.Pid, "bin_dir", bin.dir)
	return p, nil
}

// launch starts the server process. A process that cannot be started is
// returned as one that exited at once, with the reason as its error.
func (p *Postgres) launch() *server {
	s := &server{cmd: exec.Command(p.path, p.args...), exited: make(chan struct{})}
	s.cmd.Dir = p.dataDir
	s.cmd.Env = p.env
	s.cmd.Stdout = p.logs
	s.cmd.Stderr = p.logs
	// Backends inherit the log pipe; the postmaster waits for them, but bound
	// the wait in case one outlives it.
	s.cmd.WaitDelay = 5 * time.Second
	s.cmd.SysProcAttr = sysProcAttr(p.cred)
	if err := s.cmd.Start(); err != nil {
		s.err = fmt.Errorf("pgembed: start %s: %w", p.path, err)
		close(s.exited)
		return s
	}
	go s.wait()
	return s
}

// PID returns the process id of the server's postmaster (the latest one,
// after a restart).
func (p *Postgres) PID() int {
	s := p.current()
	if s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (p *Postgres) current() *server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// serverArgs returns the postgres command line, settings sorted by name so
// it reads the same on every start.
func serverArgs(dataDir string, settings map[string]string) []string {
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	args := []string{"-D", dataDir}
	for _, name := range names {
		args = append(args, "-c", name+"="+settings[name])
	}
	return args
}

// wait reaps the server and records how it exited.
func (s *server) wait() {
	s.err = s.cmd.Wait()
	if errors.Is(s.err, exec.ErrWaitDelay) {
		// The server exited; only a child still held the log pipe.
		s.err = nil
	}
	close(s.exited)
}

// waitReady polls postmaster.pid until server s marks itself ready, the
// way pg_ctl does, so no connection attempts fill the log while it starts.
func (p *Postgres) waitReady(ctx context.Context, s *server) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.cmd.Process != nil {
			pid, status, _ := readPIDFile(p.dataDir)
			if pid == s.cmd.Process.Pid && status == "ready" {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("pgembed: postgres exited during startup (%v); server log:\n%s", s.err, p.logs.tail())
		case <-ctx.Done():
			return fmt.Errorf("pgembed: wait for postgres to accept connections: %w; server log:\n%s", ctx.Err(), p.logs.tail())
		case <-tick.C:
		}
	}
}

// URL returns a pgx connection string for database dbname on this server,
// over its Unix socket, as the superuser postgres.
func (p *Postgres) URL(dbname string) string {
	q := url.Values{
		"host":    {p.dataDir},
		"port":    {strconv.Itoa(port)},
		"user":    {"postgres"},
		"sslmode": {"disable"},
	}
	// Encode writes a space as "+", which pgx, like libpq, keeps as a
	// "+": a data dir with a space was then not found. A "+" of the path
	// itself is already written "%2B".
	query := strings.ReplaceAll(q.Encode(), "+", "%20")
	u := url.URL{Scheme: "postgres", Path: "/" + dbname, RawQuery: query}
	return u.String()
}

// Draining says the daemon using the server has begun to stop: its
// sessions may end abruptly from now on (background work cancelled in
// the middle of a statement, connections closed while the server writes
// to them), and the server's log lines that report it ("connection to
// client lost") are logged at debug, as they are once Stop runs. A clean
// stop logs no warning.
func (p *Postgres) Draining() { p.draining.Store(true) }

// Stop shuts the server down in fast mode (open transactions are rolled
// back, a checkpoint is written) and waits for it to exit. If ctx ends
// first, Stop escalates to an immediate shutdown and then SIGKILL, and
// returns ctx's error; either way the server is gone when Stop returns and
// the data directory lock is released. Stop returns an error if the server
// had exited with a failure. Calling Stop again returns the first result.
func (p *Postgres) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.stopErr = p.stop(ctx)
		p.lock.Close()
		p.logger.Info("embedded postgres stopped", "data_dir", p.dataDir)
	})
	return p.stopErr
}

func (p *Postgres) stop(ctx context.Context) error {
	p.stopping.Store(true)
	p.up.Store(false)
	// The supervisor returns before the server is signalled, so that it
	// neither takes this stop for a crash nor starts another server.
	p.stopSuper()
	<-p.superDone
	s := p.current()
	// A smart shutdown first: it waits for the sessions to end. Sluice
	// closed its own before it stops the server, but their backends may
	// still be on their way out, and a fast shutdown would end them with
	// "terminating connection due to administrator command". Sessions
	// that do not end (a psql of an operator's) are ended by the fast
	// shutdown that follows. An error means the process has already
	// exited; exited says so.
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	smart := time.NewTimer(smartShutdownWait)
	defer smart.Stop()
	select {
	case <-s.exited:
	case <-smart.C:
		_ = s.cmd.Process.Signal(syscall.SIGINT)
	case <-ctx.Done():
	}
	select {
	case <-s.exited:
		if s.err != nil {
			return fmt.Errorf("pgembed: postgres exited: %w", s.err)
		}
		return nil
	case <-ctx.Done():
	}
	p.logger.Warn("embedded postgres did not stop in time; forcing it", "data_dir", p.dataDir)
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case <-s.exited:
	case <-timer.C:
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	return fmt.Errorf("pgembed: stop postgres: %w", ctx.Err())
}

// checkSocketPath fails when the socket path inside dataDir would exceed the
// operating system's limit, which Postgres would otherwise report only in
// its log, and when dataDir holds a comma: Postgres splits
// unix_socket_directories on commas, and pgx a connection string's hosts,
// so the socket would be made, and looked for, elsewhere. (A double quote
// counts only at the start of a directory in that list, where an absolute
// path has a "/".)
func checkSocketPath(dataDir string) error {
	if strings.Contains(dataDir, ",") {
		return fmt.Errorf("pgembed: data dir %s holds a comma, which Postgres (unix_socket_directories) and connection strings take for a list separator, so the server's socket could not be found: choose a data_dir whose path has no comma", dataDir)
	}
	limit := len(syscall.RawSockaddrUnix{}.Path) - 1 // room for the terminating NUL
	socket := filepath.Join(dataDir, ".s.PGSQL."+strconv.Itoa(port))
	if len(socket) > limit {
		return fmt.Errorf("pgembed: data dir %s is too long: the Postgres socket inside it, %s, would be %d bytes, over the %d-byte limit for Unix socket paths; use a data dir of at most %d bytes",
			dataDir, socket, len(socket), limit, limit-(len(socket)-len(dataDir)))
	}
	return nil
}

// lockDataDir takes an exclusive flock on dataDir, held until the returned
// file is closed. The kernel drops it when its process dies, which is what
// tells a leftover server from one another live Sluice is using.
//
// A lock that was just released can look held for a moment: a process being
// forked elsewhere in this program shares the descriptor until it execs, and
// a killed owner takes a moment to die. So a busy lock is retried for a few
// seconds before Start gives up.
func lockDataDir(ctx context.Context, dataDir string) (*os.File, error) {
	f, err := os.Open(dataDir)
	if errors.Is(err, os.ErrPermission) {
		// Root is never denied: this is Sluice run as another user than
		// the one that made the cluster.
		return nil, deniedDataDir(dataDir, uint32(os.Geteuid()), uint32(os.Getegid()), err)
	} else if err != nil {
		return nil, fmt.Errorf("pgembed: open data dir: %w", err)
	}
	timer := time.NewTimer(3 * time.Second)
	defer timer.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if same, err := isDir(f, dataDir); err != nil {
				f.Close()
				return nil, fmt.Errorf("pgembed: lock data dir: %w", err)
			} else if same {
				return f, nil
			}
			// The directory was replaced while this waited for it: a
			// first Start moved its new cluster in. Lock the new one.
			f.Close()
			if f, err = os.Open(dataDir); err != nil {
				return nil, fmt.Errorf("pgembed: open data dir: %w", err)
			}
			continue
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("pgembed: lock data dir: %w", err)
		}
		select {
		case <-tick.C:
		case <-timer.C:
			f.Close()
			return nil, fmt.Errorf("pgembed: data dir %s is in use by another process (is another sluice running?)", dataDir)
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("pgembed: lock data dir: %w", ctx.Err())
		}
	}
}

// isDir reports whether the open directory f is still the one at path.
func isDir(f *os.File, path string) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, err
	}
	current, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil && os.SameFile(held, current), err
}

// initdbDir is where createCluster makes the cluster of dataDir before it
// moves it into place: a sibling, so that the move is a rename.
func initdbDir(dataDir string) string { return dataDir + ".initdb" }

// createCluster makes a cluster for the empty dataDir: initdb writes it
// in initdbDir, which is then renamed to dataDir. initdb writes PG_VERSION
// first, so a cluster made in place and interrupted (initdb killed, the
// machine's power lost) looked like a whole one to the next start, which
// then failed with errors that did not say why ("database "postgres" does
// not exist"). Made aside, dataDir holds a whole cluster or none, and
// what an interrupted initdb left is removed here, under the data dir
// lock, before initdb runs again. It reports whether dataDir was replaced.
//
// A dataDir that is a mount point or a symbolic link cannot be replaced
// by a rename (EBUSY, ENOTDIR): the cluster is then made in place, as
// releases before made every cluster, and an initdb interrupted there
// leaves what it wrote (docs/running.md says to empty the directory).
func createCluster(ctx context.Context, bin binaries, dataDir string, cred *syscall.Credential, logger *slog.Logger) (replaced bool, err error) {
	fixed, err := unreplaceable(dataDir)
	if err != nil {
		return false, err
	}
	if !fixed {
		err := createAside(ctx, bin, dataDir, cred, logger)
		if !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, syscall.EXDEV) {
			return err == nil, err
		}
		// A mount point unreplaceable could not tell (a bind mount on
		// the same device): made in place after all.
		if err := os.RemoveAll(initdbDir(dataDir)); err != nil {
			return false, fmt.Errorf("pgembed: remove the cluster that could not be moved into place: %w", err)
		}
	}
	if err := initdb(ctx, bin, dataDir, cred, logger); err != nil {
		return false, err
	}
	logger.Info("created postgres cluster in place (a mount point or a symbolic link)", "data_dir", dataDir)
	return false, nil
}

// unreplaceable reports whether dataDir is a symbolic link or a mount
// point (on another device than its parent): rename(2) cannot put a
// directory in its place.
func unreplaceable(dataDir string) (bool, error) {
	fi, err := os.Lstat(dataDir)
	if err != nil {
		return false, fmt.Errorf("pgembed: data dir: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return true, nil
	}
	parent, err := os.Stat(filepath.Dir(dataDir))
	if err != nil {
		return false, fmt.Errorf("pgembed: data dir's parent: %w", err)
	}
	st, ok1 := fi.Sys().(*syscall.Stat_t)
	pst, ok2 := parent.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && st.Dev != pst.Dev, nil
}

// createAside is createCluster for a dataDir a rename can replace.
func createAside(ctx context.Context, bin binaries, dataDir string, cred *syscall.Credential, logger *slog.Logger) error {
	tmp := initdbDir(dataDir)
	if _, err := os.Lstat(tmp); err == nil {
		logger.Warn("removing what an interrupted initdb left", "dir", tmp)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("pgembed: remove what an interrupted initdb left: %w", err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("pgembed: create initdb dir: %w", err)
	}
	if cred != nil {
		if err := os.Chown(tmp, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("pgembed: give initdb dir to the postgres user: %w", err)
		}
	}
	if err := initdb(ctx, bin, tmp, cred, logger); err != nil {
		return err
	}
	// Replaces dataDir, which is empty: rename(2) fails on a directory
	// that holds anything. (os.Rename refuses any directory there.)
	if err := syscall.Rename(tmp, dataDir); err != nil {
		return fmt.Errorf("pgembed: move the new cluster into place (%s must be empty or hold a cluster): %w", dataDir, err)
	}
	// So that a power loss does not undo the rename once the server has
	// written to the cluster.
	if parent, err := os.Open(filepath.Dir(dataDir)); err == nil {
		_ = parent.Sync() // the cluster is whole either way
		parent.Close()
	}
	logger.Info("created postgres cluster", "data_dir", dataDir)
	return nil
}

// initdb creates a cluster in dataDir, which must be empty.
func initdb(ctx context.Context, bin binaries, dataDir string, cred *syscall.Credential, logger *slog.Logger) error {
	cmd := exec.CommandContext(ctx, bin.initdb,
		"-D", dataDir,
		"-U", "postgres",
		"-E", "UTF8",
		"--locale=C",
		"--auth-local=trust",
		"--auth-host=reject",
	)
	cmd.Dir = dataDir
	cmd.Env = serverEnv(os.Environ())
	cmd.SysProcAttr = sysProcAttr(cred)
	// SIGINT makes initdb remove what it wrote (killed outright, it
	// leaves its directory, which the next createCluster removes).
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgembed: initdb %s: %w; output:\n%s", dataDir, err, lastLines(string(out), tailLines))
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		logger.Debug("initdb", "line", line)
	}
	return nil
}

// serverEnv returns the environment initdb and the server run with: of
// environ (this process's), only what they use (the search path, the
// locale, the time zone, where temporary files and libraries are, the
// OOM settings of Linux packages). The rest stays out: Sluice's secrets
// (SLUICE_ADMIN_PASSWORD, SLUICE_JWT_HS256_SECRET…) would be readable by
// the server's OS user in /proc/<pid>/environ of every server process.
func serverEnv(environ []string) []string {
	env := []string{} // not nil, which exec.Cmd takes for "inherit everything"
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "PATH", name == "LANG", name == "LANGUAGE", strings.HasPrefix(name, "LC_"),
			name == "TZ", name == "TZDIR", name == "PGTZ", name == "PGLOCALEDIR", name == "TMPDIR",
			name == "LD_LIBRARY_PATH", name == "DYLD_LIBRARY_PATH",
			name == "PG_OOM_ADJUST_FILE", name == "PG_OOM_ADJUST_VALUE":
			env = append(env, kv)
		}
	}
	return env
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
