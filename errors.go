package sluice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Code classifies an Error. Each code maps to one HTTP status, one GraphQL
// extensions.code and one log level (the table below, which every
// transport answers errors with: see Show); the REST error body names it
// as "api:<Code>".
type Code string

// The error codes. Anything that is not an *Error is reported as CodeInternal
// with a generic message, so internal detail (SQL text, paths) never leaks.
const (
	CodeInvalid          Code = "BadRequest"           // malformed or invalid input
	CodeUnauthenticated  Code = "NotAuthenticated"     // no or wrong credentials
	CodeForbidden        Code = "Forbidden"            // authenticated, lacks access
	CodeNotFound         Code = "NotFound"             // the named thing does not exist
	CodeMethod           Code = "MethodNotAllowed"     // HTTP method not allowed for the operation
	CodeNotAcceptable    Code = "NotAcceptable"        // no media type the client accepts
	CodeConflict         Code = "Conflict"             // exists already, or a destructive change without force
	CodeGone             Code = "Gone"                 // a stream position older than retained history or from another epoch
	CodeTooLarge         Code = "PayloadTooLarge"      // a request body larger than its limit
	CodeHistoryGone      Code = "HistoryGone"          // a read of the past at a position older than retained history
	CodePrecondition     Code = "PreconditionFailed"   // a conditional write whose documents are not as it expected
	CodeUnsupportedMedia Code = "UnsupportedMediaType" // a request body of a media type or charset the operation does not take
	CodeUnprocessable    Code = "Unprocessable"        // an Idempotency-Key reused with a different request; a required GraphQL field without a readable value
	CodeTooMany          Code = "TooManyRequests"      // a per-user limit is reached; retry later
	CodeUnavailable      Code = "Unavailable"          // shutting down, not ready, Postgres unreachable or at capacity
	CodeOutcomeUnknown   Code = "OutcomeUnknown"       // the connection to Postgres was lost while a write committed: it may or may not be written
	CodeInternal         Code = "InternalError"        // a bug or an infrastructure failure
)

// codeInfo is how the errors of one code are answered and logged.
type codeInfo struct {
	status int
	// graphql is the extensions.code of an error in a GraphQL result (a
	// field's, or what ends a subscription); refused, that of a request
	// refused before it runs (an HTTP error answer: GraphQL over HTTP
	// calls every malformed request BAD_REQUEST).
	graphql, refused string
	// retryAfter is the Retry-After of the answer, in seconds ("": none).
	retryAfter string
	level      slog.Level
}

// codes is the one table from an error's code to what a client sees and
// how it is logged, for every transport (REST, GraphQL over HTTP, SSE,
// NDJSON, multipart, graphql-ws, single connection mode). What a client
// did wrong is logged at Debug; the server being unable to serve now
// (shutting down, at a cap, Postgres unreachable) at Info, once per
// request or stream; a write whose outcome is unknown (Postgres lost as
// it committed) at Warn; a failure of Sluice's own at Error.
var codes = map[Code]codeInfo{
	CodeInvalid:          {status: 400, graphql: "BAD_USER_INPUT", refused: "BAD_REQUEST", level: slog.LevelDebug},
	CodeUnauthenticated:  {status: 401, graphql: "UNAUTHENTICATED", level: slog.LevelDebug},
	CodeForbidden:        {status: 403, graphql: "FORBIDDEN", level: slog.LevelDebug},
	CodeNotFound:         {status: 404, graphql: "NOT_FOUND", level: slog.LevelDebug},
	CodeMethod:           {status: 405, graphql: "METHOD_NOT_ALLOWED", level: slog.LevelDebug},
	CodeNotAcceptable:    {status: 406, graphql: "BAD_REQUEST", level: slog.LevelDebug},
	CodeConflict:         {status: 409, graphql: "CONFLICT", level: slog.LevelDebug},
	CodeGone:             {status: 410, graphql: "POSITION_EXPIRED", level: slog.LevelDebug},
	CodeHistoryGone:      {status: 410, graphql: "GONE", level: slog.LevelDebug},
	CodePrecondition:     {status: 412, graphql: "PRECONDITION_FAILED", level: slog.LevelDebug},
	CodeTooLarge:         {status: 413, graphql: "PAYLOAD_TOO_LARGE", refused: "BAD_REQUEST", level: slog.LevelDebug},
	CodeUnsupportedMedia: {status: 415, graphql: "UNSUPPORTED_MEDIA_TYPE", refused: "BAD_REQUEST", level: slog.LevelDebug},
	CodeUnprocessable:    {status: 422, graphql: "UNPROCESSABLE", level: slog.LevelDebug},
	CodeTooMany:          {status: 429, graphql: "TOO_MANY_REQUESTS", retryAfter: "5", level: slog.LevelDebug},
	CodeUnavailable:      {status: 503, graphql: "UNAVAILABLE", retryAfter: "2", level: slog.LevelInfo},
	CodeOutcomeUnknown:   {status: 500, graphql: "OUTCOME_UNKNOWN", level: slog.LevelWarn},
	CodeInternal:         {status: 500, graphql: "INTERNAL_SERVER_ERROR", level: slog.LevelError},
}

