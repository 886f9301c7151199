// Package streamparam parses the parameters every stream transport shares
// (the GraphQL event streams and the REST change stream): the heartbeat
// interval, the position a stream resumes after, and the REST stream's
// operations. One parser and one set of bounds, so the transports cannot
// drift apart. Every error is a CodeInvalid *sluice.Error naming the
// parameter, answered 400 before any stream starts.
package streamparam

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice"
)

// Query returns r's URL parameters as given, a repeated one with all its
// values; nil (which reads as empty) when the URL has none, as most
// streams' do, rather than an empty map per request. A query whose text
// cannot be read (a bad %-escape, a ';' separator) is a CodeInvalid
// error naming what is wrong: url.URL.Query would leave the pair out
// and read the rest, so a mangled ?ops= would be every operation and a
// mangled ?lastEventId= a stream from now, a gap the client is not told
// of. A stream reads its parameters with Params.
func Query(r *http.Request) (url.Values, error) {
	if r.URL.RawQuery == "" {
		return nil, nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		// The error names the bad escape or the separator, never the
		// query, which may hold a stream ticket.
		return nil, sluice.Errorf(sluice.CodeInvalid, "the URL's query cannot be read: %v: percent-encode each parameter's name and value, and separate parameters with &", err)
	}
	return q, nil
}

// Params returns r's URL parameters (as Query does, refusing a query
// that cannot be read), refusing one given more than once with a
// CodeInvalid error naming it, as the REST API refuses it: which of its
// values a stream would take is no choice to make silently (Get takes
// the first, another transport or a proxy may take the last).
func Params(r *http.Request) (url.Values, error) {
	q, err := Query(r)
	if err != nil {
		return nil, err
	}
	for k, vs := range q {
		if len(vs) > 1 {
			return nil, sluice.Errorf(sluice.CodeInvalid, "query parameter %s is given %d times", sluice.Echo(k), len(vs))
		}
	}
	return q, nil
}

// The bounds of a heartbeat interval: a ping more often than every second
// costs a core per few thousand streams for nothing; one rarer than hourly
// lets proxies and load balancers cut the stream.
const (
	MinHeartbeat = time.Second
	MaxHeartbeat = time.Hour
)

// CheckHeartbeat returns an error naming the bounds when d is outside them.
func CheckHeartbeat(d time.Duration) error {
	if d < MinHeartbeat || d > MaxHeartbeat {
		return sluice.Errorf(sluice.CodeInvalid, "heartbeat %s is out of bounds: want 1s to 1h", d)
	}
	return nil
}

// Heartbeat parses ?heartbeat=: a Go duration ("45s", "1m") or whole
// seconds ("45"), from 1s to 1h.
func Heartbeat(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.ParseInt(s, 10, 64)
		if nerr != nil || n < 0 || n > int64(MaxHeartbeat/time.Second) {
			if nerr == nil {
				return 0, sluice.Errorf(sluice.CodeInvalid, "query parameter heartbeat=%s: must be from 1s to 1h", sluice.Echo(s))
			}
			return 0, sluice.Errorf(sluice.CodeInvalid, "query parameter heartbeat=%s: want a duration such as 15s or a number of seconds", sluice.Echo(s))
		}
		d = time.Duration(n) * time.Second
	}
	if d < MinHeartbeat || d > MaxHeartbeat {
		return 0, sluice.Errorf(sluice.CodeInvalid, "query parameter heartbeat=%s: must be from 1s to 1h", sluice.Echo(s))
	}
	return d, nil
}

// LastEventID returns the position a stream resumes after, or nil to start
// from now. It is taken from the Last-Event-ID header, else the
// lastEventId query parameter, else ext (the GraphQL request's
// extensions, whose lastEventId it reads; nil when there are none). The
// header wins: an EventSource reconnecting sends the newest id there
// while its URL keeps the first one. A query parameter given more than
// once is refused (Params), and so is the header given more than once,
// and a query parameter or extension whose name reads as lastEventId
// spelt otherwise (Misspelt).
func LastEventID(r *http.Request, ext map[string]any) (*sluice.Position, error) {
	q, err := Params(r)
	if err != nil {
		return nil, err
	}
	for k := range q {
		if err := Misspelt("query parameter", k); err != nil {
			return nil, err
		}
	}
	if n := len(r.Header.Values("Last-Event-ID")); n > 1 {
		// Which one counts would be a guess (this server would take
		// the first, a proxy may take the last), as for a repeated
		// query parameter.
		return nil, sluice.Errorf(sluice.CodeInvalid, "the Last-Event-ID header is given %d times: give one resume position", n)
	}
	last, where := r.Header.Get("Last-Event-ID"), "the Last-Event-ID header"
	if last == "" && q.Has("lastEventId") {
		last, where = q.Get("lastEventId"), "query parameter lastEventId"
		if last == "" {
			return nil, sluice.Errorf(sluice.CodeInvalid, "%s is empty: want a stream position (an event id)", where)
		}
	}
	if last == "" {
		return Position(ext)
	}
	p, err := sluice.ParsePosition(last)
	if err != nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, "%s: %s", where, sluice.ErrorMessage(err))
	}
	return &p, nil
}

