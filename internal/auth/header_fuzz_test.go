package auth

import (
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
)

// FuzzCacheTTL reads any Cache-Control header of a JWKS answer (the
// issuer's, or whatever sits on its path): the time the key set is kept
// is always within jwksMinTTL and jwksMaxTTL, and a lone max-age within
// them is taken as it is.
func FuzzCacheTTL(f *testing.F) {
	for _, s := range []string{"", "max-age=300", "max-age=\"600\"", "no-cache", "public, max-age=99999999999", "max-age=-1", "MAX-AGE=120", "max-age=1e3", "no-store, max-age=3600", "max-age=9223372036854775807", ",,,="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cc string) {
		ttl := cacheTTL(cc)
		if ttl < jwksMinTTL || ttl > jwksMaxTTL {
			t.Fatalf("cacheTTL(%q) = %v, outside %v to %v", cc, ttl, jwksMinTTL, jwksMaxTTL)
		}
		if n, ok := strings.CutPrefix(cc, "max-age="); ok && !strings.ContainsAny(n, ",\"") {
			if d, err := time.ParseDuration(n + "s"); err == nil && strings.Trim(n, "0123456789") == "" && d >= jwksMinTTL && d <= jwksMaxTTL && ttl != d {
				t.Fatalf("cacheTTL(%q) = %v, want %v", cc, ttl, d)
			}
		}
	})
}

// FuzzClientAddr reads any X-Forwarded-For headers of a request from any
// peer, behind trusted proxies: the client's address is the peer's, or
// one the headers name, never a text that is not an address.
func FuzzClientAddr(f *testing.F) {
	for _, s := range [][2]string{{"10.0.0.1:5000", "203.0.113.7"}, {"10.0.0.1:5000", "203.0.113.7, 10.0.0.2"}, {"10.0.0.1:5000", "::ffff:203.0.113.7"},
		{"198.51.100.1:80", "203.0.113.7"}, {"10.0.0.1:5000", "fe80::1%eth0, 10.0.0.3"}, {"10.0.0.1:5000", ""}, {"10.0.0.1:5000", ",,"}, {"[::ffff:10.0.0.1]:1", "x"},
		{"10.0.0.1:5000", "1.2.3.4,\t10.0.0.9 ,"}} {
		f.Add(s[0], s[1], "")
	}
	f.Add("10.0.0.1:5000", "203.0.113.7", "10.0.0.4")
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fe80::/10")}
	f.Fuzz(func(t *testing.T, remote, xff1, xff2 string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		for _, h := range []string{xff1, xff2} {
			if h != "" {
				r.Header.Add("X-Forwarded-For", h)
			}
		}
		got := ClientAddr(r, trusted)
		peer, err := netip.ParseAddrPort(remote)
		if err != nil {
			return // not host:port: the test's own RemoteAddr, taken as it is
		}
		ip, err := netip.ParseAddr(got)
		if err != nil {
			t.Fatalf("ClientAddr(%q, %q) = %q, not an address", remote, r.Header.Values("X-Forwarded-For"), got)
		}
		if ip == peer.Addr().Unmap() {
			return
		}
		var named []netip.Addr
		for _, h := range strings.Split(xff1+","+xff2, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(h)); err == nil {
				named = append(named, a.Unmap())
			}
		}
		if !slices.Contains(named, ip) {
			t.Fatalf("ClientAddr(%q, %q) = %q, neither the peer nor a hop", remote, r.Header.Values("X-Forwarded-For"), got)
		}
		if !isTrusted(peer.Addr().Unmap(), trusted) {
			t.Fatalf("ClientAddr(%q, %q) = %q, from an untrusted peer's header", remote, r.Header.Values("X-Forwarded-For"), got)
		}
	})
}

// FuzzAuthorization reads any Authorization header that is refused before
// a credential is looked up (an unknown scheme, a malformed Basic
// header, an empty bearer token, a stream ticket): the refusal is a 401
// whose message is valid UTF-8 within 1 KiB, however long the header
// (max_header_bytes, a megabyte by default).
func FuzzAuthorization(f *testing.F) {
	for _, s := range []string{"Basic !!!", "Bearer ", "Token  ", "Bearer " + TicketPrefix + "x", "Digest x", "x", "\xff y", strings.Repeat("S", 5000) + " x", "Basic", "bearer\tx"} {
		f.Add(s)
	}
	a := New(nil, 4, nil)
	f.Fuzz(func(t *testing.T, h string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", h)
		scheme, cred, _ := strings.Cut(h, " ")
		cred = strings.TrimSpace(cred)
		_, _, basic := r.BasicAuth()
		switch strings.ToLower(scheme) {
		case "basic":
			if basic {
				return // looked up
			}
		case "bearer", "token":
			if cred != "" && !strings.HasPrefix(cred, TicketPrefix) {
				return // looked up
			}
		}
		_, err := a.authenticate(r, h)
		if sluice.ErrorCode(err) != sluice.CodeUnauthenticated {
			t.Fatalf("Authorization: %.200q: %v, not a 401", h, err)
		}
		if msg := sluice.ErrorMessage(err); len(msg) > 1024 || !utf8.ValidString(msg) {
			t.Fatalf("Authorization: %.200q: a message of %d bytes (valid UTF-8: %t): %.300q", h, len(msg), utf8.ValidString(msg), msg)
		}
	})
}