// info returns c's row of the table; an unknown code is internal.
func (c Code) info() codeInfo {
	if i, ok := codes[c]; ok {
		return i
	}
	return codes[CodeInternal]
}

// HTTPStatus returns the HTTP status code for c.
func (c Code) HTTPStatus() int { return c.info().status }

// GraphQLCode returns the GraphQL extensions.code for c in a result,
// following the names Apollo-style clients already know.
func (c Code) GraphQLCode() string { return c.info().graphql }

// RefusedGraphQLCode returns the GraphQL extensions.code for c in the
// HTTP error answer of a request refused before it runs.
func (c Code) RefusedGraphQLCode() string {
	if i := c.info(); i.refused != "" {
		return i.refused
	}
	return c.GraphQLCode()
}

// RetryAfter returns the Retry-After header value (seconds) of answers
// with code c, "" for codes that do not invite a retry.
func (c Code) RetryAfter() string { return c.info().retryAfter }

// LogLevel returns the level errors of code c are logged at.
func (c Code) LogLevel() slog.Level { return c.info().level }

// Error is the one error type whose message is safe to show a client.
type Error struct {
	Code    Code
	Message string
	// Retry, when not zero, is how long the client should wait before
	// retrying (the Retry-After of the answer); zero uses the code's.
	Retry time.Duration
	// Limit, when not empty, is the configuration key of the bound the
	// request was refused at (a budget of live queries or streams): GraphQL
	// shows it as extensions.limit, as it shows the bounds of a result.
	Limit string
}

func (e *Error) Error() string { return e.Message }

// RetryAfter returns the Retry-After header value (whole seconds, at least
// 1) of the answer to err: the error's own Retry when it has one, else its
// code's; "" for errors that do not invite a retry.
func RetryAfter(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Retry > 0 {
		return strconv.FormatInt(int64(max(1, math.Ceil(e.Retry.Seconds()))), 10)
	}
	if e != nil {
		return e.Code.RetryAfter()
	}
	return Show(err).RetryAfter
}

// Errorf returns an *Error with the given code and a formatted message. The
// message is shown to clients: never put SQL, file paths or secrets in it.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// LimitErrorf is Errorf of an error refused at the bound of
// configuration key limit (its Limit).
func LimitErrorf(code Code, limit, format string, args ...any) *Error {
	e := Errorf(code, format, args...)
	e.Limit = limit
	return e
}

// MaxEchoBytes is how much of a client's value an error message repeats
// (Echo).
const MaxEchoBytes = 100

// Echo returns s quoted (as %q does) for an error message that repeats a
// value the client sent (an id, a position, a parameter, a header): up to
// MaxEchoBytes bytes whole, otherwise its first MaxEchoBytes bytes, cut
// before a character they would split, then "…" and its length
// (`"abc"… (5000 bytes)`). Whole, a 5,000-byte id came back 5,000 bytes
// long in every error naming it, and in the server's log.
func Echo(s string) string {
	if len(s) <= MaxEchoBytes {
		return strconv.Quote(s)
	}
	cut := MaxEchoBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}

