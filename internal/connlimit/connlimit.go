// Package connlimit bounds the connections an HTTP server holds, at
// accept, so that no client, not even one without credentials, can take
// every file descriptor of the process.
//
// A connection is waiting while it carries no request: new (its first
// request not read yet) or idle between keep-alive requests. net/http
// keeps an idle connection for its IdleTimeout and a new one for its
// ReadHeaderTimeout, but bounds neither their number nor a client's share
// of them: one client opening tens of thousands of connections, each
// sending one public request and then nothing, held every descriptor, and
// nobody could connect. Here the waiting connections are bounded in all
// and per client address, and every connection in all; past a bound the
// oldest waiting connection is closed to make room, the ones that never
// carried an authenticated request first (these are also kept idle for
// a shorter time, AnonymousIdle); a new connection is given a second to
// send its request (freshGrace) unless the total bound needs its place. A connection with a request in
// flight, or a stream (hijacked or not), is never closed to make room,
// once it carried an authenticated request: when the total bound is
// reached by those alone, a new connection is closed at once. One that
// never did stays waiting while its requests are in flight (see
// ConnState), and has at most AnonymousRequests of them (see Handler).
//
// The client address is the socket's peer, an IPv6 address by its /64
// (auth.AddressKey): no header is read at accept, and none is believed
// for this bound.
package connlimit

import (
	"container/list"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/auth"
)

// Limits are a Listener's bounds; 0 is no bound.
type Limits struct {
	// Total is the most connections held at once, whatever they do
	// (streams and connections taken from the server included).
	Total int
	// Waiting is the most waiting connections (new or idle) held at once.
	Waiting int
	// PerAddress is the most waiting connections of one client address.
	PerAddress int
	// Exempt are peers not bounded per address (trusted proxies: every
	// client behind one comes from its address); the other bounds hold.
	Exempt []netip.Prefix
	// AnonymousIdle, when positive, is how long a connection that never
	// carried an authenticated request is kept waiting (the server's
	// IdleTimeout holds the others).
	AnonymousIdle time.Duration
	// AnonymousRequests, when positive, is the most requests a
	// connection that never carried an authenticated request, and whose
	// peer is not Exempt, has in flight at once (see Handler): over
	// HTTP/2 one connection carries many.
	AnonymousRequests int
}

// Listener is a net.Listener that counts its connections and keeps them
// within its Limits. The server serving it must report its connections'
// states to ConnState (http.Server.ConnState), and may give ConnContext to
// its http.Server so that Authenticated finds a request's connection.
type Listener struct {
	net.Listener
	lim    Limits
	logger *slog.Logger

	mu      sync.Mutex
	total   int
	waiting tiers
	addrs   map[string]*address
	// Evictions and refusals since the last warning, and when it was.
	evicted, refused int
	warned           time.Time
	// stats counts since the Listener was made, for Stats.
	stats Stats
}

// Stats are what a Listener holds now and has closed or refused since it
// was made (the daemon's sluice_http_connections* metrics).
type Stats struct {
	// Connections and Waiting are held now: all, and those carrying no
	// request (new or idle) or that never authenticated (ConnState).
	Connections, Waiting int
	// Evicted counts waiting connections closed to make room at a bound,
	// Refused new ones closed at once (the total bound held by busy
	// connections alone), and Expired those closed for having waited
	// AnonymousIdle without an authenticated request. Aborted counts
	// requests refused past AnonymousRequests (see Handler).
	Evicted, Refused, Expired, Aborted uint64
}

// Stats returns what l holds now and what it has closed or refused.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Connections, s.Waiting = l.total, l.waiting.len()
	return s
}

// tiers are waiting connections, oldest first: those that never carried
// an authenticated request ([0]), and the others ([1]).
type tiers [2]list.List

func (t *tiers) len() int { return t[0].Len() + t[1].Len() }

// address is what one client address holds.
type address struct {
	conns   int
	waiting tiers
}

