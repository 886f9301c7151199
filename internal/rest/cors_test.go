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
// they are: safe methods always pass; a browser's own request or one of a
// same-origin page (Sec-Fetch-Site same-origin or none) passes; a request
// that is no browser's (neither header) passes; a state-changing request
// that a browser says is cross-site or same-site, from an origin not
// listed, never passes with Basic credentials, nor without "*".
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
		safe := method == "GET" || method == "HEAD" || method == "OPTIONS"
		switch {
		case safe, site == "same-origin", site == "none", site == "" && from == "":
			if !served {
				t.Fatalf("%s Origin %q Sec-Fetch-Site %q refused", method, from, site)
			}
		case site != "" && !listed(from):
			basic := strings.HasPrefix(strings.ToLower(strings.TrimSpace(authz)), "basic ") || strings.EqualFold(strings.TrimSpace(authz), "basic")
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
