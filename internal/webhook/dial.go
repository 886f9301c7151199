package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Webhook URLs are chosen by database admins, so a webhook is a way to make
// the server send requests: to its own loopback services, to a cloud
// metadata endpoint (169.254.169.254), to the private network behind it.
// Policy refuses every address that is not public unless the operator
// allows its network (webhook_allow_networks), and it is checked on the
// address actually dialled, after name resolution, so a name that
// resolves to a public address when the webhook is made and to a private
// one later (DNS rebinding) is refused too. No proxy from the environment
// is used (it would dial for us), and redirects are not followed.

// Policy decides which addresses webhooks may connect to.
type Policy struct {
	// Allow lists the networks allowed although they are not public.
	Allow []netip.Prefix
}

// RefusedError is a connection Policy refused: nothing was sent.
type RefusedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused to connect to %s: %s (webhook_allow_networks can allow it)", e.Addr, e.Reason)
}

// special are the non-public ranges netip's predicates do not name.
var special = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `a "this network" address`},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay anycast address (deprecated, RFC 7526)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	// IPv4 addresses carried in IPv6 ones of these two forms are refused
	// whatever they carry: a host may still route them to the IPv4
	// address (::7f00:1 to 127.0.0.1, over a tunnel or a translator), and
	// no public service is reached through them. (IPv4-mapped ones,
	// ::ffff:0:0/96, are judged as the IPv4 address: see notPublic.)
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address (deprecated, RFC 4291)"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "an IPv4-translated (SIIT) address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
	{netip.MustParsePrefix("2001:2::/48"), "a benchmarking address"},
	// ORCHIDs are cryptographic host identifiers, not locators: a HIP
	// stack maps one to an address of its own choosing, and no public
	// server is reached at one (ORCHIDv2 is "globally reachable" in
	// IANA's registry only as an identifier).
	{netip.MustParsePrefix("2001:10::/28"), "an ORCHID identifier (deprecated, RFC 4843)"},
	{netip.MustParsePrefix("2001:20::/28"), "an ORCHIDv2 identifier (RFC 7343)"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("5f00::/16"), "a segment routing (SRv6) SID"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local NAT64 address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
}

// Check returns a *RefusedError when webhooks may not connect to a.
//
// An IPv6 address with a zone (fe80::1%eth0) is judged as the address
// without it: the zone only says which interface a link-local (or other
// scoped) address is on, and a connection to any other address goes where
// the address alone leads, whatever zone it is written with. Every check
// of prefixes must strip it: netip.Prefix.Contains is false for any zoned
// address, so 64:ff9b::a00:1%eth0 was taken for a public address though
// it reaches 10.0.0.1 (found by review). A zoned address in an allowed
// network (webhook_allow_networks: fe80::/10) is allowed, with its zone.
func (p Policy) Check(a netip.Addr) error {
	bare := a.WithZone("")
	for _, n := range p.Allow {
		if n.Contains(bare) || n.Contains(bare.Unmap()) {
			return nil
		}
	}
	if reason := notPublic(bare); reason != "" {
		return &RefusedError{Addr: a, Reason: reason}
	}
	return nil
}

// notPublic says why a is not a public unicast address, "" when it is. A
// zone is no part of the judgement (see Check).
func notPublic(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	// IPv4 addresses carried inside IPv6 ones (NAT64, 6to4) are judged as
	// what they reach.
	if a.Is6() {
		b := a.As16()
		if netip.MustParsePrefix("64:ff9b::/96").Contains(a) {
			if r := notPublic(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
				return r + " (through NAT64)"
			}
		}
		if netip.MustParsePrefix("2002::/16").Contains(a) {
			if r := notPublic(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
				return r + " (through 6to4)"
			}
		}
	}
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsUnspecified():
		return "an unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsPrivate():
		return "a private address"
	case a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.reason
		}
	}
	return ""
}

// control is a net.Dialer Control function: it refuses a connection to an
// address Policy refuses after the socket is made and before it connects,
// so no packet is sent to it.
func (p Policy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook dial %s %s: %w", network, address, err)
	}
	return p.Check(ap.Addr())
}

