package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/pgembed"
)

// Cluster is a Postgres cluster of a test's own, listening on a TCP port
// of 127.0.0.1, run with pg_ctl from the installed binaries: a primary, or
// a streaming-replication standby of one, for failover tests. It is
// stopped when the test ends.
type Cluster struct {
	// Dir is the data directory; the Unix socket is in it too.
	Dir string
	// Port is the TCP port on 127.0.0.1.
	Port int

	tb   testing.TB
	cred *syscall.Credential
}

// NewPrimary starts a cluster that accepts replication connections, with
// settings (name to value, e.g. synchronous_standby_names) added to its
// configuration. Every connection from 127.0.0.1 is trusted.
func NewPrimary(tb testing.TB, settings map[string]string) *Cluster {
	tb.Helper()
	c := newCluster(tb)
	c.run("initdb", "-D", c.Dir, "-U", "postgres", "-E", "UTF8", "--locale=C", "--auth=trust")
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n"
	c.write("pg_hba.conf", hba)
	conf := map[string]string{"wal_level": "replica", "max_wal_senders": "5", "hot_standby": "on"}
	for k, v := range settings {
		conf[k] = v
	}
	c.configure(conf)
	c.start()
	return c
}

// Standby makes a standby of c with pg_basebackup and starts it, streaming
// from c as application_name name (what synchronous_standby_names lists).
// settings are added to the configuration it copied from c.
func (c *Cluster) Standby(name string, settings map[string]string) *Cluster {
	c.tb.Helper()
	s := newCluster(c.tb) // empty, as pg_basebackup wants it
	s.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres", "-D", s.Dir, "-X", "stream", "-R",
		"-d", "application_name="+name)
	s.configure(settings)
	s.start()
	return s
}

// URL returns the pgx URL of database dbname on c, over TCP.
func (c *Cluster) URL(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, dbname)
}

// Promote makes a standby the primary and waits until it accepts writes.
func (c *Cluster) Promote() {
	c.tb.Helper()
	c.run("pg_ctl", "promote", "-w", "-t", "60", "-D", c.Dir)
}

// Stop stops the cluster in mode (smart, fast or immediate: immediate is
// a crash, as a failed primary).
func (c *Cluster) Stop(mode string) {
	c.tb.Helper()
	c.run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", c.Dir)
}

// Start starts a stopped cluster again.
func (c *Cluster) Start() {
	c.tb.Helper()
	c.start()
}

// Query runs sql on database postgres of c and returns its single text
// result.
func (c *Cluster) Query(sql string) string {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		c.tb.Fatal(err)
	}
	defer conn.Close(context.Background())
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		c.tb.Fatalf("%s: %v", sql, err)
	}
	return s
}

func newCluster(tb testing.TB) *Cluster {
	tb.Helper()
	root, err := os.MkdirTemp("", "sluice-ha-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil { // the postgres user enters it
		tb.Fatal(err)
	}
	_, cred, err := pgembed.Tool("", "pg_ctl")
	if err != nil {
		tb.Fatal(err)
	}
	c := &Cluster{Dir: filepath.Join(root, "pg"), Port: freePort(tb), tb: tb, cred: cred}
	if err := os.Mkdir(c.Dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	if cred != nil {
		if err := os.Chown(c.Dir, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(tb testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// configure appends settings, and those every test cluster has, to
// postgresql.conf.
func (c *Cluster) configure(settings map[string]string) {
	all := map[string]string{
		"listen_addresses":        "'127.0.0.1'",
		"port":                    strconv.Itoa(c.Port),
		"unix_socket_directories": "'" + c.Dir + "'",
		"max_connections":         "100",
		"shared_buffers":          "32MB",
		"jit":                     "off",
	}
	for k, v := range settings {
		all[k] = v
	}
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "%s = %s\n", k, all[k])
	}
	f, err := os.OpenFile(filepath.Join(c.Dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		c.tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + b.String()); err != nil {
		c.tb.Fatal(err)
	}
}

func (c *Cluster) write(name, content string) {
	if err := os.WriteFile(filepath.Join(c.Dir, name), []byte(content), 0o600); err != nil {
		c.tb.Fatal(err)
	}
	if c.cred != nil {
		if err := os.Chown(filepath.Join(c.Dir, name), int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			c.tb.Fatal(err)
		}
	}
}

// start runs the server and stops it (immediate) when the test ends.
func (c *Cluster) start() {
	c.tb.Helper()
	c.run("pg_ctl", "start", "-w", "-t", "60", "-D", c.Dir, "-l", filepath.Join(c.Dir, "server.log"))
	c.tb.Cleanup(func() {
		// Already stopped is fine.
		_ = c.command("pg_ctl", "stop", "-w", "-t", "60", "-m", "immediate", "-D", c.Dir).Run()
	})
}

// run runs a Postgres program as the server's user, failing the test
// with its output when it fails.
func (c *Cluster) run(name string, args ...string) {
	c.tb.Helper()
	if out, err := c.command(name, args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.Dir, "server.log"))
		c.tb.Fatalf("%s %s: %v\n%s\nserver log:\n%s", name, strings.Join(args, " "), err, out, log)
	}
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	path, _, err := pgembed.Tool("", name)
	if err != nil {
		c.tb.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = c.Dir
	// The server pg_ctl starts must not get a terminal's signals, nor keep
	// the test's output pipes open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setsid: true}
	return cmd
}