// New returns a Listener of ln keeping within lim; logger is told, at
// most once a minute, that connections were closed or refused at a
// bound.
func New(ln net.Listener, lim Limits, logger *slog.Logger) *Listener {
	return &Listener{Listener: ln, lim: lim, logger: logger, addrs: map[string]*address{}}
}

// Conn is one of a Listener's connections.
type Conn struct {
	net.Conn
	l      *Listener
	key    string
	exempt bool

	// Guarded by l.mu.
	addr          *address
	authenticated bool
	elem, inAddr  *list.Element // set while waiting
	gone          bool          // counted out (closed or evicted)
	// expire closes a waiting connection that never authenticated at
	// the end of AnonymousIdle; waits counts the times c became waiting,
	// so that a timer of an earlier wait does nothing.
	expire *time.Timer
	waits  uint64
	// inFlight counts c's requests in Handler.
	inFlight int
	// fresh is set from when c is accepted (or given back to the server)
	// until its first request is read, at freshSince.
	fresh      bool
	freshSince time.Time
}

// freshGrace is how long a new connection is not closed to keep the
// Waiting and PerAddress bounds (Total closes it all the same): a client
// opening many connections at once (a backend's burst of requests) had
// the first ones closed before the server read their requests, which
// arrive within a round trip. Past it, a connection that has sent no
// request is like an idle one; net/http closes it at ReadHeaderTimeout.
const freshGrace = time.Second

// Accept returns the next connection within the bounds, closing waiting
// ones to make room; a connection over the total bound with none waiting
// is closed at once and the next one awaited.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &Conn{Conn: nc, l: l, key: auth.AddressKey(nc.RemoteAddr().String())}
		if ip, ok := peerIP(nc.RemoteAddr()); ok {
			for _, p := range l.lim.Exempt {
				if p.Contains(ip) {
					c.exempt = true
					break
				}
			}
		}
		victims, ok := l.admit(c)
		closeAll(victims)
		if ok {
			return c, nil
		}
		_ = nc.Close()
	}
}

// admit counts c in, as waiting, and returns the connections to close to
// keep the bounds; false when c itself must be closed (the total bound is
// reached and nothing waits).
func (l *Listener) admit(c *Conn) ([]*Conn, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var victims []*Conn
	if l.lim.Total > 0 && l.total >= l.lim.Total {
		v := oldest(&l.waiting, nil, time.Time{})
		if v == nil {
			l.refused++
			l.stats.Refused++
			l.warn()
			return nil, false
		}
		l.forget(v)
		l.evicted++
		l.stats.Evicted++
		l.warn()
		victims = append(victims, v)
	}
	a := l.addrs[c.key]
	if a == nil {
		a = &address{}
		l.addrs[c.key] = a
	}
	c.addr = a
	c.fresh, c.freshSince = true, time.Now()
	a.conns++
	l.total++
	l.wait(c)
	return append(victims, l.trim(c)...), true
}

// ConnState is the server's http.Server.ConnState: a connection is waiting
// while new or idle, and no longer while active or taken from the server
// (hijacked: a stream or a WebSocket, until it is closed or given back).
// A connection that never carried an authenticated request stays waiting
// while active, as the youngest of its tier from then on, though it is
// not closed for AnonymousIdle meanwhile: its requests carry no
// credentials (or wrong ones), and are answered at once, so they are no
// reason to keep it. Over HTTP/2 a client that grants the server no
// flow-control window keeps such an answer, a 401, unsent until
// write_timeout, and its connection active for as long as it asks again:
// kept as busy, a client without credentials held every place of the
// total bound, and the connections of everyone else were closed at once.
// A taken connection (a graphql-ws socket waiting for its
// connection_init) is bounded by its own caps.
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	c := find(nc)
	if c == nil || c.l != l {
		return
	}
	var victims []*Conn
	l.mu.Lock()
	if !c.gone {
		switch state {
		case http.StateNew:
			if c.elem == nil { // given back after a stream
				c.fresh, c.freshSince = true, time.Now()
			}
			l.wait(c)
			victims = l.trim(c)
		case http.StateIdle:
			l.unwait(c) // if it waited while active: its wait starts now
			l.wait(c)
			victims = l.trim(c)
		case http.StateActive:
			c.fresh = false
			l.unwait(c)
			if !c.authenticated {
				l.waitBusy(c)
			}
		case http.StateHijacked:
			c.fresh = false
			l.unwait(c)
		}
	}
	l.mu.Unlock()
	closeAll(victims)
}

