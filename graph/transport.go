package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/streamparam"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/jsondup"
	"github.com/sluice-dev/sluice/internal/jsonesc"
	"github.com/sluice-dev/sluice/internal/protocol"
)

// The response media types of GraphQL over HTTP.
const (
	mediaGraphQLResponse = "application/graphql-response+json"
	mediaJSON            = "application/json"
)

// HTTPTransport serves queries and mutations over plain HTTP as the
// GraphQL-over-HTTP specification says, for GET and POST:
//
//   - The response is application/graphql-response+json when the Accept
//     header prefers it (protocol.Negotiate: q-values, then the first),
//     application/json otherwise (also for a missing Accept, */* and
//     application/*); 406 when it accepts neither.
//   - A POST body must be application/json (UTF-8); a malformed body or
//     malformed parameters are a 400.
//   - A request error (the document does not parse or validate, variables
//     do not coerce) is a 400 with application/graphql-response+json and a
//     200 with application/json, and has no data entry.
//   - A mutation over GET is a 405 with Allow: POST; other methods are 405.
//
// It accepts every request: put the transports that claim some, such as
// the event-stream transport, before it. On the GraphQL URLs those claim
// every request internal/protocol.Of does not call HTTP, so what reaches
// HTTPTransport is what Of calls plain HTTP.
type HTTPTransport struct {
	// MaxBodyBytes bounds a POST body (0: 10 MiB).
	MaxBodyBytes int64
	// budget, when set, bounds what requests' parameters hold while they
	// run (Options.RequestBytes).
	budget *paramsBudget
}

var _ graphql.Transport = HTTPTransport{}

// takeBudget charges cost to the budget of the request's user (see
// paramsBudget); a request without a Request in its context (tests of the
// transport alone) is charged nothing.
func (t HTTPTransport) takeBudget(greq *Request, cost int64) (func(), error) {
	if greq == nil || greq.User == nil {
		return func() {}, nil
	}
	return t.budget.take(greq.User, cost)
}

// Supports reports true: HTTPTransport answers everything that reaches it.
func (HTTPTransport) Supports(*http.Request) bool { return true }

// Do serves one request.
func (t HTTPTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	if t.refused(w, r) {
		return
	}
	media, _ := responseMedia(protocol.AcceptHeader(r.Header))
	ctx := r.Context()
	greq := RequestFrom(ctx)
	var params *graphql.RawParams
	if greq != nil && greq.try != nil && greq.try.params != nil {
		params = greq.try.params // served again: the body is gone
	} else {
		var err error
		var cost int64
		if params, cost, err = readParams(r, t.MaxBodyBytes); err != nil {
			writeRequestError(w, media, err)
			return
		}
		release, err := t.takeBudget(greq, cost)
		if err != nil {
			writeRequestError(w, media, err)
			return
		}
		defer release()
		if greq != nil && greq.try != nil {
			// As the executor leaves them (a persisted query's text
			// filled in), for another attempt.
			greq.try.params = params
		}
		if r.Method == http.MethodPost && greq != nil && greq.replay != nil && greq.replay(w, r, media, params) {
			return
		}
	}
	params.Headers = r.Header
	start := graphql.Now()
	params.ReadTime = graphql.TraceTiming{Start: start, End: start}
	rc, errs := exec.CreateOperationContext(ctx, params)
	if errs != nil {
		if greq.outdated(ctx) {
			return
		}
		status := http.StatusOK
		if media == mediaGraphQLResponse {
			status = http.StatusBadRequest
		}
		writeErrors(w, media, status, errs)
		return
	}
	if r.Method == http.MethodGet && rc.Operation.Operation != ast.Query {
		w.Header().Set("Allow", "POST")
		writeRequestError(w, media, sluice.Errorf(sluice.CodeMethod, "a %s cannot be sent with GET; use POST", rc.Operation.Operation))
		return
	}
	if rc.Operation.Operation == ast.Subscription {
		// A request error, answered without data: with the GraphQL
		// response media type, a 4xx, as GraphQL over HTTP asks of a
		// request that does not execute.
		status := http.StatusOK
		if media == mediaGraphQLResponse {
			status = http.StatusBadRequest
		}
		writeErrors(w, media, status, gqlerror.List{{Message: errSubscriptionNeedsStream().Message,
			Extensions: map[string]any{"code": sluice.CodeInvalid.RefusedGraphQLCode()}}})
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, rc)
	resp := responses(ctx)
	if greq.retrying() {
		return
	}
	writeResponse(w, media, resp, greq != nil && greq.replayed)
}

