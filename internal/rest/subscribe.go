package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/stream"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// StreamDeps is what the streaming endpoints need.
type StreamDeps struct {
	// Hub delivers commits; without it the stream routes answer 503.
	Hub     *changefeed.Hub
	Metrics *metrics.Stream
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
	if a.Stream.Hub == nil {
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
	sink := &restSink{out: httpstream.New(w, r, "text/event-stream; charset=utf-8", a.Stream.WriteTimeout)}
	st := stream.New(r.Context(), sink, stream.Options{Hub: a.Stream.Hub, Metrics: a.Stream.Metrics, Logger: loggerFrom(r).With("class", class),
		// A stream of its own reads every class (no Classes): a subclass
		// added to the schema while the stream is open must match too,
		// which only the stream's refreshed schema knows.
		Label: restTransport, Database: reader.Database, Heartbeat: req.heartbeat,
		Detached: func(shared changefeed.Evaluator) changefeed.Evaluator { return shared.(*restEvaluator).fork() }})
	// The guard comes first: an access change from now on ends the
	// stream before any later commit reaches it (changefeed/access.go).
	if err := st.Guard(engine.Grant(r.Context(), userFrom(r), reader.Database, reader.Role)); err != nil {
		writeError(w, r, err)
		return
	}
	if req.from == nil {
		// Streams of one class, operations and role share one evaluation
		// and one framing of each commit (the hub's shares).
		err = st.Join(changefeed.ShareOptions{
			Key:   restKey{db: reader.Database.ID, epoch: reader.Database.Epoch, class: class, ops: req.opsKey(), role: reader.Role},
			New:   func() changefeed.Evaluator { return newRestEvaluator(reader.Shared(), req) },
			Frame: frameREST,
		})
	} else {
		err = st.Subscribe(req.from, newRestEvaluator(reader, req))
		if sluice.ErrorCode(err) == sluice.CodeGone {
			// A resume that cannot be honoured is an event on the
			// stream, so an EventSource sees why, never a silent gap.
			st.Release()
			sink.out.Start()
			sink.End(err)
			_ = sink.Flush()
			return
		}
	}
	if err != nil {
		st.Release()
		writeError(w, r, err)
		return
	}
	sink.out.Start()
	fmt.Fprintf(&sink.out.Buf, ": connected sub=%d\n\n", st.SubscriptionID())
	if !st.Ready() {
		st.Release()
		return
	}
	st.Serve()
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
}

func (s *restSink) Shared() bool                    { return true }
func (s *restSink) WriteFrames(frames []byte) error { return s.out.WriteShared(frames) }
func (s *restSink) WriteEvent(ev sluice.Event) {
	s.out.Buf.Write(frameREST(s.out.Buf.AvailableBuffer(), ev))
}
func (s *restSink) Spill() error        { return s.out.Spill() }
func (s *restSink) Flush() error        { return s.out.Flush() }
func (s *restSink) Ping()               { s.out.Buf.WriteString(": ping\n\n") }
func (s *restSink) Idle() time.Duration { return s.out.Idle() }

// End writes `: server shutting down` on shutdown, and an error event for
// anything else that ends the stream.
func (s *restSink) End(err error) {
	switch {
	case errors.Is(err, changefeed.ErrShutdown):
		s.out.Buf.WriteString(": server shutting down\n\n")
	case err == nil || errors.Is(err, changefeed.ErrClosed):
	default:
		b, _ := json.Marshal(errorShape(sluice.Show(err)))
		s.out.Buf.WriteString("event: error\ndata: ")
		s.out.Buf.Write(b)
		s.out.Buf.WriteString("\n\n")
	}
}
