package sluice

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Code classifies an Error. Each code maps to one HTTP status and one GraphQL
// extensions.code (see HTTPStatus and GraphQLCode); the REST error body names
// it as "api:<Code>".
type Code string

// The error codes. Anything that is not an *Error is reported as CodeInternal
// with a generic message, so internal detail (SQL text, paths) never leaks.
const (
	CodeInvalid          Code = "BadRequest"           // malformed or invalid input
	CodeUnauthenticated  Code = "NotAuthenticated"     // no or wrong credentials
	CodeForbidden        Code = "Forbidden"            // authenticated, lacks access
	CodeNotFound         Code = "NotFound"             // the named thing does not exist
	CodeMethod           Code = "MethodNotAllowed"     // HTTP method not allowed for the operation
	CodeConflict         Code = "Conflict"             // exists already, or a destructive change without force
	CodeGone             Code = "Gone"                 // a stream position older than retained history or from another epoch
	CodeTooLarge         Code = "PayloadTooLarge"      // a request body larger than its limit
	CodeHistoryGone      Code = "HistoryGone"          // a read of the past at a position older than retained history
	CodePrecondition     Code = "PreconditionFailed"   // a conditional write whose documents are not as it expected
	CodeUnsupportedMedia Code = "UnsupportedMediaType" // a request body of a media type the operation does not take
	CodeUnprocessable    Code = "Unprocessable"        // an Idempotency-Key reused with a different request
	CodeTooMany          Code = "TooManyRequests"      // a per-user limit is reached; retry later
	CodeUnavailable      Code = "Unavailable"          // shutting down, not ready, Postgres unreachable or at capacity
	CodeOutcomeUnknown   Code = "OutcomeUnknown"       // the connection to Postgres was lost while a write committed: it may or may not be written
	CodeInternal         Code = "InternalError"        // a bug or an infrastructure failure
)

// HTTPStatus returns the HTTP status code for c.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeInvalid:
		return 400
	case CodeUnauthenticated:
		return 401
	case CodeForbidden:
		return 403
	case CodeNotFound:
		return 404
	case CodeMethod:
		return 405
	case CodeConflict:
		return 409
	case CodeGone, CodeHistoryGone:
		return 410
	case CodeTooLarge:
		return 413
	case CodePrecondition:
		return 412
	case CodeUnsupportedMedia:
		return 415
	case CodeUnprocessable:
		return 422
	case CodeTooMany:
		return 429
	case CodeUnavailable:
		return 503
	default:
		return 500
	}
}

// GraphQLCode returns the GraphQL extensions.code for c, following the names
// Apollo-style clients already know.
func (c Code) GraphQLCode() string {
	switch c {
	case CodeInvalid:
		return "BAD_USER_INPUT"
	case CodeUnauthenticated:
		return "UNAUTHENTICATED"
	case CodeForbidden:
		return "FORBIDDEN"
	case CodeNotFound:
		return "NOT_FOUND"
	case CodeMethod:
		return "METHOD_NOT_ALLOWED"
	case CodeConflict:
		return "CONFLICT"
	case CodeGone:
		return "POSITION_EXPIRED"
	case CodeTooLarge:
		return "PAYLOAD_TOO_LARGE"
	case CodePrecondition:
		return "PRECONDITION_FAILED"
	case CodeUnsupportedMedia:
		return "UNSUPPORTED_MEDIA_TYPE"
	case CodeUnprocessable:
		return "UNPROCESSABLE"
	case CodeOutcomeUnknown:
		return "OUTCOME_UNKNOWN"
	case CodeHistoryGone:
		return "GONE"
	case CodeTooMany:
		return "TOO_MANY_REQUESTS"
	case CodeUnavailable:
		return "UNAVAILABLE"
	default:
		return "INTERNAL_SERVER_ERROR"
	}
}

// RetryAfter returns the Retry-After header value (seconds) of answers
// with code c, "" for codes that do not invite a retry.
func (c Code) RetryAfter() string {
	switch c {
	case CodeTooMany:
		return "5"
	case CodeUnavailable:
		return "2"
	}
	return ""
}

// Error is the one error type whose message is safe to show a client.
type Error struct {
	Code    Code
	Message string
	// Retry, when not zero, is how long the client should wait before
	// retrying (the Retry-After of the answer); zero uses the code's.
	Retry time.Duration
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
	return ErrorCode(err).RetryAfter()
}

// Errorf returns an *Error with the given code and a formatted message. The
// message is shown to clients: never put SQL, file paths or secrets in it.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal when there is none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the client-safe message of err: the message of the
// first *Error in its chain, or a generic text for anything else.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// ErrStorageUnavailable is the error of a request or stream that Postgres
// could not serve because it cannot be reached (or is shutting down or
// starting): 503 with Retry-After; streams end with it, telling clients to
// reconnect and resume.
var ErrStorageUnavailable = Errorf(CodeUnavailable, "the database server is unavailable; retry shortly (streams: reconnect, resuming from the last event id)")

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
	case errors.As(err, &se):
		what := "malformed"
		if c, ok := strings.CutPrefix(se.Error(), "invalid character "); ok {
			if q, _, ok := strings.Cut(c, " "); ok {
				what = "an unexpected character " + q
			}
		}
		return Errorf(CodeInvalid, "invalid JSON: %s at byte %d", what, se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return Errorf(CodeInvalid, "invalid JSON: it ends before it is complete")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
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
