package auth

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tc := range []struct {
		name    string
		remote  string
		xff     []string // X-Forwarded-For headers, in order
		trusted []netip.Prefix
		want    string
	}{
		{name: "no trusted proxies: the header is ignored", remote: "127.0.0.1:5000", xff: []string{"203.0.113.7"}, want: "127.0.0.1"},
		{name: "untrusted peer spoofing the header", remote: "198.51.100.9:5000", xff: []string{"203.0.113.7"}, trusted: trusted, want: "198.51.100.9"},
		{name: "trusted peer without the header", remote: "127.0.0.1:5000", trusted: trusted, want: "127.0.0.1"},
		{name: "trusted peer", remote: "127.0.0.1:5000", xff: []string{"203.0.113.7"}, trusted: trusted, want: "203.0.113.7"},
		{name: "IPv4-mapped trusted peer", remote: "[::ffff:127.0.0.1]:5000", xff: []string{"203.0.113.7"}, trusted: trusted, want: "203.0.113.7"},
		{name: "client's spoofed hop left of the proxy's", remote: "127.0.0.1:5000", xff: []string{"192.0.2.66, 203.0.113.7"}, trusted: trusted, want: "203.0.113.7"},
		{name: "chain of trusted proxies", remote: "127.0.0.1:5000", xff: []string{"192.0.2.66, 203.0.113.7, 10.1.1.1,10.2.2.2"}, trusted: trusted, want: "203.0.113.7"},
		{name: "chain in several headers", remote: "127.0.0.1:5000", xff: []string{"192.0.2.66, 203.0.113.7", "10.1.1.1"}, trusted: trusted, want: "203.0.113.7"},
		{name: "untrusted hop between proxies", remote: "127.0.0.1:5000", xff: []string{"203.0.113.7, 198.51.100.9, 10.1.1.1"}, trusted: trusted, want: "198.51.100.9"},
		{name: "every hop trusted", remote: "127.0.0.1:5000", xff: []string{"10.3.3.3, 10.1.1.1"}, trusted: trusted, want: "10.3.3.3"},
		{name: "IPv6 client", remote: "[fd00::1]:5000", xff: []string{"2001:db8::7"}, trusted: trusted, want: "2001:db8::7"},
		{name: "malformed hop", remote: "127.0.0.1:5000", xff: []string{"unknown"}, trusted: trusted, want: "127.0.0.1"},
		{name: "malformed hop behind a trusted one", remote: "127.0.0.1:5000", xff: []string{"203.0.113.7, garbage, 10.1.1.1"}, trusted: trusted, want: "10.1.1.1"},
		{name: "hop with a port", remote: "127.0.0.1:5000", xff: []string{"203.0.113.7:443"}, trusted: trusted, want: "127.0.0.1"},
		{name: "empty hop", remote: "127.0.0.1:5000", xff: []string{"203.0.113.7,,10.1.1.1"}, trusted: trusted, want: "10.1.1.1"},
		{name: "hop with a zone", remote: "127.0.0.1:5000", xff: []string{"fe80::1%eth0"}, trusted: trusted, want: "127.0.0.1"},
		{name: "empty header", remote: "127.0.0.1:5000", xff: []string{""}, trusted: trusted, want: "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := ClientAddr(r, tc.trusted); got != tc.want {
				t.Errorf("ClientAddr = %q, want %q", got, tc.want)
			}
			a := New(nil, 0, nil, WithTrustedProxies(tc.trusted))
			if got := a.ClientAddr(r); got != tc.want {
				t.Errorf("Authenticator.ClientAddr = %q, want %q", got, tc.want)
			}
		})
	}
}