// writeResponse writes resp, the response of an operation; replayed says
// it is an earlier request's, answered again under its Idempotency-Key
// (Idempotent-Replayed, as REST says it).
func writeResponse(w http.ResponseWriter, media string, resp *graphql.Response, replayed bool) {
	b, err := MarshalResponse(resp)
	if err != nil {
		writeRequestError(w, media, fmt.Errorf("encode the response: %w", err))
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if ra := retryAfter(resp); ra > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ra))
	}
	w.Header().Set("Content-Type", media+"; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	// A final newline, as every JSON answer of Sluice's has: a terminal
	// shows the prompt on a line of its own after curl prints it.
	_, _ = w.Write(append(b, '\n'))
}

// retryAfter returns the Retry-After, in seconds, of resp when the whole
// of it is a refusal to retry later: no data, and errors that all invite
// a retry (extensions.retryAfter: a mutation refused by the write
// budget, a query past graphql_request_timeout); the longest of theirs.
// 0 for any other response. The status stays 200: GraphQL over HTTP
// answers a response with its data entry (null here) 2xx, a field's
// error being no request error; the header tells a client when to
// retry, as REST's 429 and 503 do.
func retryAfter(resp *graphql.Response) int {
	if len(resp.Errors) == 0 || len(resp.Data) > 0 && string(resp.Data) != "null" {
		return 0
	}
	most := 0
	for _, e := range resp.Errors {
		n, ok := e.Extensions["retryAfter"].(int)
		if !ok || n <= 0 {
			return 0
		}
		most = max(most, n)
	}
	return most
}

// MarshalResponse returns the JSON of resp, the bytes json.Marshal gives
// it, without json.Marshal's pass over the data: a json.RawMessage is
// checked and compacted byte by byte, which took a sixth of the daemon's
// CPU on pages of 100 documents (docs/benchmarks.md, "Measured choices in
// the code"). The data is this package's, written by a jsonWriter as
// json.Marshal would write it (compact, <, > and & escaped); the errors
// and extensions go through json.Marshal.
func MarshalResponse(resp *graphql.Response) ([]byte, error) {
	var b bytes.Buffer
	// Room for the data, the extensions Sluice adds (a position and a
	// version) and a final newline, so that a large page is not copied
	// through each doubling of the buffer.
	b.Grow(len(resp.Data) + 256)
	b.WriteByte('{')
	if len(resp.Errors) > 0 {
		errs, err := json.Marshal(resp.Errors)
		if err != nil {
			return nil, err
		}
		b.WriteString(`"errors":`)
		b.Write(errs)
		b.WriteByte(',')
	}
	b.WriteString(`"data":`)
	if len(resp.Data) == 0 {
		b.WriteString("null")
	} else {
		b.Write(resp.Data)
	}
	// The fields after data, as graphql.Response orders them.
	rest, err := json.Marshal(struct {
		Label      string         `json:"label,omitempty"`
		Path       ast.Path       `json:"path,omitempty"`
		HasNext    *bool          `json:"hasNext,omitempty"`
		Extensions map[string]any `json:"extensions,omitempty"`
	}{resp.Label, resp.Path, resp.HasNext, resp.Extensions})
	if err != nil {
		return nil, err
	}
	if len(rest) > 2 { // not {}
		b.WriteByte(',')
		b.Write(rest[1 : len(rest)-1])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// responseMedia picks the response media type from an Accept header, as
// protocol.Negotiate decides (application/json for a missing Accept, */*
// and application/*); false when the header accepts neither.
func responseMedia(accept string) (string, bool) {
	return protocol.Negotiate(accept, mediaJSON, mediaGraphQLResponse)
}

// refused answers r and reports true when what its headers say refuses
// it before its parameters are read: an Accept header allowing neither
// response media (406), a method other than GET and POST (405), a POST
// body that is not application/json in UTF-8 (415) or says it is longer
// than MaxBodyBytes (413). Handler.ServeHTTP asks it before it reads the
// database's schema and builds its server, which a request it refuses
// does not need (a schema's server may take a second to build).
func (t HTTPTransport) refused(w http.ResponseWriter, r *http.Request) bool {
	media, ok := responseMedia(protocol.AcceptHeader(r.Header))
	if !ok {
		writeRequestError(w, mediaJSON, sluice.Errorf(sluice.CodeNotAcceptable,
			"the server responds with application/graphql-response+json or application/json; the Accept header allows neither"))
		return true
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", protocol.GraphQLAllow)
		writeRequestError(w, media, sluice.Errorf(sluice.CodeMethod, "%s is not a method of the GraphQL URLs: use GET or POST (PUT and DELETE: single connection mode)", r.Method))
		return true
	}
	if r.Method == http.MethodPost {
		if err := postHeaders(r, bodyLimit(t.MaxBodyBytes)); err != nil {
			writeRequestError(w, media, err)
			return true
		}
	}
	return false
}

// bodyLimit returns the bound of a POST body of at most limit bytes, 10
// MiB when 0.
func bodyLimit(limit int64) int64 {
	if limit <= 0 {
		return 10 << 20
	}
	return limit
}

// errBodyTooLarge is the error of a POST body longer than limit.
func errBodyTooLarge(limit int64) error {
	return sluice.Errorf(sluice.CodeTooLarge, "the request body is larger than %d bytes, the most graphql_max_body_bytes allows", limit)
}

// postHeaders checks what a POST's headers say of its body: its
// Content-Type, and its Content-Length against limit.
func postHeaders(r *http.Request, limit int64) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return unsupportedMedia("the request body must be application/json; Content-Type is missing")
	}
	if ct != mediaJSON { // the usual value needs no parsing
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || mt != mediaJSON {
			return unsupportedMedia("the request body must be application/json, not " + ct)
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return unsupportedMedia("the request body must be UTF-8, not " + cs)
		}
	}
	if r.ContentLength > limit {
		return errBodyTooLarge(limit) // refused before reading any of it
	}
	return nil
}

