package gqltransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/daemontest/deliverytest"
)

// suiteQuery is the subscription every GraphQL transport runs in the
// delivery suite. It selects the name, which the slow reader check makes
// 1 KiB long: events that overflow what a stream may hold back.
const suiteQuery = `subscription { Dog_added { _id name } }`

// result is a GraphQL ExecutionResult of the suite's subscription.
type result struct {
	Data struct {
		DogAdded struct {
			ID string `json:"_id"`
		} `json:"Dog_added"`
	} `json:"data"`
	Errors     []struct{ Message string } `json:"errors"`
	Extensions struct {
		LastEventID string `json:"lastEventId"`
	} `json:"extensions"`
}

func parseResult(t *testing.T, b string) result {
	t.Helper()
	var r result
	if err := json.Unmarshal([]byte(b), &r); err != nil {
		t.Fatalf("result %q: %v", b, err)
	}
	return r
}

// ndjsonPosition matches the position an NDJSON event's result ends
// with.
var ndjsonPosition = regexp.MustCompile(`,"extensions":\{"lastEventId":"[a-z0-9]+-[0-9]+-[0-9]+(-[0-9a-v]{8})?"\}\}$`)

// withoutEventPosition returns an NDJSON event's result without its position
// (extensions.lastEventId), which it must have.
func withoutEventPosition(t *testing.T, line string) string {
	t.Helper()
	if !ndjsonPosition.MatchString(line) {
		t.Fatalf("an NDJSON event without its position: %s", line)
	}
	return ndjsonPosition.ReplaceAllString(line, "}")
}

// subscribeBody returns the POST body of the suite's subscription from
// position from.
func subscribeBody(from string, extra ...any) string {
	ext := map[string]any{}
	if from != "" {
		ext["lastEventId"] = from
	}
	for i := 0; i+1 < len(extra); i += 2 {
		ext[extra[i].(string)] = extra[i+1]
	}
	return body(suiteQuery, "extensions", ext)
}

// TestDeliveryGuarantees runs the delivery suite every transport runs
// (deliverytest) on each GraphQL transport.
func TestDeliveryGuarantees(t *testing.T) {
	t.Parallel()
	for _, tr := range []deliverytest.Transport{
		{Name: "graphql-sse", Open: openSSE(sse), OpenGated: openGatedSSE},
		{Name: "NDJSON", Open: openSSE(ndjson)},
		{Name: "graphql-sse single connection mode", Open: openSingle},
		{Name: "Apollo multipart", Open: openMultipart},
		{Name: "graphql-ws", Open: openWS},
	} {
		t.Run(tr.Name, func(t *testing.T) {
			t.Parallel()
			deliverytest.Exercise(t, tr)
		})
	}
}

// openSSE opens the subscription as graphql-sse distinct connections
// mode (or NDJSON).
func openSSE(accept string) func(*testing.T, *dt.Daemon, dt.Auth, string, string) deliverytest.Sub {
	return func(t *testing.T, d *dt.Daemon, auth dt.Auth, db, from string) deliverytest.Sub {
		s := mustOpen(t, d, auth, http.MethodPost, "/api/graphql/admin/"+db, subscribeBody(from), nil, "Accept", accept)
		s.connected()
		return sseSub{s}
	}
}

func openGatedSSE(t *testing.T, d *dt.Daemon, auth dt.Auth, db string, gate <-chan struct{}) deliverytest.Sub {
	s := mustOpen(t, d, auth, http.MethodPost, "/api/graphql/admin/"+db, subscribeBody(""), gate, "Accept", sse)
	s.connected() // then it stops reading until the gate opens
	return sseSub{s}
}

type sseSub struct{ *stream }

func (s sseSub) Next(t *testing.T) (pos, id string) {
	t.Helper()
	f := s.Event()
	data := f.Field("data")
	if s.NDJSON() {
		data = f.String()
	} else if f[0] != "event: next" {
		t.Fatalf("frame %q", f)
	}
	r := parseResult(t, data)
	if len(r.Errors) > 0 {
		t.Fatalf("an error event: %s", data)
	}
	if s.NDJSON() {
		return r.Extensions.LastEventID, r.Data.DogAdded.ID
	}
	return f.Field("id"), r.Data.DogAdded.ID
}

