package rest

import (
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
	// The guard comes first: an access change from now on ends the
	// stream before any later commit reaches it (changefeed/access.go).
	st := &eventStream{api: a, r: r, out: httpstream.New(w, "text/event-stream; charset=utf-8", a.Stream.WriteTimeout), req: req, dbID: reader.Database.ID}
	guard, err := a.Stream.Hub.Guard(r.Context(), engine.Grant(r.Context(), userFrom(r), reader.Database, reader.Role), st.ender.End)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer guard.Release()
	if req.from == nil {
		// Streams of one class, operations and role share one evaluation
		// and one framing of each commit (the hub's shares).
		m, err := a.Stream.Hub.Join(r.Context(), changefeed.ShareOptions{
			Key: restKey{db: reader.Database.ID, epoch: reader.Database.Epoch, class: class, ops: req.opsKey(), role: reader.Role}, Database: reader.Database, Transport: restTransport,
			New:   func() changefeed.Evaluator { return newRestEvaluator(reader.Shared(), req) },
			Frame: frameREST,
		})
		if err != nil {
			writeError(w, r, err)
			return
		}
		defer m.Leave()
		if err := st.ender.Serve(m); err != nil {
			writeError(w, r, err)
			return
		}
		st.subID = m.SubscriptionID()
		st.member(m)
		return
	}
	// A resume reads the log from its position with a subscription of its
	// own. No hub class filter: a subclass added to the schema while the
	// stream is open must match too, which only the stream's refreshed
	// schema knows.
	sub, err := a.Stream.Hub.Subscribe(r.Context(), reader.Database, req.from, changefeed.Options{Transport: restTransport})
	if sluice.ErrorCode(err) == sluice.CodeGone {
		// A resume that cannot be honoured is an event on the stream, so
		// an EventSource sees why, never a silent gap.
		st.start()
		_ = st.writeError(err)
		return
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer sub.Close()
	if err := st.ender.Serve(sub); err != nil {
		writeError(w, r, err)
		return
	}
	st.subID = sub.ID()
	if !st.connected() {
		return
	}
	st.own(sub, newRestEvaluator(reader, req))
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

// eventStream writes one change stream.
type eventStream struct {
	*api
	r     *http.Request
	out   *httpstream.Writer
	req   *subscribeRequest
	subID uint64
	dbID  int64
	// ender ends whatever serves the stream when the guard says so.
	ender changefeed.Ender
}

func (s *eventStream) start() { s.out.Start(s.r) }

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

func (s *eventStream) logger() *slog.Logger {
	return loggerFrom(s.r).With("sub", s.subID, "class", s.req.class)
}

// connected starts the stream with `: connected sub=<n>`, once the
// subscription is registered. It reports false when the client is gone.
func (s *eventStream) connected() bool {
	s.logger().Debug("change stream opened")
	s.start()
	fmt.Fprintf(&s.out.Buf, ": connected sub=%d\n\n", s.subID)
	return s.flush() == nil
}

// member serves a stream that shares its events (a hub share) until it
// ends; a member detached for falling behind continues on a subscription
// of its own.
func (s *eventStream) member(m *changefeed.Member) {
	if !s.connected() {
		return
	}
	beat := time.NewTimer(s.req.heartbeat)
	defer beat.Stop()
	var buf []changefeed.Entry
	for {
		var wake <-chan struct{}
		var state changefeed.TakeState
		buf, wake, state = m.Take(buf[:0])
		if len(buf) > 0 {
			n := 0
			var err error
			first := buf[0].Time
			for _, e := range buf {
				n += len(e.Events)
				if err = s.out.WriteShared(e.Frames); err != nil {
					break
				}
			}
			clear(buf) // do not hold frames while waiting
			if err == nil {
				err = s.flush()
			}
			if err != nil {
				return
			}
			s.delivered(n, first)
			if wake == nil {
				continue // more to take
			}
		}
		switch state {
		case changefeed.TakeDetached:
			from := m.From()
			sub, err := s.Stream.Hub.Subscribe(s.r.Context(), m.Database(), &from, changefeed.Options{Transport: restTransport})
			m.Left() // its own subscription holds its commits now
			if err != nil {
				s.fail(err)
				return
			}
			defer sub.Close()
			if err := s.ender.Serve(sub); err != nil {
				s.fail(err)
				return
			}
			s.serve(sub, m.Evaluator().(*restEvaluator).fork(), beat)
			return
		case changefeed.TakeEnded:
			s.end(m.Err())
			return
		case changefeed.TakeRevoked:
			s.end(s.ender.Err())
			return
		}
		select {
		case <-wake:
		case <-beat.C:
			if !s.heartbeat(beat) {
				return
			}
		case <-s.r.Context().Done():
			return
		}
	}
}

// own serves a stream with a subscription of its own (a resume).
func (s *eventStream) own(sub *changefeed.Subscription, ev *restEvaluator) {
	beat := time.NewTimer(s.req.heartbeat)
	defer beat.Stop()
	s.serve(sub, ev, beat)
}

// serve writes the events of sub's pieces, evaluated by ev, until the
// client leaves or the subscription ends.
func (s *eventStream) serve(sub *changefeed.Subscription, ev *restEvaluator, beat *time.Timer) {
	for {
		select {
		case c := <-sub.Commits():
			if err := s.writeCommits(sub, ev, c); err != nil {
				s.fail(err)
				return
			}
		case <-sub.Done():
			// What was queued before the end is still owed, in order,
			// unless the stream lost its access: then nothing more.
			for !changefeed.IsRevoked(sub.Err()) {
				select {
				case c := <-sub.Commits():
					if err := s.writeCommits(sub, ev, c); err != nil {
						s.fail(err)
						return
					}
					continue
				default:
				}
				break
			}
			s.end(sub.Err())
			return
		case <-beat.C:
			if !s.heartbeat(beat) {
				return
			}
		case <-s.r.Context().Done():
			return
		}
	}
}

// heartbeat handles a beat: a ping when nothing was written for a
// heartbeat interval (a stream that just wrote an event is alive), and
// the next beat. False means the client is gone.
func (s *eventStream) heartbeat(beat *time.Timer) bool {
	return !httpstream.PingDue(beat, s.out.Idle(), s.req.heartbeat) || s.ping()
}

// ping writes a heartbeat; false means the client is gone.
func (s *eventStream) ping() bool {
	s.out.Buf.WriteString(": ping\n\n")
	return s.flush() == nil
}

// end finishes the stream after its subscription ended with err.
func (s *eventStream) end(err error) {
	if errors.Is(err, changefeed.ErrShutdown) {
		s.out.Buf.WriteString(": server shutting down\n\n")
		_ = s.flush()
		return
	}
	s.fail(err)
}

// errClient is a failed write to the client: the stream is over.
type errClient struct{ err error }

func (e errClient) Error() string { return "write to stream client: " + e.err.Error() }

// fail ends the stream after err: with an error event unless the client
// itself is gone.
func (s *eventStream) fail(err error) {
	if errors.As(err, new(errClient)) || s.r.Context().Err() != nil {
		s.logger().Debug("change stream client gone", "err", err)
		return
	}
	if sluice.ErrorCode(err) == sluice.CodeInternal {
		s.logger().Error("change stream failed", "err", err)
	} else {
		s.logger().Info("change stream ended", "err", err)
	}
	_ = s.writeError(err)
}

// writeCommits writes the events of c and of up to 63 further pieces
// already queued, then flushes once.
func (s *eventStream) writeCommits(sub *changefeed.Subscription, ev *restEvaluator, c *sluice.Commit) error {
	n := 0
	var first time.Time
	for i := 0; ; i++ {
		evs, _, err := ev.Events(s.r.Context(), c)
		if err != nil {
			return err
		}
		for _, e := range evs {
			s.out.Buf.Write(frameREST(s.out.Buf.AvailableBuffer(), e))
		}
		if len(evs) > 0 && n == 0 {
			first = c.Time
		}
		n += len(evs)
		// What is buffered goes to the connection as it grows, so a
		// burst of large pieces is not held whole before one flush.
		if err := s.out.Spill(); err != nil {
			return errClient{err}
		}
		if i == 63 {
			break
		}
		select {
		case c = <-sub.Commits():
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
	s.delivered(n, first)
	return nil
}

// delivered counts n events written (and, when first is set, the latency
// of the first).
func (s *eventStream) delivered(n int, first time.Time) {
	m := s.Stream.Metrics
	if m == nil || n == 0 {
		return
	}
	m.Delivered.WithLabelValues(restTransport, strconv.FormatInt(s.dbID, 10)).Add(float64(n))
	if !first.IsZero() {
		m.Latency.WithLabelValues(restTransport).Observe(time.Since(first).Seconds())
	}
}