// connKey is the context key of a request's connection.
type connKey struct{}

// ConnContext is the server's http.Server.ConnContext: its requests'
// contexts carry their connection, for Authenticated.
func (l *Listener) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c := find(nc); c != nil {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// Authenticated notes that the connection of the request whose context
// is ctx carried an authenticated request: such a connection is closed to
// make room only once none that never did waits.
func Authenticated(ctx context.Context) {
	c, ok := ctx.Value(connKey{}).(*Conn)
	if !ok {
		return
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	// Set while a request is in flight: the connection, waiting while it
	// never authenticated (ConnState), is busy from now on.
	c.l.unwait(c)
	c.authenticated = true
}

// Handler serves next, counting each request in flight on its
// connection until next returns. A connection that never carried an
// authenticated request has at most Limits.AnonymousRequests: the
// stream of one more is reset unanswered (http.ErrAbortHandler). Over
// HTTP/2 such a request is answered at once (a 401, or a public route's
// few bytes), but a client that grants no flow-control window keeps the
// answer unsent, and next's goroutine and buffers (about 18 KB), until
// write_timeout: Go's 250 streams a connection held 4.4 MB of a client
// without credentials. next must send its answer before it returns (the
// daemon's does, in rest's observe), so that its request counts while
// it waits. A reset holds nothing once its handler returns, where an
// answer, such as a 503, waits until its headers are sent.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := r.Context().Value(connKey{}).(*Conn)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if !c.begin() {
			panic(http.ErrAbortHandler)
		}
		defer c.end()
		next.ServeHTTP(w, r)
	})
}

// begin counts a request of c in flight, unless c never carried an
// authenticated request and has AnonymousRequests in flight already.
func (c *Conn) begin() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if n := c.l.lim.AnonymousRequests; n > 0 && !c.authenticated && !c.exempt && c.inFlight >= n {
		c.l.stats.Aborted++
		return false
	}
	c.inFlight++
	return true
}

// end counts a request of c out.
func (c *Conn) end() {
	c.l.mu.Lock()
	c.inFlight--
	c.l.mu.Unlock()
}

// Close closes the connection and counts it out.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	if !c.gone {
		c.l.forget(c)
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// SyscallConn returns the socket's, so that a response can be written to
// it directly (httpstream.Writer.Park).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("connlimit: the connection has no socket")
}

// ReadFrom keeps the socket's own (sendfile or splice) for what
// net/http copies into a response.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// NetConn returns the connection under c.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// wait makes c waiting, the youngest of its tier; l.mu is held.
func (l *Listener) wait(c *Conn) {
	if c.elem != nil {
		return
	}
	l.waitBusy(c)
	if !c.authenticated && l.lim.AnonymousIdle > 0 {
		wait := c.waits
		c.expire = time.AfterFunc(l.lim.AnonymousIdle, func() { l.expired(c, wait) })
	}
}

// waitBusy makes c waiting, the youngest of its tier, without the timer
// of AnonymousIdle: c is active, or the caller sets it; l.mu is held.
func (l *Listener) waitBusy(c *Conn) {
	if c.elem != nil {
		return
	}
	tier := 0
	if c.authenticated {
		tier = 1
	}
	c.elem = l.waiting[tier].PushBack(c)
	c.inAddr = c.addr.waiting[tier].PushBack(c)
	c.waits++
}

// expired closes c if it is still in the wait the timer was set for.
func (l *Listener) expired(c *Conn, wait uint64) {
	l.mu.Lock()
	if c.gone || c.elem == nil || c.waits != wait {
		l.mu.Unlock()
		return
	}
	l.forget(c)
	l.stats.Expired++
	l.mu.Unlock()
	_ = c.Conn.Close()
}