func (s sseSub) End(t *testing.T) string {
	t.Helper()
	msg := ""
	for _, f := range s.Ended() {
		data := f.Field("data")
		if s.NDJSON() {
			if f.String() == "" {
				return msg // complete
			}
			data = f.String()
		} else if f[0] == "event: complete" {
			return msg
		}
		r := parseResult(t, data)
		if len(r.Errors) == 0 {
			t.Fatalf("an event before the end: %q", f)
		}
		msg = r.Errors[0].Message
	}
	t.Fatal("the stream ended without complete")
	return ""
}

// openSingle runs the subscription in single connection mode: a
// reservation, its event stream, and the operation (202 once registered).
func openSingle(t *testing.T, d *dt.Daemon, auth dt.Auth, db, from string) deliverytest.Sub {
	tok := reserve(t, d, auth, db)
	path := "/api/graphql/admin/" + db
	s := mustOpen(t, d, auth, http.MethodGet, path+"?token="+tok, "", nil, "Accept", sse)
	s.connected()
	d.MustDo(t, 202, auth, "POST", path, subscribeBody(from, "operationId", "op"), "Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", tok)
	return singleSub{s}
}

type singleSub struct{ *stream }

// message is a message of single connection mode's stream.
type message struct {
	ID      string          `json:"id"`
	Payload json.RawMessage `json:"payload"`
}

func (s singleSub) Next(t *testing.T) (pos, id string) {
	t.Helper()
	f := s.Event()
	var m message
	if f[0] != "event: next" || json.Unmarshal([]byte(f.Field("data")), &m) != nil {
		t.Fatalf("frame %q", f)
	}
	r := parseResult(t, string(m.Payload))
	if len(r.Errors) > 0 {
		t.Fatalf("an error event: %s", m.Payload)
	}
	return r.Extensions.LastEventID, r.Data.DogAdded.ID
}

func (s singleSub) End(t *testing.T) string {
	t.Helper()
	msg := ""
	for {
		f := s.Event()
		if f[0] == "event: complete" {
			return msg
		}
		var m message
		if json.Unmarshal([]byte(f.Field("data")), &m) != nil {
			t.Fatalf("frame %q", f)
		}
		r := parseResult(t, string(m.Payload))
		if len(r.Errors) == 0 {
			t.Fatalf("an event before the end: %q", f)
		}
		msg = r.Errors[0].Message
	}
}

