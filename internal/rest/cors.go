package rest

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/origin"
)

// CORS decides which other origins' pages may call the API (config key
// cors_origins, through the one origin policy, internal/origin, which the
// WebSocket upgrades ask too). It is the one CORS policy of every route,
// streams and GraphQL included, and it runs before authentication, so
// errors (401, 403, 404, 503) carry its headers too and a page can read
// them.
type CORS struct {
	policy *origin.Policy
}

// NewCORS returns the CORS answers and the cross-site check of policy:
// listed origins may call with credentials (cookies, Basic auth the
// browser remembers, and an Authorization header); with "*" any origin
// may call without them. No origins: same origin only.
func NewCORS(policy *origin.Policy) *CORS { return &CORS{policy: policy} }

// Protect refuses, with 403, every state-changing request (any method but
// GET, HEAD and OPTIONS, on every route), and every request opening an
// event stream or reading the API with Basic credentials (but a link
// followed), that a browser sends from a page of another origin than the
// daemon's own and cors_origins. A form on any
// site can make a browser POST to Sluice, with no CORS preflight, and the
// browser adds the Basic credentials it remembers for Sluice (anyone who
// signed in to GraphiQL): without this, such a page writes as its
// visitor. Browsers say where a request comes from in Sec-Fetch-Site, or
// else Origin; the origin policy judges them (origin.Policy.CrossSiteWrite).
// Requests without either (curl, servers, SDKs) are not from a page and
// pass. The 403 has the shape of the request's URL (refuse): GraphQL's on
// a GraphQL URL.
//
// With "*", a page of any origin may call, but never with credentials the
// browser remembers: a cross-origin state-changing request from an
// unlisted origin passes only when it carries no Basic credentials (a
// bearer token, which a browser never adds by itself, was put there by
// the page's own script).
func (c *CORS) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.policy.CrossSiteWrite(r) && !(c.policy.Any() && !origin.BasicAuth(r)) {
			refuse(w, r, errCrossOrigin(r))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func errCrossOrigin(r *http.Request) error {
	from := "a page of another site"
	if o := r.Header.Get("Origin"); o != "" && o != "null" && len(o) <= 256 {
		from = "a page of " + strconv.Quote(o)
	}
	return sluice.Errorf(sluice.CodeForbidden, "cross-origin request refused: %s may not %s here with this browser's credentials; to allow an origin's pages, list it in cors_origins", from, r.Method)
}

// corsAllowHeaders are the request headers a preflight allows: what
// EventSource, graphql-sse, Apollo and curl-like clients send.
const corsAllowHeaders = "Authorization, Content-Type, Accept, Last-Event-ID, Cache-Control, X-Requested-With, X-GraphQL-Event-Stream-Token, If-Match, If-None-Match, Idempotency-Key"

// corsExposeHeaders are the response headers a page may read.
const corsExposeHeaders = "WWW-Authenticate, Retry-After, Content-Type, Location, Link, Sluice-Position, Sluice-Hidden-Fields, Sluice-History-Pruned, ETag, Idempotent-Replayed"

// corsMethods are the methods the API serves, which a preflight allows.
const corsMethods = "GET, POST, PUT, PATCH, DELETE, OPTIONS"

// Middleware answers preflights and adds the CORS headers to every answer
// for an allowed origin. An origin that is not allowed never gets
// Access-Control-Allow-Credentials.
func (c *CORS) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		allowed := origin != "" && c.policy.Trusted(origin)
		switch {
		case allowed:
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		case origin != "" && c.policy.Any():
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		if r.Method != http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		// Preflights carry no credentials, so they are answered here,
		// before authentication. Another OPTIONS request gets the same
		// answer: the methods the API serves.
		h.Set("Allow", corsMethods)
		if allowed || origin != "" && c.policy.Any() {
			h.Set("Access-Control-Allow-Methods", corsMethods)
			// The headers asked for are allowed (clients send their own,
			// such as Apollo's apollo-require-preflight); what the
			// server does with a header does not depend on CORS.
			allow := corsAllowHeaders
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" && headerList(req) {
				allow = req
			}
			h.Set("Access-Control-Allow-Headers", allow)
			h.Set("Access-Control-Max-Age", "600")
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// headerList reports whether s is a comma-separated list of header names
// (tokens), so it can be echoed back safely.
func headerList(s string) bool {
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return false
		}
		for _, r := range f {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
				return false
			}
		}
	}
	return true
}