// Position returns the resume position an operation's extensions (ext)
// give in lastEventId, nil when absent; a CodeInvalid error naming it
// when it is no position string, or naming an extension that reads as
// lastEventId spelt otherwise (Misspelt). It is the only resume position
// of an operation of a connection that carries many (graphql-ws), whose
// URL and headers are the connection's.
func Position(ext map[string]any) (*sluice.Position, error) {
	for k := range ext {
		if err := Misspelt("extensions member", k); err != nil {
			return nil, err
		}
	}
	v, ok := ext[ResumeName]
	if !ok || v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return nil, sluice.Errorf(sluice.CodeInvalid, "extensions.lastEventId must be a stream position (an event id) string")
	}
	p, err := sluice.ParsePosition(s)
	if err != nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, "extensions.lastEventId: %s", sluice.ErrorMessage(err))
	}
	return &p, nil
}

// ResumeName is how the resume position is spelt as a query parameter
// and as a member of a GraphQL request's extensions.
const ResumeName = "lastEventId"

// Misspelt returns a CodeInvalid error naming name (a where, such as
// "query parameter") when it reads as ResumeName spelt otherwise
// (lastEventID, last_event_id, LastEventId, last-event-id): not read, it
// would start the stream from now instead of resuming it, a gap the
// client would not be told of.
func Misspelt(where, name string) error {
	if name == ResumeName || !ReadsAsResume(name) {
		return nil
	}
	return sluice.Errorf(sluice.CodeInvalid, "%s %s is not read: the position a stream resumes after is spelt %s (or sent as the Last-Event-ID header)", where, sluice.Echo(name), ResumeName)
}

// ReadsAsResume reports whether name is ResumeName, ignoring case, '_'
// and '-'.
func ReadsAsResume(name string) bool {
	if len(name) > 2*len(ResumeName) {
		return false
	}
	folded := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return r
	}, name)
	return strings.EqualFold(folded, ResumeName)
}

// opTokens are the ?ops= tokens, the operation words of the REST stream's
// events.
var opTokens = map[string]sluice.Op{"create": sluice.OpAdded, "update": sluice.OpUpdated, "delete": sluice.OpDeleted}

// OpToken returns the ?ops= token (and event word) of o.
func OpToken(o sluice.Op) string {
	switch o {
	case sluice.OpAdded:
		return "create"
	case sluice.OpUpdated:
		return "update"
	default:
		return "delete"
	}
}

// Ops parses ?ops=: comma-separated create, update, delete. Absent (given
// false) means all three; an empty list or an unknown token is an error,
// never a wider stream.
func Ops(given bool, s string) (map[sluice.Op]bool, error) {
	ops := map[sluice.Op]bool{}
	if !given {
		for _, o := range opTokens {
			ops[o] = true
		}
		return ops, nil
	}
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(tok)
		o, ok := opTokens[tok]
		if !ok {
			if tok == "" {
				return nil, sluice.Errorf(sluice.CodeInvalid, "query parameter ops=%s has an empty operation: want a comma-separated list of create, update, delete", sluice.Echo(s))
			}
			return nil, sluice.Errorf(sluice.CodeInvalid, "query parameter ops: unknown operation %s: want create, update or delete", sluice.Echo(tok))
		}
		ops[o] = true
	}
	return ops, nil
}

// OpList parses a JSON list of the ?ops= tokens given in field (a request
// body's field, such as a webhook's "ops"): the same tokens and the same
// refusals as Ops, each error naming field. An empty list is an error,
// never every operation.
func OpList(field string, tokens []string) (map[sluice.Op]bool, error) {
	if len(tokens) == 0 {
		return nil, sluice.Errorf(sluice.CodeInvalid, "%s is an empty list: want some of create, update, delete (leave it out for all three)", field)
	}
	ops := map[sluice.Op]bool{}
	for _, tok := range tokens {
		o, ok := opTokens[tok]
		if !ok {
			return nil, sluice.Errorf(sluice.CodeInvalid, "%s: unknown operation %s: want create, update or delete", field, sluice.Echo(tok))
		}
		ops[o] = true
	}
	return ops, nil
}

// OpTokens returns the tokens of ops in canonical order (create, update,
// delete).
func OpTokens(ops map[sluice.Op]bool) []string {
	var out []string
	for _, o := range []sluice.Op{sluice.OpAdded, sluice.OpUpdated, sluice.OpDeleted} {
		if ops[o] {
			out = append(out, OpToken(o))
		}
	}
	return out
}
