package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/stream"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// StreamDeps is what the streaming endpoints need.
type StreamDeps struct {
	// Streams serves the streams; without it the stream routes answer 503.
	Streams *stream.Server
	// Heartbeat is the keep-alive interval when a request gives none
	// (config key heartbeat).
	Heartbeat time.Duration
	// WriteTimeout bounds each write to a stream client, so a vanished
	// peer is noticed (default 1m). The server itself has no write timeout.
	WriteTimeout time.Duration
}

// restTransport labels the REST change stream in metrics.
const restTransport = "rest"

// subscribe serves the REST change stream GET /api/subscribe/{org}/{db}/{class}:
// one server-sent event per changed document of the class or a subclass,
// as a CloudEvents 1.0 structured event, resumable with Last-Event-ID.
func (a *api) subscribe(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET, OPTIONS")
		writeError(w, r, errMethod(r))
		return
	}
	req, err := a.parseSubscribe(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if a.Stream.Streams == nil {
		writeError(w, r, sluice.Errorf(sluice.CodeUnavailable, "the change feed is not running"))
		return
	}
	org, name := dbPath(r)
	reader, err := a.Engine.StreamReader(r.Context(), userFrom(r), org, name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	class := chi.URLParam(r, "class")
	if c := reader.Schema.Class(class); c == nil || c.Kind == sluice.KindSubdocument {
		writeError(w, r, sluice.Errorf(sluice.CodeNotFound, "class %q is not a document class of %s", class, reader.Database.Path()))
		return
	}
	req.class = class
	spec := stream.Spec{Label: restTransport, Database: reader.Database, Grant: engine.Grant(r.Context(), userFrom(r), reader.Database, reader.Role),
		Heartbeat: req.heartbeat, Logger: baseLogger(r.Context()), Attrs: []any{"class", class},
		// A stream of its own reads every class (no Classes): a subclass
		// added to the schema while the stream is open must match too,
		// which only the stream's refreshed schema knows.
		Detached: func(shared stream.Evaluator) stream.Evaluator { return shared.(*restEvaluator).fork() }}
	if req.from == nil {
		// Streams of one class, operations and role share one evaluation
		// and one framing of each commit (the stream server's shares).
		spec.Share = &stream.ShareOptions{
			Key:   restKey{db: reader.Database.ID, epoch: reader.Database.Epoch, class: class, ops: req.opsKey(), role: reader.Role},
			New:   func() stream.Evaluator { return newRestEvaluator(reader.Shared(), req) },
			Frame: frameREST,
		}
	} else {
		spec.From, spec.Evaluator = req.from, newRestEvaluator(reader, req)
	}
	a.Stream.Streams.Serve(r.Context(), spec, &restSink{out: httpstream.New(w, r, "text/event-stream; charset=utf-8", a.Stream.WriteTimeout), w: w, r: r})
}

// restKey identifies REST change streams with the same events.
type restKey struct {
	db    int64
	epoch string
	class string
	ops   string
	role  sluice.Role
}

// subscribeRequest is a parsed change stream request.
type subscribeRequest struct {
	ops       map[sluice.Op]bool
	heartbeat time.Duration
	from      *sluice.Position // nil: from now
	class     string
}

// opsKey returns the operations in canonical form.
func (req *subscribeRequest) opsKey() string {
	k := ""
	for _, o := range []sluice.Op{sluice.OpAdded, sluice.OpUpdated, sluice.OpDeleted} {
		if req.ops[o] {
			k += streamparam.OpToken(o) + ","
		}
	}
	return k
}

func (a *api) parseSubscribe(r *http.Request) (*subscribeRequest, error) {
	q, err := query(r, "ops", "heartbeat", "lastEventId")
	if err != nil {
		return nil, err
	}
	req := &subscribeRequest{heartbeat: a.Stream.Heartbeat}
	if req.heartbeat <= 0 {
		req.heartbeat = 12 * time.Second
	}
	if req.ops, err = streamparam.Ops(q.Has("ops"), q.Get("ops")); err != nil {
		return nil, err
	}
	if q.Has("heartbeat") {
		if req.heartbeat, err = streamparam.Heartbeat(q.Get("heartbeat")); err != nil {
			return nil, err
		}
	}
	if req.from, err = streamparam.LastEventID(r, nil); err != nil {
		return nil, err
	}
	return req, nil
}

// restSink frames the REST change stream (stream.Sink): SSE events of
// CloudEvents envelopes, which a share frames once for its members.
type restSink struct {
	out *httpstream.Writer
	// w and r answer a stream refused before it started; dropped once it
	// did (a stream keeps nothing of its request).
	w http.ResponseWriter
	r *http.Request
}

func (s *restSink) HTTP() *httpstream.Writer        { return s.out }
func (s *restSink) Shared() bool                    { return true }
func (s *restSink) WriteFrames(frames []byte) error { return s.out.WriteShared(frames) }
func (s *restSink) WriteEvent(ev sluice.Event) {
	s.out.Buf.Write(frameREST(s.out.Buf.AvailableBuffer(), ev))
}
func (s *restSink) Spill() error        { return s.out.Spill() }
func (s *restSink) Flush() error        { return s.out.Flush() }
func (s *restSink) Ping()               { s.out.Buf.WriteString(": ping\n\n") }
func (s *restSink) Idle() time.Duration { return s.out.Idle() }

// Refuse answers a stream that may not start with an HTTP error.
func (s *restSink) Refuse(err error) { writeError(s.w, s.r, err) }

// Fail answers a stream that could not start: a resume that cannot be
// honoured is an event on the stream, so an EventSource sees why, never a
// silent gap; anything else an HTTP error.
func (s *restSink) Fail(err error) {
	if sluice.ErrorCode(err) != sluice.CodeGone {
		writeError(s.w, s.r, err)
		return
	}
	s.start()
	s.End(err)
}

// Ready starts the response with the readiness comment naming the hub
// subscription.
func (s *restSink) Ready(sub uint64) {
	s.start()
	fmt.Fprintf(&s.out.Buf, ": connected sub=%d\n\n", sub)
}

func (s *restSink) start() {
	s.out.Start()
	s.w, s.r = nil, nil
}

// End writes `: server shutting down` on shutdown, and an error event for
// anything else that ends the stream.
func (s *restSink) End(err error) {
	switch {
	case errors.Is(err, stream.ErrShutdown):
		s.out.Buf.WriteString(": server shutting down\n\n")
	case err == nil || errors.Is(err, stream.ErrClosed):
	default:
		b, _ := json.Marshal(errorShape(sluice.Show(err)))
		s.out.Buf.WriteString("event: error\ndata: ")
		s.out.Buf.Write(b)
		s.out.Buf.WriteString("\n\n")
	}
}
