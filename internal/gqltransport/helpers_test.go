package gqltransport_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// wait bounds every wait for an asynchronous event.
const wait = 60 * time.Second

// zooSDL has both kinds of inheritance and a protected field.
const zooSDL = `
type Person { name: String! age: Int ssn: String @private }
interface Animal { name: String! }
type Dog implements Animal { name: String! breed: String owner: Person }
interface Pet @concrete { name: String! }
type Cat implements Pet & Animal { name: String! indoor: Boolean }
`

const (
	sse    = "text/event-stream"
	ndjson = "application/x-ndjson"
)

// idRE matches an event id: <epoch>-<seq>-<index>, and the tag of its
// commit when it is a commit's (a subscription's, not a live query's).
var idRE = regexp.MustCompile(`^id: [a-z0-9]+-[0-9]+-[0-9]+(-[0-9a-v]{8})?$`)

// commitIDRE matches the event id of a commit's change: tagged.
var commitIDRE = regexp.MustCompile(`^id: [a-z0-9]+-[0-9]+-[0-9]+-[0-9a-v]{8}$`)

// stream is an open GraphQL event stream (see dt.Stream).
type stream struct {
	*dt.Stream
	t testing.TB
	// last is the id of the last live query result read (result).
	last string
}

// body returns a JSON GraphQL request body.
func body(query string, extra ...any) string {
	m := map[string]any{"query": query}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// subscribe POSTs query to admin/<db> as SSE and fails unless it answers 200.
func subscribe(t testing.TB, d *dt.Daemon, db, query string, header ...string) *stream {
	t.Helper()
	return mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/"+db, body(query), nil, append([]string{"Accept", sse}, header...)...)
}

func mustOpen(t testing.TB, d *dt.Daemon, auth dt.Auth, method, path, reqBody string, gate <-chan struct{}, header ...string) *stream {
	t.Helper()
	return &stream{d.MustOpenStream(t, auth, dt.StreamRequest{Method: method, Path: path, Body: reqBody, Header: header, Gate: gate}), t, ""}
}

// connected reads the first frame and checks it is the readiness frame.
func (s *stream) connected() {
	s.t.Helper()
	want := ": connected"
	if s.NDJSON() {
		want = "null"
	}
	if f := s.Next(); f.String() != want {
		s.t.Fatalf("first frame %q, want %q", f, want)
	}
}

// nexts reads n next events and returns their ids and data.
//
// The ids are without their tags (dt.Untag): the tests compare them with
// positions written from numbers, and resume from them unchecked.
func (s *stream) nexts(n int) (ids, data []string) {
	s.t.Helper()
	for range n {
		f := s.Event()
		if len(f) != 3 || f[0] != "event: next" || !idRE.MatchString(f[1]) || !strings.HasPrefix(f[2], "data: ") {
			s.t.Fatalf("not a next event: %q", f)
		}
		ids = append(ids, dt.Untag(f.Field("id")))
		data = append(data, f.Field("data"))
	}
	return ids, data
}

// insert inserts docs (a JSON value) into admin/<db> in one commit.
func insert(t testing.TB, d *dt.Daemon, db, docs string) {
	t.Helper()
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/"+db, docs)
}

// gql runs a GraphQL request on admin/<db> as plain JSON and returns the body.
func gql(t testing.TB, d *dt.Daemon, db, query string) string {
	t.Helper()
	r := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/graphql/admin/"+db, body(query), "Content-Type", "application/json")
	if strings.Contains(string(r.Body), `"errors"`) {
		t.Fatalf("%s: %s", query, r.Body)
	}
	if !strings.HasSuffix(string(r.Body), "}\n") {
		t.Fatalf("%s: the answer does not end with a newline: %q", query, r.Body)
	}
	return withoutPosition(strings.TrimSuffix(string(r.Body), "\n"))
}

// readPosition matches the position a query's result carries (and a
// mutation's, with the version it wrote).
var readPosition = regexp.MustCompile(`,"extensions":\{"position":"[a-z0-9]+-[0-9]+-2147483647(-[0-9a-v]{8})?"(,"version":"[0-9a-z]+")?\}`)

// withoutPosition returns s without the positions of query and mutation
// results (see position_test.go), for tests of what else they hold.
func withoutPosition(s string) string { return readPosition.ReplaceAllString(s, "") }

// positionTag matches the tag of a position in JSON text (its commit's:
// sluice.Position.Tag).
var positionTag = regexp.MustCompile(`([a-z0-9]+-[0-9]+-[0-9]+)-[0-9a-v]{8}"`)

// untagPositions returns JSON text s with its positions without their
// tags (as dt.Untag), to compare with positions written from numbers.
func untagPositions(s string) string { return positionTag.ReplaceAllString(s, `$1"`) }
