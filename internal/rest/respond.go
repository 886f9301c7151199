package rest

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
)

// errorBody is the JSON shape of every REST error.
type errorBody struct {
	Status  string            `json:"api:status"`
	Error   map[string]string `json:"api:error"`
	Message string            `json:"api:message"`
	// Documents names, in a PreconditionFailed answer, the documents
	// that were not as the request expected.
	Documents []staleJSON `json:"api:documents,omitempty"`
}

// staleJSON is a document a conditional write did not find as expected,
// with its current version (null when it does not exist).
type staleJSON struct {
	ID      string  `json:"@id"`
	Version *string `json:"@version"`
}

// writeError answers with err's status and JSON body (sluice.Show, the
// one mapping of every transport), and logs it at its code's level:
// anything that is not a *sluice.Error is logged with its detail and
// shown as an internal error.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	sh := sluice.Show(err)
	logError(r, sh, "request failed", err)
	writeShown(w, err, sh)
}

// logError logs err, which sh shows, with the request's method and path,
// building that logger only when the level is enabled.
func logError(r *http.Request, sh sluice.Shown, msg string, err error) {
	if base := baseLogger(r.Context()); base.Enabled(r.Context(), sh.Level) {
		sh.Log(r.Context(), loggerFrom(r), msg, err)
	}
}

// writeErrorBody answers err (see writeError), without logging it.
func writeErrorBody(w http.ResponseWriter, err error) { writeShown(w, err, sluice.Show(err)) }

// writeShown answers with the status and JSON body of err as sh shows it.
func writeShown(w http.ResponseWriter, err error, sh sluice.Shown) {
	errorHeaders(w, sh)
	body := errorShape(sh)
	if stale, ok := errors.AsType[*sluice.StaleError](err); ok {
		for _, d := range stale.Docs {
			sj := staleJSON{ID: d.ID}
			if d.Version != "" {
				sj.Version = &d.Version
			}
			body.Documents = append(body.Documents, sj)
		}
		// The current version of the one document a conditional
		// request targeted, as a 412 gives it (RFC 9110); a request of
		// several documents has no one current version.
		if stale.OfOne && stale.Docs[0].Version != "" {
			w.Header().Set("ETag", etag(stale.Docs[0].Version, ""))
		}
	}
	writeJSON(w, sh.Code.HTTPStatus(), body)
}

// errorHeaders sets the headers an error answer carries whatever its
// body's shape: WWW-Authenticate on a 401 (HTTP requires it: it is what
// makes a browser ask for a user name and password), Retry-After on an
// answer that invites a retry.
func errorHeaders(w http.ResponseWriter, sh sluice.Shown) {
	// An error is shown, never saved as the file its answer would have
	// been (a listing that failed before its first document).
	w.Header().Del("Content-Disposition")
	if sh.Code == sluice.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Basic realm="sluice", charset="UTF-8"`)
	}
	if sh.RetryAfter != "" {
		w.Header().Set("Retry-After", sh.RetryAfter)
	}
}

// errorShape returns the REST error body of an error as sh shows it (the
// answer of a request, and the data of a change stream's error event).
func errorShape(sh sluice.Shown) errorBody {
	status := "api:failure"
	if sh.Code == sluice.CodeInternal || sh.Code == sluice.CodeUnavailable || sh.Code == sluice.CodeOutcomeUnknown {
		status = "api:server_error"
	}
	return errorBody{Status: status, Error: map[string]string{"@type": "api:" + string(sh.Code)}, Message: sh.Message}
}

// noSniff sets X-Content-Type-Options: nosniff on every answer: a
// browser takes each as the type its Content-Type says, never as what
// its bytes look like. The answers carry what writers wrote (documents,
// descriptions, commit messages), and the console's and GraphiQL's
// pages say so already (webfiles.Header).
func noSniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// downloadAs names the file a browser saves an answer as when it cannot
// show it (an SDL, NDJSON): the database's name with ext, the answer's
// type. Without it a browser names the file after the URL's last
// segment, the database's name, which may end in .bat or .cmd, and a
// database's writers choose what the answer holds: a link on Sluice's
// own address then saved a script of theirs (TestDownloadsAreNamedByTheirType).
func downloadAs(w http.ResponseWriter, db, ext string) {
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": db + ext}))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client went away; nothing to do
}

// success wraps a successful response's fields with "api:status".
func success(fields map[string]any) map[string]any {
	fields["api:status"] = "api:success"
	return fields
}

func errNotFoundRoute(r *http.Request) error {
	return sluice.Errorf(sluice.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path)
}

func errMethod(r *http.Request) error {
	return sluice.Errorf(sluice.CodeMethod, "method %s is not allowed on %s", r.Method, r.URL.Path)
}

type ctxKey int

const loggerKey ctxKey = 0

// WithLogger returns ctx with the logger requests log to. A server whose
// base context has the logger of Deps.Logger spares each request a copy
// (a stream keeps it for its whole life).
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey, l)
}

func userFrom(r *http.Request) *sluice.User { return auth.UserFrom(r.Context()) }

// loggerFrom returns the daemon's logger with the request's method and
// path.
func loggerFrom(r *http.Request) *slog.Logger {
	return requestLogger(r.Context(), r.Method, r.URL.Path)
}

// requestLogger is loggerFrom, from what it takes of a request.
func requestLogger(ctx context.Context, method, path string) *slog.Logger {
	return baseLogger(ctx).With("method", method, "path", path)
}

// baseLogger returns the daemon's logger (see WithLogger).
func baseLogger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}