// ReadParams reads the GraphQL parameters of a GraphQL-over-HTTP request:
// from the URL of a GET (query, operationName, variables, extensions), or
// the JSON body of a POST of at most maxBody bytes (10 MiB when 0). Every
// transport on the GraphQL URL parses requests with it.
func ReadParams(r *http.Request, maxBody int64) (*graphql.RawParams, error) {
	p, _, err := readParams(r, maxBody)
	return p, err
}

// ReadChargedParams is ReadParams for the transports that serve a
// request the Handler authorized besides HTTPTransport (the event
// streams: SSE, NDJSON, multipart, single connection mode): it also
// charges what the parameters hold to the budget of requests' parameters
// of the request's user (Options.RequestBytes), as HTTPTransport charges
// a plain request's, and returns the function that gives it back. Call it
// once the operation is answered, or, for a subscription, registered (its
// variables are then charged to the streams' budgets). Past the budget it
// returns the error to answer (Unavailable, or TooMany past the user's
// share), having charged nothing. Uncharged, a query sent with Accept:
// text/event-stream held its decoded variables while it waited for a
// Postgres connection, outside the budget a plain request is held to.
func ReadChargedParams(r *http.Request, maxBody int64) (*graphql.RawParams, func(), error) {
	p, cost, err := readParams(r, maxBody)
	if err != nil {
		return nil, nil, err
	}
	req := RequestFrom(r.Context())
	if req == nil || req.User == nil {
		return p, func() {}, nil
	}
	release, err := req.budget.take(req.User, cost)
	if err != nil {
		return nil, nil, err
	}
	return p, release, nil
}

// readParams is ReadParams that also returns what the parameters cost
// (paramsCost of the text they were read from).
func readParams(r *http.Request, maxBody int64) (*graphql.RawParams, int64, error) {
	if r.Method == http.MethodGet {
		p, q, err := getParams(r)
		if err != nil {
			return nil, 0, err
		}
		return p, paramsCost(len(r.URL.RawQuery), jsonValues([]byte(q.Get("variables")))+jsonValues([]byte(q.Get("extensions")))), nil
	}
	return postParams(r, maxBody)
}

