package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/metrics"
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
	req.reader = reader
	// The guard comes first: an access change from now on ends the
	// stream before any later commit reaches it (changefeed/access.go).
	var ender changefeed.Ender
	guard, err := a.Stream.Hub.Guard(r.Context(), engine.Grant(r.Context(), userFrom(r), reader.Database, reader.Role), ender.End)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer guard.Release()
	// No hub class filter: a subclass added to the schema while the stream
	// is open must match too, which only the stream's refreshed schema
	// knows.
	sub, err := a.Stream.Hub.Subscribe(r.Context(), reader.Database, req.from, changefeed.Options{Transport: restTransport})
	st := &eventStream{api: a, out: httpstream.New(w, "text/event-stream; charset=utf-8", a.Stream.WriteTimeout), req: req}
	if sluice.ErrorCode(err) == sluice.CodeGone {
		// A resume that cannot be honoured is an event on the stream, so
		// an EventSource sees why, never a silent gap.
		st.start(r)
		_ = st.writeError(err)
		return
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer sub.Close()
	if err := ender.Serve(sub); err != nil {
		writeError(w, r, err)
		return
	}
	st.sub = sub
	st.serve(r)
}

// subscribeRequest is a parsed change stream request.
type subscribeRequest struct {
	ops       map[sluice.Op]bool
	heartbeat time.Duration
	from      *sluice.Position // nil: from now
	class     string
	reader    *engine.Reader
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

// eventStream writes one change stream.
type eventStream struct {
	*api
	out *httpstream.Writer
	req *subscribeRequest
	sub *changefeed.Subscription
}

func (s *eventStream) start(r *http.Request) { s.out.Start(r) }

// flush sends the buffered frames; a failure means the client is gone.
func (s *eventStream) flush() error {
	if err := s.out.Flush(); err != nil {
		return errClient{err}
	}
	return nil
}

func (s *eventStream) writeError(err error) error {
	b, _ := json.Marshal(errorBody{
		Status:  "api:failure",
		Error:   map[string]string{"@type": "api:" + string(sluice.ErrorCode(err))},
		Message: sluice.ErrorMessage(err),
	})
	s.out.Buf.WriteString("event: error\ndata: ")
	s.out.Buf.Write(b)
	s.out.Buf.WriteString("\n\n")
	return s.flush()
}

func (s *eventStream) serve(r *http.Request) {
	logger := loggerFrom(r).With("sub", s.sub.ID(), "database", s.sub.Database().Path(), "class", s.req.class)
	logger.Debug("change stream opened")
	defer logger.Debug("change stream closed")
	s.start(r)
	fmt.Fprintf(&s.out.Buf, ": connected sub=%d\n\n", s.sub.ID())
	if err := s.flush(); err != nil {
		return
	}
	tick := time.NewTicker(s.req.heartbeat)
	defer tick.Stop()
	for {
		select {
		case c := <-s.sub.Commits():
			if err := s.writeCommits(r.Context(), c); err != nil {
				s.fail(logger, err)
				return
			}
		case <-s.sub.Done():
			// What was queued before the end is still owed, in order,
			// unless the stream lost its access: then nothing more.
			for !changefeed.IsRevoked(s.sub.Err()) {
				select {
				case c := <-s.sub.Commits():
					if err := s.writeCommits(r.Context(), c); err != nil {
						s.fail(logger, err)
						return
					}
					continue
				default:
				}
				break
			}
			err := s.sub.Err()
			if errors.Is(err, changefeed.ErrShutdown) {
				s.out.Buf.WriteString(": server shutting down\n\n")
				_ = s.flush()
				return
			}
			s.fail(logger, err)
			return
		case <-tick.C:
			s.out.Buf.WriteString(": ping\n\n")
			if err := s.flush(); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// errClient is a failed write to the client: the stream is over.
type errClient struct{ err error }

func (e errClient) Error() string { return "write to stream client: " + e.err.Error() }

// fail ends the stream after err: with an error event unless the client
// itself is gone.
func (s *eventStream) fail(logger *slog.Logger, err error) {
	if errors.As(err, new(errClient)) {
		logger.Debug("change stream client gone", "err", err)
		return
	}
	if sluice.ErrorCode(err) == sluice.CodeInternal {
		logger.Error("change stream failed", "err", err)
	} else {
		logger.Info("change stream ended", "err", err)
	}
	_ = s.writeError(err)
}

// writeCommits writes the events of c and of up to 63 further commits
// already queued, then flushes once.
func (s *eventStream) writeCommits(ctx context.Context, c *sluice.Commit) error {
	n := 0
	var first time.Time
	for i := 0; ; i++ {
		k, err := s.appendEvents(ctx, c)
		if err != nil {
			return err
		}
		if k > 0 && n == 0 {
			first = c.Time
		}
		n += k
		// What is buffered goes to the connection as it grows, so a
		// burst of large pieces is not held whole before one flush.
		if err := s.out.Spill(); err != nil {
			return errClient{err}
		}
		if i == 63 {
			break
		}
		select {
		case c = <-s.sub.Commits():
			continue
		default:
		}
		break
	}
	if n == 0 {
		return nil
	}
	if err := s.flush(); err != nil {
		return err
	}
	if m := s.Stream.Metrics; m != nil {
		m.Delivered.WithLabelValues(restTransport, strconv.FormatInt(s.sub.Database().ID, 10)).Add(float64(n))
		m.Latency.WithLabelValues(restTransport).Observe(time.Since(first).Seconds())
	}
	return nil
}

// envelope is a CloudEvents 1.0 structured event.
type envelope struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	Source          string          `json:"source"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Entity          string          `json:"entity"`
	Operation       string          `json:"operation"`
	Tenant          string          `json:"tenant"`
	UserID          string          `json:"user_id"`
	Data            json.RawMessage `json:"data"`
}

// appendEvents buffers the frames of c's changes that the stream selects
// and returns how many.
func (s *eventStream) appendEvents(ctx context.Context, c *sluice.Commit) (int, error) {
	rd := s.req.reader
	n := 0
	for i := range c.Changes {
		ch := &c.Changes[i]
		if !s.req.ops[ch.Op] {
			continue
		}
		if cl, err := rd.Class(ctx, ch.Class); err != nil {
			return n, err
		} else if cl == nil || !rd.Schema.IsA(ch.Class, s.req.class) {
			continue
		}
		doc := ch.After
		if ch.Op == sluice.OpDeleted {
			doc = ch.Before
		}
		data, err := rd.RedactAt(ctx, c, ch.Class, doc)
		if err != nil {
			return n, err
		}
		d := rd.Database
		op := streamparam.OpToken(ch.Op)
		pos := c.Position(ch.Index).String()
		b, err := json.Marshal(envelope{
			SpecVersion: "1.0", ID: pos, Type: "entity." + op,
			Source: "/api/db/" + d.Path(), Subject: ch.DocID, Time: c.Time.UTC().Format(time.RFC3339Nano),
			DataContentType: "application/json", Entity: ch.Class, Operation: op,
			Tenant: d.Org, UserID: c.User, Data: data,
		})
		if err != nil {
			return n, fmt.Errorf("encode event %s: %w", pos, err)
		}
		s.out.Buf.WriteString("id: ")
		s.out.Buf.WriteString(pos)
		s.out.Buf.WriteString("\nevent: entity.")
		s.out.Buf.WriteString(op)
		s.out.Buf.WriteString("\ndata: ")
		s.out.Buf.Write(b)
		s.out.Buf.WriteString("\n\n")
		n++
	}
	return n, nil
}
