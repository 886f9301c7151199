package httpstream

import (
	"errors"
	"net"
	"sync"
)

// Listener is a net.Listener that also accepts the connections of parked
// streams that ended cleanly (see Park): net/http then serves the next
// request a client sends on one as on a new connection, so a stream's
// connection stays keep-alive though it was taken from net/http. Give it
// to the server's requests with WithListener (its BaseContext).
type Listener struct {
	net.Listener

	accepted chan acceptResult
	back     chan net.Conn
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
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
	l := &Listener{Listener: ln, accepted: make(chan acceptResult), back: make(chan net.Conn, backQueue), done: make(chan struct{})}
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

// Close closes the listener; connections given back from then on are
// closed.
func (l *Listener) Close() error {
	err := l.Listener.Close()
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

// give hands c to the server through Accept, or closes it once the
// listener is closed.
func (l *Listener) give(c net.Conn) {
	select {
	case <-l.done:
		_ = c.Close()
		return
	default:
	}
	select {
	case l.back <- c:
	case <-l.done:
		_ = c.Close()
	}
}
