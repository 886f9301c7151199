package rest

import (
	"net/http"
	"strings"
)

// CORS decides which other origins' pages may call the API (config key
// cors_origins). It is the one CORS policy of every route, streams and
// GraphQL included, and it runs before authentication, so errors (401,
// 403, 404, 503) carry its headers too and a page can read them.
type CORS struct {
	// origins may call with credentials (cookies, Basic auth the browser
	// remembers, and an Authorization header).
	origins map[string]bool
	// any lets every other origin call without credentials.
	any bool
}

// NewCORS returns the policy for the configured origins: exact origins
// ("https://app.example.com") may call with credentials; "*" lets any
// origin call without them. No origins: same origin only.
func NewCORS(origins []string) *CORS {
	c := &CORS{origins: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			c.any = true
			continue
		}
		c.origins[strings.ToLower(o)] = true
	}
	return c
}

// corsAllowHeaders are the request headers a preflight allows: what
// EventSource, graphql-sse, Apollo and curl-like clients send.
const corsAllowHeaders = "Authorization, Content-Type, Accept, Last-Event-ID, Cache-Control, X-Requested-With, X-GraphQL-Event-Stream-Token"

// corsExposeHeaders are the response headers a page may read.
const corsExposeHeaders = "WWW-Authenticate, Retry-After, Content-Type, Location"

// Middleware answers preflights and adds the CORS headers to every answer
// for an allowed origin. An origin that is not allowed never gets
// Access-Control-Allow-Credentials.
func (c *CORS) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		allowed := origin != "" && c.origins[strings.ToLower(origin)]
		switch {
		case allowed:
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		case origin != "" && c.any:
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
		h.Set("Allow", "GET, POST, PUT, DELETE, OPTIONS")
		if allowed || origin != "" && c.any {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
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