// getParams reads the GraphQL parameters of a GET from its URL, and
// returns the URL's parameters too. A parameter given more than once is
// refused (streamparam.Params), as the event-stream transports on the
// same URL refuse it: of variables given twice the first was run, and
// another reader (a proxy, a log) may take the last.
func getParams(r *http.Request) (*graphql.RawParams, url.Values, error) {
	q, err := streamparam.Params(r)
	if err != nil {
		return nil, nil, err
	}
	p := &graphql.RawParams{Query: q.Get("query"), OperationName: q.Get("operationName")}
	for _, param := range []struct {
		name string
		dst  *map[string]any
	}{{"variables", &p.Variables}, {"extensions", &p.Extensions}} {
		v := q.Get(param.name)
		if v == "" || v == "null" { // null is no value, as in a POST body
			continue
		}
		if l, bad := jsonesc.Find([]byte(v)); bad {
			// encoding/json would read it as U+FFFD, as a POST body's
			// check says (rest/bodies.go).
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "%s: %s", param.name, l.Refusal())
		}
		if err := decodeObject([]byte(v), param.dst); errors.Is(err, errTooManyValues) {
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "%s: %v", param.name, err)
		} else if err != nil {
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "%s: %s", param.name, sluice.DecodeError(err).Message)
		}
		// encoding/json kept the last of a member given twice.
		if rep, ok := jsondup.Find([]byte(v)); ok {
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "%s: invalid JSON: %s", param.name, rep.Message())
		}
	}
	if p.Query == "" && persistedHash(p) == "" {
		return nil, nil, invalidRequest("the query parameter is missing")
	}
	return p, q, nil
}

func postParams(r *http.Request, limit int64) (*graphql.RawParams, int64, error) {
	limit = bodyLimit(limit)
	if err := postHeaders(r, limit); err != nil {
		return nil, 0, err
	}
	tooLarge := func() error { return errBodyTooLarge(limit) }
	body, err := readBody(r, limit)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, 0, tooLarge() // a limit of the server's own, past it
	}
	if e, ok := errors.AsType[*sluice.Error](err); ok {
		if e.Code == sluice.CodeUnavailable {
			// No fault of the body's: the server reads its most bodies
			// (max_request_bodies), which it counts from a body's first
			// read. 503, to retry.
			return nil, 0, e
		}
		return nil, 0, invalidRequest(e.Message) // the body's own fault: not UTF-8, too slow
	}
	if err != nil {
		return nil, 0, invalidRequest("could not read the request body")
	}
	if int64(len(body)) > limit {
		return nil, 0, tooLarge()
	}
	p, values, msg := parseRequestBody(body)
	if msg != "" {
		return nil, 0, invalidRequest(msg)
	}
	return p, paramsCost(len(body), values), nil
}

// readBody reads r's body, at most limit+1 bytes. A body of announced
// length (at most limit, checked before) is read into a buffer of exactly
// that size: a stream opened with a small request keeps no garbage of a
// growing buffer until the next collection.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength < 0 {
		return io.ReadAll(io.LimitReader(r.Body, limit+1))
	}
	body := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return nil, err
	}
	return body, nil
}

// ParseRequestBody parses a GraphQL-over-HTTP POST body: a JSON object with
// a string query and optional operationName (string), variables and
// extensions (objects); null means absent. It returns the parameters, or a
// message saying what is wrong.
func ParseRequestBody(body []byte) (*graphql.RawParams, string) {
	p, _, msg := parseRequestBody(body)
	return p, msg
}

// parseRequestBody is ParseRequestBody that also returns the number of
// JSON values the body holds.
func parseRequestBody(body []byte) (*graphql.RawParams, int, string) {
	// encoding/json would read invalid UTF-8 in a string (a query, a
	// variable) as U+FFFD: refused instead. Over HTTP the body was
	// checked as it was read already.
	if !utf8.Valid(body) {
		return nil, 0, fmt.Sprintf("the request body is not valid UTF-8 at byte %d (counting from 0): it must be UTF-8 text, and what is not is refused, not replaced", firstInvalidUTF8(body))
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, 0, "the request body is empty; send a JSON object with a query"
	}
	if body[0] != '{' {
		return nil, 0, "the request body is not a JSON object: expected a JSON object"
	}
	// The whole body is counted too, before its top level is decoded: a
	// body of 8 MiB of other members ("1a":0,…) decoded into about 80 MB.
	// It may hold variables and extensions of maxParamValues each, and
	// the few values around them.
	values := jsonValues(body)
	if values > 2*maxParamValues+16 {
		return nil, 0, "the request body: " + errTooManyValues.Error()
	}
	// json.Unmarshal rather than decodeObject: the top level needs no
	// json.Number, and a decoder's buffers would be garbage of every request.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, 0, "the request body is not a JSON object: " + sluice.DecodeError(err).Message
	}
	// encoding/json keeps the last of a member given twice ("query", or
	// a variable): the body is refused instead, as a document is.
	if rep, ok := jsondup.Find(body); ok {
		return nil, 0, "the request body: invalid JSON: " + rep.Message()
	}
	for k := range raw {
		if streamparam.ReadsAsResume(k) {
			// Not read, it would start a stream from now instead of
			// resuming it, a gap the client would not be told of.
			return nil, 0, fmt.Sprintf("the request body's member %s is not read: a stream resumes after extensions.%s (or the Last-Event-ID header)", sluice.Echo(k), streamparam.ResumeName)
		}
	}
	p := &graphql.RawParams{}
	isNull := func(m json.RawMessage) bool { return m == nil || string(bytes.TrimSpace(m)) == "null" }
	if !isNull(raw["query"]) {
		if err := json.Unmarshal(raw["query"], &p.Query); err != nil {
			return nil, 0, "the query parameter must be a string"
		}
	}
	if !isNull(raw["operationName"]) {
		if err := json.Unmarshal(raw["operationName"], &p.OperationName); err != nil {
			return nil, 0, "the operationName parameter must be a string"
		}
	}
	if !isNull(raw["variables"]) {
		if err := decodeObject(raw["variables"], &p.Variables); errors.Is(err, errTooManyValues) {
			return nil, 0, "the variables parameter: " + err.Error()
		} else if err != nil {
			return nil, 0, "the variables parameter must be an object"
		}
	}
	if !isNull(raw["extensions"]) {
		if err := decodeObject(raw["extensions"], &p.Extensions); errors.Is(err, errTooManyValues) {
			return nil, 0, "the extensions parameter: " + err.Error()
		} else if err != nil {
			return nil, 0, "the extensions parameter must be an object"
		}
	}
	// Without a query, a request names one by its hash (an automatic
	// persisted query: the extension answers PERSISTED_QUERY_NOT_FOUND
	// when this process has not been sent its text, and the client sends
	// it with the hash).
	if p.Query == "" && persistedHash(p) == "" {
		return nil, 0, "the query parameter is missing"
	}
	return p, values, ""
}

