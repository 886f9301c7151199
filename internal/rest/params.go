package rest

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// query checks that the request's query parameters are among allowed, each
// given at most once, so that a typo is an error rather than a silently
// ignored (and so widened) request. Values must be text (UTF-8 without
// NUL): anything else could never match and would fail in Postgres. A
// query whose text cannot be read is refused too (streamparam.Query),
// never read without the pair it mangles.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := streamparam.Query(r)
	if err != nil {
		return nil, err
	}
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok && len(allowed) == 0 {
			return nil, sluice.Errorf(sluice.CodeInvalid, "unknown query parameter %s: this route takes no query parameters", sluice.Echo(k))
		}
		if !ok {
			return nil, sluice.Errorf(sluice.CodeInvalid, "unknown query parameter %s (allowed: %v)", sluice.Echo(k), allowed)
		}
		if len(vs) > 1 {
			return nil, sluice.Errorf(sluice.CodeInvalid, "query parameter %s is given %d times", sluice.Echo(k), len(vs))
		}
		// Checked after k is known to be allowed, so that the message
		// shows k as the text it is: the name of an unknown parameter
		// may be any bytes, which a JSON answer would show as U+FFFD.
		if v := vs[0]; !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return nil, sluice.Errorf(sluice.CodeInvalid, "query parameter %s=%s: not valid UTF-8, or contains a NUL character", k, sluice.Echo(v))
		}
	}
	return q, nil
}

// noParams refuses every query parameter (query with none allowed)
// before next runs: for the routes that take none.
func noParams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := query(r); err != nil {
			writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// intParam parses parameter name as an integer ≥ 0, or returns def when it
// is absent.
func intParam(q url.Values, name string, def int64) (int64, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, sluice.Errorf(sluice.CodeInvalid, "query parameter %s=%s: want an integer ≥ 0", name, sluice.Echo(s))
	}
	return n, nil
}

// boundedParam parses parameter name as an integer from 1 to most, or
// returns def when it is absent; anything else is refused naming the range,
// an empty value too (a script's unset variable, not a page to default).
func boundedParam(q url.Values, name string, def, most int64) (int64, error) {
	if !q.Has(name) {
		return def, nil
	}
	s := q.Get(name)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > most {
		return 0, sluice.Errorf(sluice.CodeInvalid, "query parameter %s=%s: want an integer from 1 to %d", name, sluice.Echo(s), most)
	}
	return n, nil
}

// nameParam returns parameter name's value, "" when it is absent. Given
// empty it is refused: a script's unset variable (?type=$CLASS) would
// otherwise widen the answer to every class or document without a word.
func nameParam(q url.Values, name, want string) (string, error) {
	if q.Has(name) && q.Get(name) == "" {
		return "", sluice.Errorf(sluice.CodeInvalid, "query parameter %s is empty: give %s, or leave %s out", name, want, name)
	}
	return q.Get(name), nil
}

// boolParam parses parameter name as true/false, or returns false when it
// is absent.
func boolParam(q url.Values, name string) (bool, error) {
	s := q.Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, sluice.Errorf(sluice.CodeInvalid, "query parameter %s=%s: want true or false", name, sluice.Echo(s))
	}
	return b, nil
}

// dbPath returns the {org} and {db} path parameters.
func dbPath(r *http.Request) (string, string) {
	return chi.URLParam(r, "org"), chi.URLParam(r, "db")
}