// unwait makes c no longer waiting; l.mu is held.
func (l *Listener) unwait(c *Conn) {
	if c.elem == nil {
		return
	}
	tier := 0
	if c.authenticated {
		tier = 1
	}
	l.waiting[tier].Remove(c.elem)
	c.addr.waiting[tier].Remove(c.inAddr)
	c.elem, c.inAddr = nil, nil
	if c.expire != nil {
		c.expire.Stop()
		c.expire = nil
	}
}

// forget counts c out; l.mu is held.
func (l *Listener) forget(c *Conn) {
	l.unwait(c)
	c.gone = true
	l.total--
	if c.addr.conns--; c.addr.conns == 0 {
		delete(l.addrs, c.key) // the addresses connected now, not all seen
	}
}

// trim counts out, and returns to be closed, the oldest waiting
// connections beyond the Waiting bound, and beyond the PerAddress bound
// of c's address, never c itself nor one within freshGrace; l.mu is
// held.
func (l *Listener) trim(c *Conn) []*Conn {
	var victims []*Conn
	young := time.Now().Add(-freshGrace)
	for l.lim.PerAddress > 0 && !c.exempt && c.addr.waiting.len() > l.lim.PerAddress {
		v := oldest(&c.addr.waiting, c, young)
		if v == nil {
			break
		}
		l.forget(v)
		victims = append(victims, v)
	}
	for l.lim.Waiting > 0 && l.waiting.len() > l.lim.Waiting {
		v := oldest(&l.waiting, c, young)
		if v == nil {
			break
		}
		l.forget(v)
		victims = append(victims, v)
	}
	if len(victims) > 0 {
		l.evicted += len(victims)
		l.stats.Evicted += uint64(len(victims))
		l.warn()
	}
	return victims
}

// oldest returns the oldest connection of t other than skip and than
// the fresh ones accepted after young (zero: none spared), of the first
// tier that has one; nil if none.
func oldest(t *tiers, skip *Conn, young time.Time) *Conn {
	for i := range t {
		for e := t[i].Front(); e != nil; e = e.Next() {
			if c := e.Value.(*Conn); c != skip && !(!young.IsZero() && c.fresh && c.freshSince.After(young)) {
				return c
			}
		}
	}
	return nil
}

// warnEvery is how often, at most, a Listener logs that it closed or
// refused connections at its bounds.
const warnEvery = time.Minute

// warn logs what was closed or refused since the last warning, at most
// once every warnEvery; l.mu is held.
func (l *Listener) warn() {
	if l.logger == nil || time.Since(l.warned) < warnEvery {
		return
	}
	l.logger.Warn("connections at their bounds: closed the oldest waiting ones to make room, or refused new ones when none waited (see the connection bounds in the security documentation)",
		"closed", l.evicted, "refused", l.refused, "connections", l.total, "waiting", l.waiting.len(),
		"max_connections", l.lim.Total, "max_waiting", l.lim.Waiting, "max_waiting_per_address", l.lim.PerAddress)
	l.evicted, l.refused, l.warned = 0, 0, time.Now()
}

// closeAll closes the sockets of connections already counted out: the
// server serving one sees its read fail and lets it go.
func closeAll(cs []*Conn) {
	for _, c := range cs {
		_ = c.Conn.Close()
	}
}

// find returns the Conn under nc (a TLS connection, or one given back to
// the server after a stream: see httpstream.Listener), or nil.
func find(nc net.Conn) *Conn {
	for nc != nil {
		if c, ok := nc.(*Conn); ok {
			return c
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		nc = u.NetConn()
	}
	return nil
}

// peerIP returns the IP of a socket's peer address.
func peerIP(a net.Addr) (netip.Addr, bool) {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, ok := netip.AddrFromSlice(ta.IP)
		return ip.Unmap(), ok
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}
