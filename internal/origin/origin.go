// Package origin is the one policy of which web pages may use Sluice with
// their browser's credentials: the CORS answers, the check that refuses
// cross-site writes (CSRF) and the check of WebSocket upgrades all ask it,
// so that an origin allowed by one is allowed by all three.
//
// Origins are compared in the form browsers send them: scheme and host in
// lower case, without the scheme's default port, so that
// "https://App.example:443" in cors_origins is the page
// "https://app.example". A page of another scheme, host or port is
// another origin (http://app.example does not speak for
// https://app.example).
package origin

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-dev/sluice/internal/protocol"
)

// Policy is the configured origins (config cors_origins): listed origins'
// pages may call with the credentials their browser remembers; "*" lets a
// page of any origin call, without them. Pages of the server's own origin
// always may. It is safe for concurrent use.
type Policy struct {
	trusted map[string]bool
	any     bool
}

// New returns the policy of origins: exact origins ("https://app.example")
// and "*". An entry that is no http(s) origin is left out (the
// configuration refuses those before).
func New(origins []string) *Policy {
	p := &Policy{trusted: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			p.any = true
			continue
		}
		if n, ok := Normalize(o); ok {
			p.trusted[n] = true
		}
	}
	return p
}

// Any reports whether "*" is configured: a page of any origin may call,
// without its browser's credentials.
func (p *Policy) Any() bool { return p.any }

// Trusted reports whether the page of origin (an Origin header) is listed:
// it may call with the credentials its browser remembers.
func (p *Policy) Trusted(origin string) bool {
	n, ok := Normalize(origin)
	return ok && p.trusted[n]
}

// Own reports whether the page of origin is of the origin r was sent to
// (see Of).
func Own(r *http.Request, origin string) bool {
	n, ok := Normalize(origin)
	return ok && n == Of(r)
}

// Allowed reports whether a page of origin may use r's credentials: its
// own origin's, or a listed one's. A request without Origin is no page's.
func (p *Policy) Allowed(r *http.Request, origin string) bool {
	return origin == "" || Own(r, origin) || p.Trusted(origin)
}

// Of returns the origin r was sent to, normalized: its scheme (https over
// TLS, or as a proxy that terminated TLS says in X-Forwarded-Proto) and
// its Host.
func Of(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https") {
		scheme = "https"
	}
	n, _ := Normalize(scheme + "://" + r.Host)
	return n
}

// Normalize returns origin as scheme://host[:port] in lower case, without
// the scheme's default port; false when it is no http(s) origin (a path,
// a query, user information, "null").
func Normalize(origin string) (string, bool) {
	u, err := url.Parse(origin)
	// url.Parse gives the scheme in lower case.
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	scheme, host, port := u.Scheme, strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", false
	}
	if port == "" || scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return scheme + "://" + host, true
	}
	return scheme + "://" + net.JoinHostPort(host, port), true
}

// CrossSiteWrite reports whether r is a state-changing request (any
// method but GET, HEAD and OPTIONS), or one that opens an event stream
// or reads the API with Basic credentials (spends), that a browser sends
// from a page it may not come from with the credentials the browser
// remembers: a page of another origin than the server's own and the
// listed ones.
// Browsers say where a request comes from in Sec-Fetch-Site (all current
// ones), or else Origin; a request with neither is no page's (curl,
// servers, SDKs) and passes. It
// judges as net/http's CrossOriginProtection does, but with the policy's
// comparison of origins.
func (p *Policy) CrossSiteWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodOptions:
		return false
	case http.MethodGet, http.MethodHead:
		// A read without Basic credentials carries what the page's own
		// script put there (a bearer token, a stream ticket), or nothing
		// (and is refused 401): the page may use those.
		if !BasicAuth(r) || !spends(r) {
			return false
		}
	}
	origin := r.Header.Get("Origin")
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
		// An older browser: Origin says where the page is, if anything.
		if origin == "" || Own(r, origin) {
			return false
		}
	}
	return !p.Trusted(origin)
}

// Socket decides whether the page that opens a WebSocket with r may
// (allowed), and whether the credentials its browser adds to the upgrade
// by itself may count (ambient): a page of the server's own origin or a
// listed one may, with them; with "*" any other page may, without them.
// A client that sends no Origin is no page.
func (p *Policy) Socket(r *http.Request) (allowed, ambient bool) {
	if p.Allowed(r, r.Header.Get("Origin")) {
		return true, true
	}
	return p.any, false
}

// spends reports whether r, a GET or HEAD request with Basic
// credentials, spends what its user may hold or run (opensStream), or
// what a read of the API costs: a page of any site can make its visitor's
// browser send GETs with the credentials it remembers, without a CORS
// preflight (an image, a script, a no-cors fetch), and though the page
// cannot read the answers, each GraphQL query or listing runs, up to
// graphql_request_timeout, on its user's budgets (Postgres connections,
// requests' parameters), so that the user's own requests are refused.
// A top-level navigation (a link followed, Sec-Fetch-Dest: document) is
// not: it shows the user what they asked for, one page at a time, and
// links into the API from elsewhere keep working. Nor is a WebSocket
// upgrade: Socket judges it, and what its browser adds by itself then
// does not count.
func spends(r *http.Request) bool {
	if opensStream(r) {
		return true
	}
	return protocol.Of(r) != protocol.WebSocket && !free(r.URL.Path) && r.Header.Get("Sec-Fetch-Dest") != "document"
}

// free reports whether path is one of the routes that cost nothing,
// whoever asks (internal/rest/routes.go): the console's files,
// GraphiQL's assets, health checks. Every other route may cost what a
// read does: the API, and outside it the landing page (/, which lists
// the databases its user may read, from Postgres) and /metrics (every
// series, gathered); a review found both served to another site's
// images with the Basic credentials its visitor's browser remembered.
func free(path string) bool {
	switch path {
	case "/api/ok", "/healthz", "/readyz", "/console":
		return true
	}
	return strings.HasPrefix(path, "/console/") || strings.HasPrefix(path, "/api/graphiql/_assets/")
}

// subscribePrefix is the path of the REST change streams
// (internal/rest/routes.go), served as SSE whatever the request accepts.
const subscribePrefix = "/api/subscribe/"

// opensStream reports whether r, a GET or HEAD request, opens an event
// stream: a GraphQL subscription over SSE, NDJSON or multipart, a single
// connection mode stream (a stream token), or a REST change stream. A
// stream changes nothing, but it takes a place among its user's open
// streams (max_streams_per_user) and costs the server until it ends, and
// a page of any site can make a browser open one with the Basic
// credentials it remembers and no CORS preflight (fetch in no-cors mode:
// Accept is a safelisted header), and resume it from the oldest history
// kept. The page cannot read the answer, but the streams count: so a
// cross-site page may open one only as it may write.
func opensStream(r *http.Request) bool {
	switch protocol.Of(r) {
	case protocol.SSE, protocol.NDJSON, protocol.Multipart, protocol.SingleConnection:
		return true
	}
	return strings.HasPrefix(r.URL.Path, subscribePrefix)
}

// BasicAuth reports whether r carries Basic credentials, which a browser
// may add by itself (it remembers them for the origin). Sluice sets no
// cookies and no cookie authenticates, so they are the only credentials
// a browser adds.
func BasicAuth(r *http.Request) bool {
	for _, h := range r.Header.Values("Authorization") {
		if scheme, _, _ := strings.Cut(strings.TrimSpace(h), " "); strings.EqualFold(scheme, "basic") {
			return true
		}
	}
	return false
}
