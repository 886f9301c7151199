package rest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// Conditional and idempotent writes (RFC 9110 preconditions, the
// Idempotency-Key header).

// etag returns the strong entity tag of a document's version as view
// shows it (engine.ReadDocument.View; "": the whole document). Tags of
// one version differ by view, so that If-None-Match, which compares them
// whole, never makes a client (or its cache) reuse a body read under
// another role or another schema's protections; a write's If-Match takes
// the tag of any view (sluice.VersionOfTag).
func etag(version, view string) string {
	if view == "" {
		return `"` + version + `"`
	}
	return `"` + version + "-" + view + `"`
}

// privateAnswer marks an answer that depends on the request's credential
// and carries a validator (a document's ETag): only the client's own
// cache may keep it, kept apart for each credential, and must revalidate
// it before each use.
func privateAnswer(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "private, no-cache")
	w.Header().Add("Vary", "Authorization")
}

// precondition returns the precondition a write's If-Match or
// If-None-Match header gives: If-Match: "<version>" (a version as ETag
// gave it, of any view) or * (the document exists; only the unquoted * is the
// wildcard: "*" is a tag, which no version matches), or If-None-Match: *
// (the document must not exist). A weak tag (W/"…"), which never
// matches a write's strong comparison, a list of tags, another
// If-None-Match, or both headers are refused.
func precondition(r *http.Request) (sluice.Precondition, error) {
	im, inm := r.Header.Values("If-Match"), r.Header.Values("If-None-Match")
	switch {
	case len(im) > 0 && len(inm) > 0:
		return sluice.Precondition{}, sluice.Errorf(sluice.CodeInvalid, "give If-Match or If-None-Match, not both")
	case len(im) > 0:
		tag, err := oneTag("If-Match", im)
		if err != nil {
			return sluice.Precondition{}, err
		}
		if tag == "*" {
			return sluice.Precondition{Exists: true}, nil
		}
		if strings.HasPrefix(tag, "W/") {
			// A weak tag never matches a write's strong comparison, so
			// a 412 would send the edit-safely loop round for good (a
			// proxy that compresses answers weakens their ETags).
			return sluice.Precondition{}, sluice.Errorf(sluice.CodeInvalid, "If-Match: %s is a weak entity tag (W/), which never matches a write (RFC 9110 compares them strongly): send the ETag as Sluice answered it, without W/ (a proxy that compresses answers may have added it)", shownTag(tag))
		}
		return sluice.Precondition{Version: sluice.VersionOfTag(tag[1 : len(tag)-1])}, nil
	case len(inm) > 0:
		// Anything but * is refused as such, a tag or not: told its
		// value was not an entity tag, a client sending If-None-Match:
		// 3f quoted it, only to be refused again.
		if len(inm) > 1 || strings.TrimSpace(inm[0]) != "*" {
			return sluice.Precondition{}, sluice.Errorf(sluice.CodeInvalid, "If-None-Match on a write takes only *: write only if the document does not exist")
		}
		return sluice.Precondition{Absent: true}, nil
	}
	return sluice.Precondition{}, nil
}

// oneTag returns the one entity tag (or *) of header name's values.
func oneTag(name string, values []string) (string, error) {
	tag := strings.TrimSpace(values[0])
	if len(values) > 1 || strings.Contains(tag, ",") {
		return "", sluice.Errorf(sluice.CodeInvalid, "%s: give one entity tag (a version as ETag gave it, in quotes) or *", name)
	}
	if tag == "*" {
		return tag, nil
	}
	if !isEntityTag(strings.TrimPrefix(tag, "W/")) {
		return "", notEntityTag(name, tag)
	}
	return tag, nil
}

// isEntityTag reports whether tag is a strong entity tag as Sluice makes
// them: a version in quotes, without quotes or spaces inside.
func isEntityTag(tag string) bool {
	return len(tag) >= 3 && tag[0] == '"' && tag[len(tag)-1] == '"' && !strings.ContainsAny(tag[1:len(tag)-1], "\" \t")
}

// notEntityTag refuses tag, header name's value, showing it as sent: it
// was shown quoted (%q), so `If-Match: 3l` was answered `If-Match: "3l"
// is not an entity tag`, which looks like the quoted tag it asks for.
// A value that quotes would make a tag of is the usual mistake (a
// client that dropped ETag's quotes): the answer shows it quoted.
func notEntityTag(name, tag string) error {
	switch {
	case tag == "":
		return sluice.Errorf(sluice.CodeInvalid, "%s is empty: give a version in quotes, as ETag gave it, such as \"3f\", or *", name)
	case printable(tag) && !strings.HasPrefix(tag, "W/") && isEntityTag(`"`+tag+`"`):
		return sluice.Errorf(sluice.CodeInvalid, "%s: %.64s is not an entity tag: an entity tag is in quotes, \"%.64s\" (send the ETag as Sluice answered it, quotes included)", name, tag, tag)
	}
	return sluice.Errorf(sluice.CodeInvalid, "%s: %s is not an entity tag: give a version in quotes, as ETag gave it, such as \"3f\"", name, shownTag(tag))
}

// shownTag returns tag, a header's value, as an error repeats it: as
// sent (its first 64 characters) when it is printable text, else quoted
// with its other bytes escaped (sluice.Echo). A header may carry bytes
// that are not UTF-8 (RFC 9110's obs-text), which a JSON answer shows as
// U+FFFD, hiding the byte that is wrong.
func shownTag(tag string) string {
	if printable(tag) {
		return fmt.Sprintf("%.64s", tag)
	}
	return sluice.Echo(tag)
}