// EchoPlain returns s as it is when it is short and plain (nothing in
// it that %q would escape: no quote, control or right-to-left override),
// and as Echo does otherwise: for a name, such as a document's id, that
// messages have always shown bare (`document Note/a`), and that must not
// come back whole when long, nor reorder the message around it where a
// browser shows it.
func EchoPlain(s string) string {
	if q := strconv.Quote(s); len(s) > MaxEchoBytes || q[1:len(q)-1] != s {
		return Echo(s)
	}
	return s
}

// ErrorCode returns the code a client is shown for err (see Show): the
// code of the first *Error in its chain, CodeUnavailable for a cancelled
// request, CodeInternal for anything else.
func ErrorCode(err error) Code { return Show(err).Code }

// ErrorMessage returns the client-safe message of err (see Show): the
// message of the first *Error in its chain, or a generic text for
// anything else.
func ErrorMessage(err error) string { return Show(err).Message }

// Shown is what a client is shown of an error, and how Sluice logs it.
type Shown struct {
	Code Code
	// Message is safe to show: never a driver's, a decoder's or Go's text.
	Message string
	// RetryAfter is the Retry-After of the answer ("": none).
	RetryAfter string
	// Level is the level the error is logged at (see codes).
	Level slog.Level
	// Limit is the *Error's Limit.
	Limit string
}

// Show maps err to what a client is shown of it, whatever the transport:
// the code and message of the first *Error in its chain; for a request
// whose context ended (the client left, or the server is stopping the
// request) CodeUnavailable, "the request was cancelled", logged at Debug;
// for anything else CodeInternal and "internal error", logged at Error
// with its detail. It is the one mapping every transport answers errors
// with.
func Show(err error) Shown {
	var e *Error
	switch {
	case errors.As(err, &e):
		return Shown{Code: e.Code, Message: e.Message, RetryAfter: RetryAfter(err), Level: e.Code.LogLevel(), Limit: e.Limit}
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return Shown{Code: CodeUnavailable, Message: "the request was cancelled", RetryAfter: CodeUnavailable.RetryAfter(), Level: slog.LevelDebug}
	}
	return Shown{Code: CodeInternal, Message: "internal error", Level: CodeInternal.LogLevel()}
}

// GraphQLExtensions returns the extensions of a GraphQL error showing s
// with extensions.code code (s.Code's GraphQLCode, or its
// RefusedGraphQLCode for a request refused before it runs) and, when s
// invites a retry, extensions.retryAfter: the seconds of its Retry-After
// (as a number), what a REST answer of the error sends as its header;
// with a Limit, extensions.limit.
func (s Shown) GraphQLExtensions(code string) map[string]any {
	ext := map[string]any{"code": code}
	if n, err := strconv.Atoi(s.RetryAfter); err == nil {
		ext["retryAfter"] = n
	}
	if s.Limit != "" {
		ext["limit"] = s.Limit
	}
	return ext
}

// Log logs err, which s shows, at s's level with msg and args, err's
// whole text (internal detail included: the log is not a client) under
// "err" and its code under "code".
func (s Shown) Log(ctx context.Context, l *slog.Logger, msg string, err error, args ...any) {
	if l == nil || !l.Enabled(ctx, s.Level) {
		return
	}
	l.Log(ctx, s.Level, msg, append(args, "code", string(s.Code), "err", err)...)
}

// ErrStorageUnavailable is the error of a request or stream that Postgres
// could not serve because it cannot be reached (or is shutting down or
// starting): 503 with Retry-After; streams end with it, telling clients to
// reconnect and resume.
var ErrStorageUnavailable = Errorf(CodeUnavailable, "the database server is unavailable; retry shortly (streams: reconnect, resuming from the last event id)")

// ErrUnreadableCommit marks an error reading a commit of the log that
// reading it again will not cure: what is stored of it does not decode
// (the readers of the log end the streams that need it, rather than
// retry for ever; see changefeed's Tailer).
var ErrUnreadableCommit = errors.New("a commit of the log cannot be read")

