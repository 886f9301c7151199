package sluice

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Code classifies an Error. Each code maps to one HTTP status and one GraphQL
// extensions.code (see HTTPStatus and GraphQLCode); the REST error body names
// it as "api:<Code>".
type Code string

// The error codes. Anything that is not an *Error is reported as CodeInternal
// with a generic message, so internal detail (SQL text, paths) never leaks.
const (
	CodeInvalid         Code = "BadRequest"       // malformed or invalid input
	CodeUnauthenticated Code = "NotAuthenticated" // no or wrong credentials
	CodeForbidden       Code = "Forbidden"        // authenticated, lacks access
	CodeNotFound        Code = "NotFound"         // the named thing does not exist
	CodeMethod          Code = "MethodNotAllowed" // HTTP method not allowed for the operation
	CodeConflict        Code = "Conflict"         // exists already, or a destructive change without force
	CodeGone            Code = "Gone"             // a stream position older than retained history or from another epoch
	CodeHistoryGone     Code = "HistoryGone"      // a read of the past at a position older than retained history
	CodeTooMany         Code = "TooManyRequests"  // a per-user limit is reached; retry later
	CodeUnavailable     Code = "Unavailable"      // shutting down, not ready, Postgres unreachable or at capacity
	CodeInternal        Code = "InternalError"    // a bug or an infrastructure failure
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