// printable reports whether s is UTF-8 text without control characters.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// matchesETag reports whether If-None-Match values match etag, the tag
// of what a conditional GET would answer: * or etag, weak or strong.
func matchesETag(values []string, etag string) bool {
	for _, v := range values {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
			if tag == "*" || tag == etag {
				return true
			}
		}
	}
	return false
}

// matchesStrongETag reports whether an If-Match header (values) of a GET
// names etag, the tag of what it would answer: * or etag, compared
// strongly, so a weak tag never matches.
func matchesStrongETag(values []string, etag string) bool {
	for _, v := range values {
		for _, tag := range strings.Split(v, ",") {
			if tag = strings.TrimSpace(tag); tag == "*" || tag == etag {
				return true
			}
		}
	}
	return false
}

// errNotModified is untaggedPrecondition's answer to If-None-Match:
// *, a 304.
var errNotModified = errors.New("not modified")

// listingPrecondition judges the If-Match and If-None-Match headers of a
// listing of documents, which has no entity tag (it is read anew each
// time, and its documents carry theirs): see untaggedPrecondition.
func listingPrecondition(r *http.Request) error {
	return untaggedPrecondition(r, "a listing")
}

// untaggedPrecondition judges the If-Match and If-None-Match headers of a
// GET of what (a listing, or a document read as of a position), which is
// there but has no entity tag: If-Match holds only with *, and
// If-None-Match: * never holds (RFC 9110, 13.1.1 and 13.1.2; a GET whose
// If-None-Match fails answers 304). Other tags of If-None-Match match
// nothing, and what is asked is read.
func untaggedPrecondition(r *http.Request, what string) error {
	if im := r.Header.Values("If-Match"); len(im) > 0 && !listsWildcard(im) {
		return sluice.Errorf(sluice.CodePrecondition, "%s has no entity tag, so the tags of If-Match name none of it: only * holds", what)
	}
	if listsWildcard(r.Header.Values("If-None-Match")) {
		return errNotModified
	}
	return nil
}

// listsWildcard reports whether a conditional header's values list *.
func listsWildcard(values []string) bool {
	for _, v := range values {
		for _, tag := range strings.Split(v, ",") {
			if strings.TrimSpace(tag) == "*" {
				return true
			}
		}
	}
	return false
}

// refuseIdempotencyKeys refuses, with 400, an Idempotency-Key on a write
// that cannot honour it: only document writes and GraphQL mutations
// record their answers (the others' retries are harmless, such as a
// second delete, or must not be answered again, such as a new token's
// secret). Ignoring the key would let a client believe its retry safe.
func refuseIdempotencyKeys(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if r.Header.Get("Idempotency-Key") != "" && !strings.HasPrefix(r.URL.Path, "/api/document/") && !strings.HasPrefix(r.URL.Path, "/api/graphql/") {
				refuse(w, r, sluice.Errorf(sluice.CodeInvalid, "Idempotency-Key is honoured by document writes (/api/document/…) and GraphQL mutations only; %s %s takes none", r.Method, r.URL.Path))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// requestHash hashes what a write request asks: its method, path, query,
// media type, conditional headers and body, so that a retry with the same
// Idempotency-Key is known to be the same request. Install replaces the
// request's body by one that hashes what is read of it.
type requestHash struct {
	h    hash.Hash
	body io.ReadCloser
	// max, when not 0, bounds what Sum drains of a body nobody read.
	max int64
}

// newRequestHash starts the hash of r and makes r's body feed it.
func newRequestHash(r *http.Request, maxBody int64) *requestHash {
	rh := &requestHash{h: sha256.New(), body: r.Body, max: maxBody}
	for _, part := range []string{r.Method, r.URL.Path, r.URL.Query().Encode(), mediaType(r),
		strings.Join(r.Header.Values("If-Match"), ","), strings.Join(r.Header.Values("If-None-Match"), ",")} {
		rh.h.Write([]byte(part))
		rh.h.Write([]byte{0})
	}
	r.Body = rh
	return rh
}

func (rh *requestHash) Read(p []byte) (int, error) {
	n, err := rh.body.Read(p)
	rh.h.Write(p[:n])
	return n, err
}

func (rh *requestHash) Close() error { return rh.body.Close() }

// Sum reads the rest of the body, if any, and returns the hash. A write
// that joins group commit calls it before (postgres.IdempotencyKey), so
// that the rest of a body sent slowly (what its handler has not read yet)
// holds up its own request alone.
func (rh *requestHash) Sum() ([]byte, error) {
	var rest io.Reader = rh
	if rh.max > 0 {
		rest = io.LimitReader(rh, rh.max+1)
	}
	n, err := io.Copy(io.Discard, rest)
	if err != nil {
		return nil, bodyError(err)
	}
	if rh.max > 0 && n > rh.max {
		return nil, errBodyTooLarge(rh.max)
	}
	return rh.h.Sum(nil), nil
}

// idempotency returns the Idempotency of a write request (nil without a
// key), hashing it as it is read. maxBody bounds a body that is drained
// only to be hashed (0: none, an NDJSON stream, bounded in time).
func idempotency(r *http.Request, maxBody int64) (*engine.Idempotency, error) {
	key, err := engine.IdempotencyKeyOf(r.Header.Values("Idempotency-Key"))
	if key == "" || err != nil {
		return nil, err
	}
	rh := newRequestHash(r, maxBody)
	return &engine.Idempotency{Key: key, Request: rh.Sum}, nil
}
