package daemontest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

// StreamWait is how long a Stream waits for a frame before failing the
// test.
const StreamWait = 60 * time.Second

// Frame is one server-sent event (its lines, without the blank line that
// ends it), or one NDJSON line (an empty line is the frame {""}).
type Frame []string

func (f Frame) String() string { return strings.Join(f, "\n") }

// Field returns the value of the frame's first line "name: value".
func (f Frame) Field(name string) string {
	for _, l := range f {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			return v
		}
	}
	return ""
}

// IsPing reports whether f is the SSE heartbeat comment.
func (f Frame) IsPing() bool { return len(f) == 1 && f[0] == ": ping" }

// StreamRequest is a request whose answer is read as a stream.
type StreamRequest struct {
	Method string // GET when empty
	Path   string
	// Body, when not empty, is sent as application/json.
	Body string
	// Header holds name, value pairs.
	Header []string
	// Gate, when set, stops the reader after the first frame until it is
	// closed: a client that stops reading.
	Gate <-chan struct{}
}

// Stream is an open streaming response (the REST change stream, a GraphQL
// subscription) read frame by frame on a goroutine of its own. It is closed
// when the test ends.
type Stream struct {
	tb     testing.TB
	resp   *http.Response
	ndjson bool
	frames chan Frame
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	gate   <-chan struct{}
}

// OpenStream sends req with auth and, when the answer is 200, reads it as
// SSE (or as NDJSON when its Content-Type says so). Any other answer is
// returned instead, its body unread.
func (d *Daemon) OpenStream(tb testing.TB, auth Auth, req StreamRequest) (*Stream, *http.Response) {
	tb.Helper()
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	ctx, cancel := context.WithCancel(context.Background())
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	r, err := http.NewRequestWithContext(ctx, req.Method, d.URL+req.Path, body)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if req.Body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(req.Header); i += 2 {
		r.Header.Set(req.Header[i], req.Header[i+1])
	}
	auth(r)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		cancel()
		tb.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		return nil, resp
	}
	s := &Stream{tb: tb, resp: resp, frames: make(chan Frame, 1<<16), ctx: ctx, cancel: cancel, done: make(chan struct{}), gate: req.Gate,
		ndjson: strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson")}
	go s.read()
	tb.Cleanup(s.Close)
	return s, nil
}

// MustOpenStream is OpenStream failing the test unless the answer is 200.
func (d *Daemon) MustOpenStream(tb testing.TB, auth Auth, req StreamRequest) *Stream {
	tb.Helper()
	s, resp := d.OpenStream(tb, auth, req)
	if resp != nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tb.Fatalf("%s %s: status %d: %s", req.Method, req.Path, resp.StatusCode, b)
	}
	return s
}

// NDJSON reports whether the stream is NDJSON rather than SSE.
func (s *Stream) NDJSON() bool { return s.ndjson }

func (s *Stream) read() {
	defer close(s.done)
	defer close(s.frames)
	br := bufio.NewReader(s.resp.Body)
	var f Frame
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case s.ndjson:
			s.frames <- Frame{line}
		case line == "":
			s.frames <- f
			f = nil
		default:
			f = append(f, line)
			continue
		}
		if s.gate != nil {
			// Close ends the wait too: a test that failed before it
			// opened the gate must not hang in its cleanup.
			select {
			case <-s.gate:
			case <-s.ctx.Done():
				return
			}
			s.gate = nil
		}
	}
}

// Close disconnects and waits for the reader.
func (s *Stream) Close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.done
}

// Next returns the next frame, failing the test if none comes within
// StreamWait or the stream ends.
func (s *Stream) Next() Frame {
	s.tb.Helper()
	return s.NextBefore(time.After(StreamWait))
}

// NextBefore is Next with a deadline of the caller's.
func (s *Stream) NextBefore(deadline <-chan time.Time) Frame {
	s.tb.Helper()
	select {
	case f, ok := <-s.frames:
		if !ok {
			s.tb.Fatal("stream ended")
		}
		return f
	case <-deadline:
		s.tb.Fatal("no frame within the deadline")
	}
	return nil
}

// Event returns the next frame that is not a heartbeat.
func (s *Stream) Event() Frame {
	s.tb.Helper()
	deadline := time.After(StreamWait)
	for {
		if f := s.NextBefore(deadline); !f.IsPing() {
			return f
		}
	}
}

// Ended waits until the server closes the stream and returns the frames
// sent before, heartbeats left out.
func (s *Stream) Ended() []Frame {
	s.tb.Helper()
	var out []Frame
	timeout := time.After(StreamWait)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return out
			}
			if !f.IsPing() {
				out = append(out, f)
			}
		case <-timeout:
			s.tb.Fatal("the stream did not end within the deadline")
		}
	}
}

// Header returns the response's header.
func (s *Stream) Header() http.Header { return s.resp.Header }

// Untag returns position text pos (an event id, a write's position)
// without the tag of its commit (sluice.Position.Tag), to compare it
// with a position written from numbers; pos when it has none. Resuming
// from it skips the check of the commit the tag is for.
func Untag(pos string) string {
	p, err := sluice.ParsePosition(pos)
	if err != nil || p.Tag == "" {
		return pos
	}
	return p.Untagged().String()
}
