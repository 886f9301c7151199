package origin

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"https://app.example":        "https://app.example",
		"https://App.Example:443":    "https://app.example",
		"HTTPS://app.example:443/":   "https://app.example",
		"http://app.example:80":      "http://app.example",
		"http://app.example:443":     "http://app.example:443",
		"https://app.example:8443":   "https://app.example:8443",
		"http://[::1]:80":            "http://[::1]",
		"http://[::1]:6363":          "http://[::1]:6363",
		"null":                       "",
		"":                           "",
		"ws://app.example":           "",
		"https://app.example/x":      "",
		"https://u@app.example":      "",
		"https://app.example?x=1":    "",
		"https://app.example#f":      "",
		"app.example":                "",
		"https://:443":               "",
		"javascript:alert(1)":        "",
		"https://app.example:443:44": "",
	} {
		got, ok := Normalize(in)
		if got != want || ok != (want != "") {
			t.Errorf("Normalize(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
}

// TestOnePolicy: an origin listed with its default port (or in capitals)
// is the same page for CORS, the cross-site check and WebSocket upgrades;
// pages of the server's own origin pass both checks, others none.
func TestOnePolicy(t *testing.T) {
	p := New([]string{"https://App.example:443"})
	post := func(from, site string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://sluice.example:6363/api/document/a/b", nil)
		if from != "" {
			r.Header.Set("Origin", from)
		}
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		return r
	}
	for _, c := range []struct {
		from, site             string
		trusted, crossSite     bool
		allowed, ambient, star bool
	}{
		{"https://app.example", "cross-site", true, false, true, true, false},
		{"https://app.example:443", "", true, false, true, true, false},
		{"http://app.example", "cross-site", false, true, false, false, false},
		{"https://app.example:8443", "cross-site", false, true, false, false, false},
		{"http://sluice.example:6363", "", false, false, true, true, false}, // the server's own
		{"http://SLUICE.example:6363", "same-origin", false, false, true, true, false},
		{"https://evil.example", "cross-site", false, true, false, false, false},
		{"null", "cross-site", false, true, false, false, false},
		{"", "", false, false, true, true, false}, // no page
	} {
		r := post(c.from, c.site)
		if got := p.Trusted(c.from); got != c.trusted {
			t.Errorf("Trusted(%q) = %v", c.from, got)
		}
		if got := p.CrossSiteWrite(r); got != c.crossSite {
			t.Errorf("CrossSiteWrite(%q, %q) = %v", c.from, c.site, got)
		}
		r.Method = http.MethodGet
		if got := p.CrossSiteWrite(r); got {
			t.Errorf("GET from %q is a cross-site write", c.from)
		}
		allowed, ambient := p.Socket(r)
		if allowed != c.allowed || ambient != c.ambient {
			t.Errorf("Socket(%q) = %v %v", c.from, allowed, ambient)
		}
	}
	star := New([]string{"*"})
	r := post("https://evil.example", "cross-site")
	if allowed, ambient := star.Socket(r); !allowed || ambient {
		t.Errorf(`"*": Socket = %v %v, want allowed without the browser's credentials`, allowed, ambient)
	}
	if !star.CrossSiteWrite(r) {
		t.Error(`"*": a cross-site write is still one (CORS lets it pass without credentials)`)
	}
}

// TestOf: the server's own origin follows TLS, or a proxy's
// X-Forwarded-Proto, and the Host header, normalized.
func TestOf(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "http://Sluice.example:80/", nil)
	if got := Of(r); got != "http://sluice.example" {
		t.Errorf("plain: %q", got)
	}
	r.Header.Set("X-Forwarded-Proto", "HTTPS")
	r.Host = "sluice.example:443"
	if got := Of(r); got != "https://sluice.example" {
		t.Errorf("behind a proxy: %q", got)
	}
	r = httptest.NewRequest(http.MethodGet, "https://sluice.example:8443/", nil)
	r.TLS = &tls.ConnectionState{}
	if got := Of(r); got != "https://sluice.example:8443" {
		t.Errorf("TLS: %q", got)
	}
}

// FuzzPolicy feeds arbitrary Origin and Sec-Fetch-Site headers and a
// listed origin to the policy: no panic; Normalize is idempotent and
// gives lower case; a page counts as listed, or as the server's own,
// only when it is that origin in scheme, host and port; the three checks
// agree: a page trusted for CORS is allowed on WebSockets with its
// browser's credentials and is never refused a write; judged by Origin
// alone, a page is refused a write exactly when its browser's credentials
// do not count on a WebSocket.
func FuzzPolicy(f *testing.F) {
	for _, o := range []string{"https://app.example", "http://app.example", "ws://app.example", "https://app.example:443",
		"http://sluice.example:6363", "https://sluice.example:6363", "null", "", "https://APP.example", "http://[::1]:80", "https://app.example/x"} {
		f.Add(o, "https://app.example", "cross-site", false)
	}
	f.Fuzz(func(t *testing.T, from, listed, site string, any bool) {
		if n, ok := Normalize(from); ok {
			if n2, ok2 := Normalize(n); !ok2 || n2 != n {
				t.Fatalf("Normalize(%q) = %q, and of that %q %v", from, n, n2, ok2)
			}
			if n != strings.ToLower(n) {
				t.Fatalf("Normalize(%q) = %q: not lower case", from, n)
			}
		}
		origins := []string{listed}
		if any {
			origins = append(origins, "*")
		}
		p := New(origins)
		any = any || listed == "*"
		r := httptest.NewRequest(http.MethodPost, "http://sluice.example:6363/api/graphql/admin/db", nil)
		if from != "" {
			r.Header.Set("Origin", from)
		}
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		n, _ := Normalize(from)
		l, _ := Normalize(listed)
		trusted := n != "" && n == l
		own := n == "http://sluice.example:6363"
		if p.Trusted(from) != trusted {
			t.Fatalf("Trusted(%q) with %q listed = %v", from, listed, !trusted)
		}
		allowed, ambient := p.Socket(r)
		if ambient != (from == "" || trusted || own) || allowed != (ambient || any) {
			t.Fatalf("Socket: Origin %q (%q listed, * %v): allowed %v, ambient %v", from, listed, any, allowed, ambient)
		}
		cross := p.CrossSiteWrite(r)
		switch site {
		case "":
			// Judged by Origin alone, as a WebSocket upgrade is.
			if cross != !ambient {
				t.Fatalf("Origin %q: a cross-site write %v, but its credentials count on a WebSocket: %v", from, cross, ambient)
			}
		case "same-origin", "none":
			if cross {
				t.Fatalf("Sec-Fetch-Site %q refused", site)
			}
		default:
			if cross == trusted {
				t.Fatalf("Sec-Fetch-Site %q from %q (%q listed): a cross-site write %v", site, from, listed, cross)
			}
		}
	})
}

// TestCrossSiteStreams: a GET that opens an event stream (GraphQL SSE,
// NDJSON or multipart, a single connection mode stream, a REST change
// stream whatever it accepts) with Basic credentials from a page of
// another site is judged as a write: refused unless the page's origin is
// the server's own or listed.
// Other GETs never are (CORS keeps their answers from the page). Found by
// review: a page on any site opened streams with its visitor's
// remembered Basic credentials, each taking one of the visitor's places
// among the streams.
func TestCrossSiteStreams(t *testing.T) {
	p := New([]string{"https://app.example"})
	get := func(path, from, site string, header ...string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "http://sluice.example:6363"+path, nil)
		r.SetBasicAuth("rita", "rita-password")
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		if from != "" {
			r.Header.Set("Origin", from)
		}
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		return r
	}
	streams := map[string]func(from, site string) *http.Request{
		"graphql sse": func(from, site string) *http.Request {
			return get("/api/graphql/a/b?query=subscription{x}", from, site, "Accept", "text/event-stream")
		},
		"graphql ndjson": func(from, site string) *http.Request {
			return get("/api/graphql/a/b?query=subscription{x}", from, site, "Accept", "application/x-ndjson")
		},
		"graphql multipart": func(from, site string) *http.Request {
			return get("/api/graphql/a/b?query=subscription{x}", from, site, "Accept", "multipart/mixed;subscriptionSpec=1.0")
		},
		"single connection": func(from, site string) *http.Request {
			return get("/api/graphql/a/b?token=tok", from, site, "Accept", "text/event-stream")
		},
		"rest stream": func(from, site string) *http.Request { return get("/api/subscribe/a/b/Dog", from, site) },
		"rest stream, */*": func(from, site string) *http.Request {
			return get("/api/subscribe/a/b/Dog", from, site, "Accept", "*/*")
		},
	}
	for name, stream := range streams {
		for _, c := range []struct {
			from, site string
			cross      bool
		}{
			{"https://evil.example", "cross-site", true},
			{"", "cross-site", true}, // fetch in no-cors mode sends no Origin
			{"https://sub.sluice.example", "same-site", true},
			{"https://evil.example", "", true}, // an older browser
			{"https://app.example", "cross-site", false},
			{"http://sluice.example:6363", "same-origin", false},
			{"", "none", false},
			{"", "", false}, // no page: curl, servers
		} {
			if got := p.CrossSiteWrite(stream(c.from, c.site)); got != c.cross {
				t.Errorf("%s from %q (Sec-Fetch-Site %q): CrossSiteWrite %v, want %v", name, c.from, c.site, got, c.cross)
			}
		}
		// Credentials the page's script sent (a bearer token, a ticket),
		// or none: the page may use them.
		for _, authz := range []string{"", "Bearer sluice-at_x"} {
			r := stream("https://evil.example", "cross-site")
			r.Header.Del("Authorization")
			if authz != "" {
				r.Header.Set("Authorization", authz)
			}
			if p.CrossSiteWrite(r) {
				t.Errorf("%s from another site with Authorization %q is a cross-site write", name, authz)
			}
		}
	}
	// Other reads of the API with Basic credentials are judged alike
	// (they run on the user's budgets); a link followed, a page outside
	// the API and a WebSocket upgrade (judged by Socket) are not.
	for _, c := range []struct {
		r     *http.Request
		cross bool
	}{
		{get("/api/document/a/b", "https://evil.example", "cross-site"), true},
		{get("/api/document/a/b", "https://evil.example", "cross-site", "Accept", "application/json"), true},
		{get("/api/graphql/a/b", "https://evil.example", "cross-site", "Accept", "text/html", "Sec-Fetch-Dest", "image"), true},
		{get("/api/graphql/a/b", "https://evil.example", "cross-site", "Accept", "text/html", "Sec-Fetch-Dest", "document"), false},
		{get("/console/", "https://evil.example", "cross-site"), false},
		{get("/api/graphql/a/b", "https://evil.example", "cross-site", "Connection", "Upgrade", "Upgrade", "websocket"), false},
	} {
		if got := p.CrossSiteWrite(c.r); got != c.cross {
			t.Errorf("GET %s (Accept %q, Sec-Fetch-Dest %q) from another site: CrossSiteWrite %v, want %v", c.r.URL, c.r.Header.Get("Accept"), c.r.Header.Get("Sec-Fetch-Dest"), got, c.cross)
		}
	}
}
