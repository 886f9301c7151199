package postgres

import (
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// defaultConnectTimeout bounds each attempt to connect to a Postgres host
// (TCP, TLS and authentication) when the connection string sets no
// connect_timeout, nor PGCONNECT_TIMEOUT: pgx has no bound of its own, so
// a server that accepted the TCP connection and never answered held the
// start for good, saying nothing. With several hosts, each has this long.
const defaultConnectTimeout = 10 * time.Second

// connectTimeoutKey matches connect_timeout set in a key=value connection
// string.
var connectTimeoutKey = regexp.MustCompile(`(^|\s)connect_timeout\s*=`)

// setsConnectTimeout reports whether connString (a URL or key=value
// pairs) or the environment, as lookupEnv reads it, sets connect_timeout,
// 0 (no bound) included.
func setsConnectTimeout(connString string, lookupEnv func(string) (string, bool)) bool {
	if v, ok := lookupEnv("PGCONNECT_TIMEOUT"); ok && v != "" {
		return true
	}
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		return err == nil && u.Query().Has("connect_timeout")
	}
	return connectTimeoutKey.MatchString(connString)
}

// hosts returns the addresses cfg connects to, in the order tried, each
// once: host:port, or the socket file of a Unix-domain socket.
func hosts(cfg *pgconn.Config) []string {
	var out []string
	add := func(host string, port uint16) {
		p := strconv.Itoa(int(port))
		a := net.JoinHostPort(host, p)
		if strings.HasPrefix(host, "/") {
			a = filepath.Join(host, ".s.PGSQL."+p)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return out
}