// firstInvalidUTF8 returns the offset of the first byte of b that is not
// part of a valid UTF-8 character, or len(b).
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// decodeObject decodes one JSON object (numbers as json.Number) into dst.
func decodeObject(b []byte, dst any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("expected a JSON object")
	}
	if jsonValues(b) > maxParamValues {
		return errTooManyValues
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

// maxParamValues bounds the JSON values (numbers, strings, booleans,
// nulls, arrays and objects; about, see jsonValues) of a request's
// variables, and of its extensions, counted before they are decoded.
// Decoded, a small value costs about twenty times its size (an entry of a
// map or a slice, an interface, a string header): an 8 MiB body of ""
// held 200 MB until the limits of the arguments it fed (1,000 ids, 1,000
// filter terms) refused it, so a few concurrent requests held gigabytes.
// 100,000 values hold a mutation of thousands of documents; larger
// batches belong to the REST API (NDJSON, read as it arrives).
const maxParamValues = 100_000

// errTooManyValues is the error of parameters past maxParamValues.
var errTooManyValues = fmt.Errorf("it holds more than %d JSON values, the most a request may send (larger batches of documents: use the REST API)", maxParamValues)

// jsonValues returns about how many values the JSON text b holds, at least
// as many as it does: one, and one more for each array or object and each
// comma outside strings. It is a count, not a check: the decoder checks.
func jsonValues(b []byte) int {
	n := 1
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ',' || c == '[' || c == '{':
			n++
		}
	}
	return n
}

// invalidRequest returns the error of a malformed request.
func invalidRequest(msg string) error { return &sluice.Error{Code: sluice.CodeInvalid, Message: msg} }

// unsupportedMedia returns the error of a body Sluice does not read.
func unsupportedMedia(msg string) error {
	return &sluice.Error{Code: sluice.CodeUnsupportedMedia, Message: msg}
}

// writeRequestError answers a request refused before it runs with err,
// as sluice.Show shows it (a request's extensions.code: BAD_REQUEST for
// a malformed one).
func writeRequestError(w http.ResponseWriter, media string, err error) {
	sh := sluice.Show(err)
	if sh.RetryAfter != "" {
		w.Header().Set("Retry-After", sh.RetryAfter)
	}
	writeErrors(w, media, sh.Code.HTTPStatus(), gqlerror.List{{Message: sh.Message, Extensions: sh.GraphQLExtensions(sh.Code.RefusedGraphQLCode())}})
}

// writeErrors writes a response with errors and no data entry.
func writeErrors(w http.ResponseWriter, media string, status int, errs gqlerror.List) {
	b, _ := json.Marshal(struct {
		Errors gqlerror.List `json:"errors"`
	}{errs})
	w.Header().Set("Content-Type", media+"; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
