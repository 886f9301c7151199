package rest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/origin"
)

// FuzzCrossOrigin feeds arbitrary methods, Origin, Sec-Fetch-Site and
// Authorization headers to the cross-origin decision (CORS.Protect), with
// one listed origin and with "*" too, and checks what must hold whatever
// they are: OPTIONS, and GET and HEAD without Basic credentials, always
// pass; a browser's own request or one of a same-origin page
// (Sec-Fetch-Site same-origin or none) passes; a request that is no
// browser's (neither header) passes; a state-changing request, or a read
// of the API with Basic credentials, that a browser says is cross-site or
// same-site, from an origin not listed, never passes with Basic
// credentials, nor (a write) without "*".
func FuzzCrossOrigin(f *testing.F) {
	f.Add("POST", "https://evil.example", "cross-site", "Basic YWRtaW46cm9vdA==", false)
	f.Add("POST", "https://app.example", "cross-site", "Basic YWRtaW46cm9vdA==", true)
	f.Add("DELETE", "https://evil.example", "", "Bearer sluice_x", true)
	f.Add("PUT", "", "same-origin", "", false)
	f.Add("GET", "null", "cross-site", "basic x", false)
	f.Add("PATCH", "http://sluice.example:6363", "", "Basic eA==", false)
	f.Add("POST", "https://APP.example:443", "cross-site", "Basic eA==", false)
	f.Fuzz(func(t *testing.T, method, from, site, authz string, any bool) {
		if !validMethod(method) {
			return
		}
		origins := []string{"https://app.example"}
		if any {
			origins = append(origins, "*")
		}
		c := NewCORS(origin.New(origins))
		served := false
		h := c.Protect(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
		r := httptest.NewRequest(http.MethodGet, "http://sluice.example:6363/api/document/admin/db", nil)
		r.Method = method
		for name, v := range map[string]string{"Origin": from, "Sec-Fetch-Site": site, "Authorization": authz} {
			if v != "" {
				r.Header.Set(name, v)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if !served && w.Code != http.StatusForbidden {
			t.Fatalf("refused with %d, want 403", w.Code)
		}
		if served != (w.Code == http.StatusOK) {
			t.Fatalf("served %v with status %d", served, w.Code)
		}
		basic := strings.HasPrefix(strings.ToLower(strings.TrimSpace(authz)), "basic ") || strings.EqualFold(strings.TrimSpace(authz), "basic")
		safe := method == "OPTIONS" || (method == "GET" || method == "HEAD") && !basic
		switch {
		case safe, site == "same-origin", site == "none", site == "" && from == "":
			if !served {
				t.Fatalf("%s Origin %q Sec-Fetch-Site %q refused", method, from, site)
			}
		case site != "" && !listed(from):
			if served && (basic || !any) {
				t.Fatalf("%s from %q (Sec-Fetch-Site %q, Authorization %q, * %v) served", method, from, site, authz, any)
			}
		case listed(from):
			if !served {
				t.Fatalf("%s from the listed origin %q (Sec-Fetch-Site %q) refused", method, from, site)
			}
		}
	})
}

// listed reports whether from is the page https://app.example in the
// form a browser or a hand-written client may send it.
func listed(from string) bool {
	n, ok := origin.Normalize(from)
	return ok && n == "https://app.example"
}

// validMethod reports whether m is an HTTP method token net/http would
// accept on the wire.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, r := range m {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// TestCrossSiteReadsWithBasicRefused: a page of a site not listed cannot
// make its visitor's browser read the API with the Basic credentials it
// remembers (an image, a script, a no-cors fetch: no preflight): the read
// runs on the visitor's budgets though the page cannot see the answer,
// so it is refused 403 as a cross-site write is, also outside /api/
// where a route reads (the landing page, /metrics: a later review's
// find). A link followed (Sec-Fetch-Dest: document), the console's
// files and health checks, a listed origin, a
// same-origin page, a read with a bearer token and a client that is no
// browser pass. Found by review: a page could fire GraphQL GETs that ran
// up to graphql_request_timeout each as its visitor, until the visitor's
// own requests were refused.
func TestCrossSiteReadsWithBasicRefused(t *testing.T) {
	t.Parallel()
	for _, any := range []bool{false, true} {
		origins := []string{"https://app.example"}
		if any {
			origins = append(origins, "*")
		}
		c := NewCORS(origin.New(origins))
		for _, tc := range []struct {
			name, path string
			header     map[string]string
			served     bool
		}{
			{"a GraphQL GET from another site", "/api/graphql/admin/db?query=%7B__typename%7D", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image", "Origin": "https://evil.example"}, false},
			{"a listing from a same-site page", "/api/document/admin/db?type=Dog", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Origin": "https://sub.evil.example"}, false},
			{"HEAD from another site", "/api/info", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "script"}, false},
			{"a link followed from another site", "/api/document/admin/db?id=Dog/a", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, true},
			{"the console from another site", "/console/", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "iframe"}, true},
			{"a health check from another site", "/healthz", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image"}, true},
			{"the landing page as another site's image", "/", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, false},
			{"the landing page framed by another site", "/", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "iframe"}, false},
			{"the landing page from a link on another site", "/", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, true},
			{"metrics as another site's image", "/metrics", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, false},
			{"a listed origin", "/api/document/admin/db?type=Dog", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://app.example"}, true},
			{"a same-origin page", "/api/document/admin/db?type=Dog", map[string]string{"Sec-Fetch-Site": "same-origin"}, true},
			{"a client that is no browser", "/api/document/admin/db?type=Dog", nil, true},
		} {
			for _, basic := range []bool{true, false} {
				served := false
				h := c.Protect(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
				method := http.MethodGet
				if strings.HasPrefix(tc.name, "HEAD") {
					method = http.MethodHead
				}
				r := httptest.NewRequest(method, "http://sluice.example:6363"+tc.path, nil)
				for k, v := range tc.header {
					r.Header.Set(k, v)
				}
				if basic {
					r.SetBasicAuth("admin", "root")
				} else {
					r.Header.Set("Authorization", "Bearer sluice_token")
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if want := tc.served || !basic; served != want || !served && (w.Code != 403 || !strings.Contains(w.Body.String(), "cors_origins")) {
					t.Errorf("%s (Basic %v, * %v): served %v (%d %s), want served %v", tc.name, basic, any, served, w.Code, w.Body, want)
				}
			}
		}
	}
}
