package sse_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
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

// idRE matches an event id: <epoch>-<seq>-<index>.
var idRE = regexp.MustCompile(`^id: [a-z0-9]+-[0-9]+-[0-9]+$`)

// frame is one SSE frame (its lines without the blank line ending it), or
// one NDJSON line (an empty line is the frame {""}).
type frame []string

func (f frame) String() string { return strings.Join(f, "\n") }

// field returns the value of the frame's first line "name: value".
func (f frame) field(name string) string {
	for _, l := range f {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			return v
		}
	}
	return ""
}

// stream is an open GraphQL event stream read frame by frame.
type stream struct {
	t      testing.TB
	resp   *http.Response
	ndjson bool
	frames chan frame
	cancel context.CancelFunc
	done   chan struct{}
	gate   chan struct{} // when set, the reader stops after the first frame until closed
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

func mustOpen(t testing.TB, d *dt.Daemon, auth dt.Auth, method, path, reqBody string, gate chan struct{}, header ...string) *stream {
	t.Helper()
	s, resp := open(t, d, auth, method, path, reqBody, gate, header...)
	if resp != nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s %s: status %d: %s", method, path, resp.StatusCode, b)
	}
	return s
}

// open starts a stream; a non-200 answer is returned instead.
func open(t testing.TB, d *dt.Daemon, auth dt.Auth, method, path, reqBody string, gate chan struct{}, header ...string) (*stream, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var rd io.Reader
	if reqBody != "" {
		rd = strings.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if reqBody != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		return nil, resp
	}
	s := &stream{t: t, resp: resp, frames: make(chan frame, 1<<16), cancel: cancel, done: make(chan struct{}), gate: gate,
		ndjson: strings.HasPrefix(resp.Header.Get("Content-Type"), ndjson)}
	go s.read()
	t.Cleanup(s.Close)
	return s, nil
}

func (s *stream) read() {
	defer close(s.done)
	defer close(s.frames)
	br := bufio.NewReader(s.resp.Body)
	var f frame
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case s.ndjson:
			s.frames <- frame{line}
		case line == "":
			s.frames <- f
			f = nil
		default:
			f = append(f, line)
			continue
		}
		if s.gate != nil {
			<-s.gate
			s.gate = nil
		}
	}
}

// Close disconnects and waits for the reader.
func (s *stream) Close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.done
}

// next returns the next frame, failing the test if none comes in time.
func (s *stream) next() frame {
	s.t.Helper()
	select {
	case f, ok := <-s.frames:
		if !ok {
			s.t.Fatal("stream ended")
		}
		return f
	case <-time.After(wait):
		s.t.Fatal("no frame within the deadline")
	}
	return nil
}

func isPing(f frame) bool { return len(f) == 1 && f[0] == ": ping" }

// event returns the next frame that is not a heartbeat.
func (s *stream) event() frame {
	s.t.Helper()
	for {
		if f := s.next(); !isPing(f) {
			return f
		}
	}
}

// connected reads the first frame and checks it is the readiness frame.
func (s *stream) connected() {
	s.t.Helper()
	want := ": connected"
	if s.ndjson {
		want = "null"
	}
	if f := s.next(); f.String() != want {
		s.t.Fatalf("first frame %q, want %q", f, want)
	}
}

// ended waits until the server closes the stream and returns the frames
// sent before, heartbeats left out.
func (s *stream) ended() []frame {
	s.t.Helper()
	var out []frame
	timeout := time.After(wait)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return out
			}
			if !isPing(f) {
				out = append(out, f)
			}
		case <-timeout:
			s.t.Fatal("the stream did not end within the deadline")
		}
	}
}

// nexts reads n next events and returns their ids and data.
func (s *stream) nexts(n int) (ids, data []string) {
	s.t.Helper()
	for range n {
		f := s.event()
		if len(f) != 3 || f[0] != "event: next" || !idRE.MatchString(f[1]) || !strings.HasPrefix(f[2], "data: ") {
			s.t.Fatalf("not a next event: %q", f)
		}
		ids = append(ids, f.field("id"))
		data = append(data, f.field("data"))
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
	return string(r.Body)
}
