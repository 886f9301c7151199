package gqltransport_test

import (
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// crossSiteStreams are the requests that open a stream on admin/<db>,
// each with a fresh single connection mode reservation when it needs one.
func crossSiteStreams(t *testing.T, d *dt.Daemon, db string) map[string]dt.StreamRequest {
	t.Helper()
	sub := "/api/graphql/admin/" + db + "?query=" + url.QueryEscape("subscription { Dog_added { name } }")
	return map[string]dt.StreamRequest{
		"GraphQL SSE":       {Path: sub, Header: []string{"Accept", sse}},
		"GraphQL NDJSON":    {Path: sub, Header: []string{"Accept", "application/x-ndjson"}},
		"single connection": {Path: "/api/graphql/admin/" + db + "?token=" + reserve(t, d, dt.Admin(), db), Header: []string{"Accept", sse}},
		// fetch in no-cors mode asks for */*: the REST change stream is
		// SSE whatever it accepts.
		"REST stream": {Path: "/api/subscribe/admin/" + db + "/Dog", Header: []string{"Accept", "*/*"}},
	}
}

// from returns req sent by a page of origin (Sec-Fetch-Site site).
func from(req dt.StreamRequest, origin, site string) dt.StreamRequest {
	req.Header = append(append([]string(nil), req.Header...), "Origin", origin, "Sec-Fetch-Site", site)
	return req
}

// ticket returns a stream ticket of the admin for admin/<db>.
func ticket(t *testing.T, d *dt.Daemon, db string) string {
	t.Helper()
	r := d.MustDo(t, 201, dt.Admin(), "POST", "/api/stream-tickets", `{"database":"admin/`+db+`"}`)
	var v struct{ Ticket string }
	if err := json.Unmarshal(r.Body, &v); err != nil || v.Ticket == "" {
		t.Fatalf("ticket: %s %v", r.Body, err)
	}
	return v.Ticket
}

// mustBeReady reads st's readiness frame (SSE's ": connected", with the
// REST stream's subscription number, or NDJSON's null), then closes it.
func mustBeReady(t *testing.T, st *dt.Stream) {
	t.Helper()
	defer st.Close()
	if f := st.Next().String(); !strings.HasPrefix(f, ": connected") && f != "null" {
		t.Fatalf("first frame %q, want the readiness frame", f)
	}
}

// mustRefuse opens req and fails unless it is refused 403 naming
// cors_origins.
func mustRefuse(t *testing.T, d *dt.Daemon, auth dt.Auth, name string, req dt.StreamRequest) {
	t.Helper()
	st, resp := d.OpenStream(t, auth, req)
	if st != nil {
		st.Close()
		t.Fatalf("%s: opened", name)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "cors_origins") {
		t.Fatalf("%s: %d %s, want 403 naming cors_origins", name, resp.StatusCode, b)
	}
}

// TestCrossSiteStreamsRefused: a page of a site not in cors_origins
// cannot make a browser open a stream with the Basic credentials it
// remembers (fetch in no-cors mode with Accept: text/event-stream needs no
// preflight): GraphQL subscriptions over GET, a single connection mode
// stream and the REST change streams are refused 403 naming cors_origins,
// as a cross-site write is. Found by review: each such stream took one of
// the visitor's places among the streams. A listed origin opens them with
// those credentials; with "*", any page opens them with a stream ticket,
// which a browser never adds by itself.
func TestCrossSiteStreamsRefused(t *testing.T) {
	t.Parallel()
	t.Run("listed", func(t *testing.T) {
		t.Parallel()
		d := dt.Start(t, dt.WithCORS("https://app.example"))
		d.CreateDatabase(t, "crosslisted", "type Dog { name: String! }")
		for name, req := range crossSiteStreams(t, d, "crosslisted") {
			mustRefuse(t, d, dt.Admin(), name+" from another site", from(req, "https://evil.example", "cross-site"))
			mustRefuse(t, d, dt.Admin(), name+" from a same-site page", from(req, "https://sub.evil.example", "same-site"))
		}
		for _, req := range crossSiteStreams(t, d, "crosslisted") {
			mustBeReady(t, d.MustOpenStream(t, dt.Admin(), from(req, "https://app.example", "cross-site")))
		}
		// A page of the listed origin opens EventSource with a ticket.
		mustBeReady(t, d.MustOpenStream(t, dt.NoAuth(), from(dt.StreamRequest{Path: "/api/subscribe/admin/crosslisted/Dog?ticket=" + ticket(t, d, "crosslisted"), Header: []string{"Accept", sse}},
			"https://app.example", "cross-site")))
	})
	t.Run("any", func(t *testing.T) {
		t.Parallel()
		d := dt.Start(t, dt.WithCORS("*"))
		d.CreateDatabase(t, "crossany", "type Dog { name: String! }")
		for name, req := range crossSiteStreams(t, d, "crossany") {
			mustRefuse(t, d, dt.Admin(), name+" from another site", from(req, "https://evil.example", "cross-site"))
		}
		// Tickets are no remembered credential: any page's EventSource
		// opens the REST and the GraphQL streams with one.
		for _, path := range []string{
			"/api/subscribe/admin/crossany/Dog?",
			"/api/graphql/admin/crossany?query=" + url.QueryEscape("subscription { Dog_added { name } }") + "&",
		} {
			req := dt.StreamRequest{Path: path + "ticket=" + ticket(t, d, "crossany"), Header: []string{"Accept", sse}}
			mustBeReady(t, d.MustOpenStream(t, dt.NoAuth(), from(req, "https://evil.example", "cross-site")))
		}
	})
}