// dialer connects webhooks: it resolves the host, skips the addresses
// Policy refuses, and dials the others through dial until one connects.
// Tests give it a resolve and a dial of their own.
type dialer struct {
	policy  Policy
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	dial    func(ctx context.Context, network, address string) (net.Conn, error)
	// timeout bounds a whole dial, resolution and every address tried (0:
	// only ctx does). net/http dials with a context detached from the
	// request's (a connection may outlive the request, for the next one),
	// so the attempt's deadline never reaches the dialer: without a
	// bound of its own it had none to share between a name's addresses.
	// It is a little less than webhook_timeout (connectTimeout), so that
	// an attempt that could not connect says why, address by address,
	// rather than that no answer came.
	timeout time.Duration
}

// Sharing the time of a dial between addresses, as net.Dialer does: each
// address tried in turn gets an even share of what is left, and at least
// minAddressTime (or all that is left, when less), so that one address
// that never answers (a black-holed IPv6 path, a dead node of a
// round-robin name) cannot use the whole attempt and leave the working
// ones untried (found by review). When a name has addresses of both
// families, the other family's are dialled alongside after fallbackDelay,
// or at once when the first family's all failed (Happy Eyeballs, RFC
// 8305), as net.Dialer does too; the first connection made is used.
const (
	minAddressTime = 2 * time.Second
	fallbackDelay  = 300 * time.Millisecond
)

// connectTimeout is how long a dial of an attempt of at most timeout may
// take: nine tenths of it (at most a second less), so that the dial's own
// error, naming each address and why it failed, ends the attempt rather
// than the attempt's deadline.
func connectTimeout(timeout time.Duration) time.Duration {
	return timeout - min(timeout/10, time.Second)
}

// newDialer returns the production dialer: the system resolver, and a
// net.Dialer whose Control checks Policy again on the address it dials. A
// dial takes at most connectTimeout(timeout).
func newDialer(p Policy, timeout time.Duration) *dialer {
	nd := &net.Dialer{Control: p.control}
	d := &dialer{policy: p, dial: nd.DialContext, resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}}
	if timeout > 0 {
		d.timeout = connectTimeout(timeout)
	}
	return d
}

// DialContext connects to address (host:port) for network.
func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if d.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.timeout)
		defer cancel()
	}
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("webhook dial %s: bad port", address)
	}
	var addrs []netip.Addr
	a, err := netip.ParseAddr(host)
	named := err != nil
	if !named {
		addrs = []netip.Addr{a}
	} else if addrs, err = d.resolve(ctx, host); err != nil {
		return nil, &unreachableError{host: host, lookup: lookupFailure(err), detail: err}
	} else if len(addrs) == 0 {
		// The system resolver says "no such host" then; a resolver of a
		// test's may not.
		return nil, &unreachableError{host: host, lookup: "no such host", detail: errors.New("no addresses")}
	}
	var refused []error
	var primaries, fallbacks []netip.AddrPort
	for _, a := range addrs {
		if err := d.policy.Check(a); err != nil {
			refused = append(refused, err)
			continue
		}
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		if len(primaries) == 0 || ap.Addr().Is4() == primaries[0].Addr().Is4() {
			primaries = append(primaries, ap)
		} else {
			fallbacks = append(fallbacks, ap)
		}
	}
	if len(primaries) == 0 {
		if !named {
			return nil, errors.Join(refused...) // the address the URL names
		}
		return nil, &unreachableError{host: host, detail: errors.Join(refused...)}
	}
	// The addresses dialled are public (or allowed), and said when they
	// fail; the refused ones are not.
	return d.dialParallel(ctx, network, host, primaries, fallbacks)
}

// dialParallel dials primaries in turn and, after fallbackDelay or once
// they all failed, fallbacks in turn alongside (see minAddressTime). It
// returns the first connection made, closing any other; or, when none
// was, a *connectError saying why each address tried failed.
func (d *dialer) dialParallel(ctx context.Context, network, host string, primaries, fallbacks []netip.AddrPort) (net.Conn, error) {
	if len(fallbacks) == 0 {
		c, tries := d.dialSerial(ctx, network, primaries)
		if c != nil {
			return c, nil
		}
		return nil, &connectError{host: host, tries: tries, ctxErr: ctx.Err()}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		c     net.Conn
		tries []connectTry
	}
	results := make(chan result, 2)
	race := func(addrs []netip.AddrPort) {
		c, tries := d.dialSerial(ctx, network, addrs)
		results <- result{c, tries}
	}
	go race(primaries)
	fallback := time.NewTimer(fallbackDelay)
	defer fallback.Stop()
	racing, startedFallback := 1, false
	startFallback := func() {
		if !startedFallback {
			startedFallback = true
			racing++
			go race(fallbacks)
		}
	}
	var tries []connectTry
	for racing > 0 {
		select {
		case <-fallback.C:
			startFallback()
		case r := <-results:
			racing--
			if r.c != nil {
				cancel()
				// The other racer, if still dialling, gives up; a
				// connection it made meanwhile is closed.
				for range racing {
					go func() {
						if r := <-results; r.c != nil {
							r.c.Close()
						}
					}()
				}
				return r.c, nil
			}
			tries = append(tries, r.tries...)
			startFallback()
		}
	}
	return nil, &connectError{host: host, tries: tries, ctxErr: ctx.Err()}
}

