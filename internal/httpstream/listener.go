package httpstream

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// Listener is a net.Listener that also accepts the connections of parked
// streams that ended cleanly (see Park): net/http then serves the next
// request a client sends on one as on a new connection, so a stream's
// connection stays keep-alive though it was taken from net/http. Give it
// to the server's requests with WithListener (its BaseContext).
//
// A connection given back is idle until the client sends its next
// request on it, as a keep-alive connection between requests is; but the
// server sees a new connection, which its Shutdown waits for until it has
// sent nothing for five seconds (net/http's rule for new connections).
// So Close, which Shutdown calls first, closes the connections given back
// that the server has not read a byte from, as Shutdown closes its idle
// ones: otherwise a client that keeps its connections open between
// requests (a browser, Go's http.Transport) held every stop for five
// seconds, and past a shutdown_timeout under that the drain timed out.
type Listener struct {
	net.Listener

	accepted chan acceptResult
	back     chan net.Conn
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup

	mu     sync.Mutex
	closed bool
	// idle holds the connections given back that nothing was read from
	// since; nil once closed.
	idle map[*givenConn]struct{}
}

type acceptResult struct {
	c   net.Conn
	err error
}

// backQueue is how many connections given back may wait for the server's
// Accept: the workers that end parked streams (thousands at once on
// shutdown) seldom wait for it.
const backQueue = 1024

// NewListener returns a Listener accepting from ln and the connections
// given back.
func NewListener(ln net.Listener) *Listener {
	l := &Listener{Listener: ln, accepted: make(chan acceptResult), back: make(chan net.Conn, backQueue), done: make(chan struct{}),
		idle: map[*givenConn]struct{}{}}
	l.wg.Go(l.acceptLoop)
	return l
}

// acceptLoop hands the listener's connections to Accept until it fails.
func (l *Listener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		select {
		case l.accepted <- acceptResult{c, err}:
		case <-l.done:
			if c != nil {
				_ = c.Close()
			}
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if !errors.Is(err, net.ErrClosed) {
				continue // net/http retries temporary errors itself
			}
			return
		}
	}
}

// Accept returns the next connection: a new one, or one given back.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.back:
		return c, nil
	case r := <-l.accepted:
		return r.c, r.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener, and the connections given back that the
// server has not read from (see Listener); connections given back from
// then on are closed.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closed = true
	idle := l.idle
	l.idle = nil
	l.mu.Unlock()
	for c := range idle {
		_ = c.Conn.Close()
	}
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
	for {
		select {
		case c := <-l.back:
			_ = c.Close()
		default:
			return err
		}
	}
}

// give hands conn to the server through Accept, reading leftover (what
// the client sent after its request, read before the connection was
// taken) first, or closes it once the listener is closed.
func (l *Listener) give(conn net.Conn, leftover []byte) {
	if g, ok := conn.(*givenConn); ok {
		// Given back before (one stream after another on a keep-alive
		// connection): one wrapper, whatever the number of streams, and
		// what it had not read yet comes after what the server had.
		conn, leftover = g.Conn, append(leftover, g.prefix...)
	}
	c := &givenConn{Conn: conn, l: l, prefix: leftover}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = conn.Close()
		return
	}
	// Counted idle before the server can have it: Close closes it
	// wherever it is by then.
	l.idle[c] = struct{}{}
	l.mu.Unlock()
	select {
	case l.back <- c:
	case <-l.done:
		_ = c.Close()
	}
}

// givenConn is a connection given back to the server after a parked
// stream: it reads first what the client sent ahead, and is idle until
// something is read from it.
type givenConn struct {
	net.Conn
	l      *Listener
	prefix []byte
	// busy is set once a read returned something: the server serves a
	// request on it, which its Shutdown waits for.
	busy atomic.Bool
}

// NetConn returns the connection under c (for whoever counts connections
// by what the listener returned: see connlimit).
func (c *givenConn) NetConn() net.Conn { return c.Conn }

// SyscallConn returns the socket's, so that a stream's response on the
// connection can be parked in turn (Writer.Park).
func (c *givenConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("httpstream: the connection has no socket")
}

// ReadFrom keeps the socket's own (sendfile or splice) for what
// net/http copies into a response.
func (c *givenConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *givenConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		c.used()
		return n, nil
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.used()
	}
	return n, err
}

// Close closes the connection and counts it out of the idle ones.
func (c *givenConn) Close() error {
	c.used()
	return c.Conn.Close()
}

// used counts c out of its listener's idle connections, once.
func (c *givenConn) used() {
	if c.busy.Load() || c.busy.Swap(true) {
		return
	}
	c.l.mu.Lock()
	delete(c.l.idle, c) // nil once closed: nothing to do
	c.l.mu.Unlock()
}
