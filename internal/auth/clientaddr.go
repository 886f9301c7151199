package auth

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr returns the address of the client that sent r, the one every
// per-client budget is keyed on (the throttle, ticket redemption, the
// graphql-ws sockets waiting for connection_init). It is r.RemoteAddr's
// IP, unless that IP is in trusted (config trusted_proxies): behind a
// reverse proxy every request comes from the proxy, and keyed on it one
// client's failures would block every client. Then X-Forwarded-For is
// read from the right, each hop having been appended by the proxy before
// it: hops that are trusted proxies themselves are skipped, and the first
// one that is not is the client. Only the hops a trusted proxy appended
// are believed: what lies left of the first untrusted one is the client's
// own text, which it may fill with any address to escape its throttle. A
// malformed hop (not an IP address) stops the walk at the last trusted
// hop, which is then the client's address, rather than trusting text
// that no proxy would have written. When every hop is trusted, the
// leftmost is the client, the closest to it that is known.
//
// The result is an IP address without a port (the raw RemoteAddr when it
// is not host:port, as a test's request may have).
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || len(trusted) == 0 {
		return host
	}
	peer = peer.Unmap()
	if !isTrusted(peer, trusted) {
		return peer.String()
	}
	// Several X-Forwarded-For headers are one list, in their order (RFC
	// 9110, 5.3).
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		if h == "" && len(hops) == 1 {
			break // no header at all: the proxy is the client
		}
		ip, err := netip.ParseAddr(h)
		if err != nil || ip.Zone() != "" {
			break
		}
		ip = ip.Unmap()
		if !isTrusted(ip, trusted) {
			return ip.String()
		}
		client = ip
	}
	return client.String()
}

func isTrusted(ip netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// WithTrustedProxies makes the Authenticator take the client's address of
// a request from the peers in trusted (config trusted_proxies) as their
// X-Forwarded-For says (ClientAddr); none: always the peer's.
func WithTrustedProxies(trusted []netip.Prefix) Option {
	return func(a *Authenticator) { a.trustedProxies = trusted }
}

// ClientAddr returns the address of the client that sent r, as the
// Authenticator's trusted proxies tell it (ClientAddr).
func (a *Authenticator) ClientAddr(r *http.Request) string { return ClientAddr(r, a.trustedProxies) }