// dialSerial dials addrs in turn, each with its share of the time left
// (see minAddressTime), until one connects. It returns the connection, or
// what each address tried came to.
func (d *dialer) dialSerial(ctx context.Context, network string, addrs []netip.AddrPort) (net.Conn, []connectTry) {
	var tries []connectTry
	for i, ap := range addrs {
		if ctx.Err() != nil {
			break // the dial's time is up, or another address connected
		}
		actx, cancel := ctx, context.CancelFunc(func() {})
		share := time.Duration(0)
		if deadline, ok := ctx.Deadline(); ok {
			left := time.Until(deadline)
			share = left / time.Duration(len(addrs)-i)
			if share < minAddressTime {
				share = min(minAddressTime, left)
			}
			actx, cancel = context.WithTimeout(ctx, share)
		}
		start := time.Now()
		c, err := d.dial(actx, network, ap.String())
		timedOut := err != nil && actx.Err() == context.DeadlineExceeded
		cancel()
		if err == nil {
			return c, nil
		}
		tries = append(tries, connectTry{addr: ap, err: err, took: time.Since(start), timedOut: timedOut})
	}
	return nil, tries
}

// connectTry is what dialling one address came to.
type connectTry struct {
	addr     netip.AddrPort
	err      error
	took     time.Duration
	timedOut bool // no answer within the address's share of the time
}

// connectError is a dial none of whose addresses connected: it says why
// for each address tried (each is public, or allowed: see DialContext),
// and not that no answer came to the request, which was never sent.
type connectError struct {
	host   string
	tries  []connectTry
	ctxErr error // why the addresses not tried were not
}

func (e *connectError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "could not connect to %s: ", e.host)
	for i, t := range e.tries {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: ", t.addr)
		var oe *net.OpError
		var re *RefusedError
		switch {
		case t.timedOut || errors.Is(t.err, context.DeadlineExceeded):
			fmt.Fprintf(&b, "no answer within %s", t.took.Round(10*time.Millisecond))
		case errors.As(t.err, &re):
			b.WriteString(re.Error())
		case errors.As(t.err, &oe) && oe.Err != nil:
			b.WriteString(oe.Err.Error())
		default:
			b.WriteString(t.err.Error())
		}
	}
	if len(e.tries) == 0 && e.ctxErr != nil {
		b.WriteString("no address was tried in time")
	}
	return b.String()
}

func (e *connectError) Unwrap() []error {
	errs := make([]error, len(e.tries))
	for i, t := range e.tries {
		errs[i] = t.err
	}
	return errs
}

// unreachableError is a name that does not resolve (lookup says why), or
// that resolves only to addresses Policy refuses (lookup is ""). The two
// are told apart, since their fixes differ (the URL's host, or the
// operator's webhook_allow_networks), but the text names no address and
// not the resolver's own words: attempts are shown to the database's
// admins, who are not necessarily the server's operators, and an address
// (or the resolver's, in its error) would map the network behind the
// server. detail says, for the server's log.
type unreachableError struct {
	host   string
	lookup string
	detail error
}

func (e *unreachableError) Error() string {
	if e.lookup != "" {
		return fmt.Sprintf("%s does not resolve: %s", e.host, e.lookup)
	}
	return fmt.Sprintf("%s resolves only to addresses webhooks may not connect to (not public, and not in webhook_allow_networks; the server's log names them)", e.host)
}

// lookupFailure says in a user's words why a name did not resolve. It
// does not use the resolver's error text, which may name the resolver's
// address (a read from it that timed out names both ends).
func lookupFailure(err error) string {
	var de *net.DNSError
	isDNS := errors.As(err, &de)
	switch {
	case isDNS && de.IsNotFound:
		return "no such host"
	case isDNS && de.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return "the DNS lookup timed out"
	case isDNS && de.IsTemporary:
		return "the DNS server could not answer (a temporary failure)"
	}
	return "the DNS lookup failed (the server's log says why)"
}