// ErrCommitReplaced marks a read of the log after a commit that the log
// no longer holds, another commit having its sequence number (Stamp): its
// newest commits were lost, in a Postgres failover or a restore, and new
// ones took their numbers. The reader cannot read on from where it stood.
var ErrCommitReplaced = errors.New("the log holds another commit of that number: the commit read before was lost")

// ErrOutcomeUnknown is the error of a write whose connection to Postgres
// was lost after its COMMIT was sent and before Postgres answered it: the
// write may or may not have been committed. Unlike ErrStorageUnavailable,
// which guarantees that nothing was written, it does not invite a blind
// retry, which could write twice (500, no Retry-After).
var ErrOutcomeUnknown = Errorf(CodeOutcomeUnknown, "the connection to the database server was lost while the write was committing: it may or may not have been written; retry it with the same Idempotency-Key (which answers the first outcome if it was written), or read before writing again")

// DecodeError returns the CodeInvalid error of JSON text from a client
// that did not decode (an error of encoding/json, whose own text names Go
// types and must not reach clients): it names the field and what was
// expected in words, or where the text is malformed.
func DecodeError(err error) *Error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		where := ""
		if te.Field != "" {
			where = fmt.Sprintf("field %q: ", te.Field)
		}
		return Errorf(CodeInvalid, "%sexpected %s, got %s", where, goTypeInWords(te.Type), jsonKindInWords(te.Value))
	case errors.As(err, &se) && strings.HasPrefix(se.Error(), "unexpected end"):
		return Errorf(CodeInvalid, "invalid JSON: it ends before it is complete")
	case errors.As(err, &se) && strings.HasSuffix(se.Error(), " exceeded max depth"):
		// Its text names the character that opens one level too many,
		// which is no error of syntax.
		return Errorf(CodeInvalid, "invalid JSON: it nests arrays and objects more than 10000 levels deep, at byte %d (counting from 0)", max(se.Offset-1, 0))
	case errors.As(err, &se):
		what := "malformed"
		if c, ok := strings.CutPrefix(se.Error(), "invalid character "); ok {
			if q, _, ok := strings.Cut(c, " "); ok {
				what = "an unexpected character " + q
			}
		}
		// Offset counts the bytes read, the bad one too: the byte is
		// counted from 0, as every other error about a body counts it.
		return Errorf(CodeInvalid, "invalid JSON: %s at byte %d (counting from 0)", what, max(se.Offset-1, 0))
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return Errorf(CodeInvalid, "invalid JSON: it ends before it is complete")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		// encoding/json quotes the member's name whole: a body of one
		// long name was repeated whole.
		if n, err := strconv.Unquote(name); err == nil {
			name = Echo(n)
		}
		return Errorf(CodeInvalid, "unknown field %s", name)
	}
	return Errorf(CodeInvalid, "invalid JSON")
}

// goTypeInWords says what JSON a Go value of type t decodes from.
func goTypeInWords(t reflect.Type) string {
	one, _ := goTypeWords(t)
	return one
}

// goTypeWords says what JSON a Go value of type t decodes from, as one
// and as several ("a string", "strings").
func goTypeWords(t reflect.Type) (one, several string) {
	if t == nil {
		return "another value", "other values"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string", "strings"
	case reflect.Bool:
		return "true or false", "booleans (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number", "whole numbers"
	case reflect.Float32, reflect.Float64:
		return "a number", "numbers"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() != reflect.Interface {
			_, elems := goTypeWords(t.Elem())
			return "an array of " + elems, "arrays"
		}
		return "an array", "arrays"
	case reflect.Map, reflect.Struct:
		return "an object", "objects"
	}
	return "another value", "other values"
}

// jsonKindInWords names a JSON value's kind as encoding/json reports it
// ("object", "number 3.5", "string", …).
func jsonKindInWords(v string) string {
	switch {
	case v == "object":
		return "an object"
	case v == "array":
		return "an array"
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "number"):
		return "a " + v
	case v == "":
		return "another value"
	}
	return "a " + v
}