// openMultipart runs the subscription as Apollo's multipart HTTP
// subscription: registered once the first part ({}) arrived.
func openMultipart(t *testing.T, d *dt.Daemon, auth dt.Auth, db, from string) deliverytest.Sub {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "POST", d.URL+"/api/graphql/admin/"+db, strings.NewReader(subscribeBody(from)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json;q=0.9")
	req.Header.Set("Content-Type", "application/json")
	auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &multipartSub{resp: resp, cancel: cancel, parts: make(chan string, 1<<12)}
	go s.read()
	t.Cleanup(s.Close)
	if p := s.part(t); p != "{}" {
		t.Fatalf("first part %q, want {}", p)
	}
	return s
}

type multipartSub struct {
	resp   *http.Response
	cancel context.CancelFunc
	parts  chan string // each part's body; closed at the end
}

// read splits the response into its parts' bodies. A part ends where the
// next boundary starts, which the server writes right after it: the
// bytes are read as they come, not by lines.
func (s *multipartSub) read() {
	defer close(s.parts)
	const boundary = "\r\n--graphql"
	var text string
	buf := make([]byte, 32<<10)
	for {
		n, err := s.resp.Body.Read(buf)
		text += string(buf[:n])
		for {
			i := strings.Index(text, "\r\n\r\n")
			j := strings.Index(text, boundary)
			if j == 0 { // the boundary before a part
				text = text[len(boundary):]
				continue
			}
			if i < 0 || j < 0 || j < i {
				break
			}
			s.parts <- text[i+4 : j]
			text = text[j:]
		}
		if err != nil {
			return
		}
	}
}

// part returns the next part's body, keep-alives ({}) included; "" once
// the response ended.
func (s *multipartSub) part(t *testing.T) string {
	t.Helper()
	select {
	case p := <-s.parts:
		return p
	case <-time.After(wait):
		t.Fatal("no part within the deadline")
	}
	return ""
}

func (s *multipartSub) Next(t *testing.T) (pos, id string) {
	t.Helper()
	for {
		p := s.part(t)
		if p == "{}" {
			continue // keep-alive
		}
		var m struct {
			Payload json.RawMessage `json:"payload"`
		}
		if json.Unmarshal([]byte(p), &m) != nil || string(m.Payload) == "null" {
			t.Fatalf("part %q", p)
		}
		r := parseResult(t, string(m.Payload))
		return r.Extensions.LastEventID, r.Data.DogAdded.ID
	}
}

func (s *multipartSub) End(t *testing.T) string {
	t.Helper()
	msg := ""
	for {
		p, ok := <-s.parts
		if !ok {
			return msg
		}
		if p == "{}" {
			continue
		}
		var m struct {
			Payload json.RawMessage            `json:"payload"`
			Errors  []struct{ Message string } `json:"errors"`
		}
		if json.Unmarshal([]byte(p), &m) != nil || len(m.Errors) == 0 {
			t.Fatalf("a part before the end: %q", p)
		}
		msg = m.Errors[0].Message
	}
}

func (s *multipartSub) Close() {
	s.cancel()
	_, _ = io.Copy(io.Discard, s.resp.Body)
	s.resp.Body.Close()
}

// openWS runs the subscription on a graphql-ws socket, authenticated in
// connection_init; a query sent after it is answered once it is
// registered (the socket reads its next message then).
func openWS(t *testing.T, d *dt.Daemon, auth dt.Auth, db, from string) deliverytest.Sub {
	r, _ := http.NewRequest("GET", "/", nil)
	auth(r)
	c, _, err := dialWS(t, d, "/api/graphql/admin/"+db, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"connection_init","payload":{"Authorization":"` + r.Header.Get("Authorization") + `"}}`)
	c.expect(`{"type":"connection_ack"}`)
	c.send(`{"id":"s","type":"subscribe","payload":` + subscribeBody(from) + `}`)
	// The barrier: answered once s is registered. A resumed s may send
	// what it replays before that answer, and between the barrier's next
	// and its complete (the socket writes each operation's messages as
	// they come): those are kept for Next.
	c.send(`{"id":"b","type":"subscribe","payload":{"query":"{ __typename }"}}`)
	s := &wsSub{wsConn: c}
	for _, want := range []string{
		`{"id":"b","type":"next","payload":{"data":{"__typename":"Query"}}}`,
		`{"id":"b","type":"complete"}`,
	} {
		m := c.read()
		for strings.HasPrefix(m, `{"id":"s",`) {
			s.early = append(s.early, m)
			m = c.read()
		}
		if m != want {
			t.Fatalf("got  %s\nwant %s", m, want)
		}
	}
	return s
}

type wsSub struct {
	*wsConn
	early []string // messages of the subscription read before it was known registered
}

// message returns the subscription's next message.
func (s *wsSub) message() string {
	if len(s.early) > 0 {
		m := s.early[0]
		s.early = s.early[1:]
		return m
	}
	return s.read()
}

// wsMessage is a graphql-transport-ws message.
type wsMessage struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

func (s *wsSub) Next(t *testing.T) (pos, id string) {
	t.Helper()
	var m wsMessage
	if err := json.Unmarshal([]byte(s.message()), &m); err != nil || m.Type != "next" || m.ID != "s" {
		t.Fatalf("message %+v (%v)", m, err)
	}
	r := parseResult(t, string(m.Payload))
	return r.Extensions.LastEventID, r.Data.DogAdded.ID
}

func (s *wsSub) End(t *testing.T) string {
	t.Helper()
	if len(s.early) > 0 {
		t.Fatalf("a message before the end: %s", s.early[0])
	}
	for {
		_, b, err := s.c.Read(s.tx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) && ce.Code == websocket.StatusGoingAway {
				t.Fatal("the socket closed before the subscription's complete")
			}
			t.Fatalf("read: %v", err)
		}
		var m wsMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		switch m.Type {
		case "ping":
			continue
		case "complete":
			return ""
		case "error":
			var errs []struct{ Message string }
			_ = json.Unmarshal(m.Payload, &errs)
			if len(errs) == 0 {
				t.Fatalf("error message %s", b)
			}
			return errs[0].Message
		default:
			t.Fatalf("a message before the end: %s", b)
		}
	}
}

func (s *wsSub) Close() { _ = s.c.CloseNow() }
