package protocol

import (
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// MediaRange is one entry of an Accept header: a media type and its
// quality.
type MediaRange struct {
	Type string
	Q    float64
}

// AcceptHeader returns the Accept header of h as one list: a client may
// send it as several field lines, which mean the same as one line joined
// with commas (RFC 9110 section 5.3); reading only the first would
// negotiate with part of what the client accepts.
func AcceptHeader(h http.Header) string {
	vs := h.Values("Accept")
	if len(vs) == 1 {
		return vs[0]
	}
	return strings.Join(vs, ", ")
}

// maxMediaRanges bounds the entries of an Accept header that are read,
// and maxMediaRangeBytes the length of one: a client lists a few media
// types (a browser about six), and the header is read before any
// credential, several times a request (its protocol, the shape of its
// answer). Read whole, 16 KiB of "a/b;q=0, " cost a megabyte of garbage
// and a millisecond of a core each time, two megabytes an anonymous
// request (TestLongAcceptHeadersCostLittle). Entries past them are read
// as if not listed.
const (
	maxMediaRanges     = 64
	maxMediaRangeBytes = 256
)

// MediaRanges parses an Accept header, in order, skipping entries that do
// not parse (and those longer than maxMediaRangeBytes), up to its first
// maxMediaRanges entries. A missing or unparseable q counts as 1; a q
// outside 0 to 1 is taken as the nearest of the two.
func MediaRanges(accept string) []MediaRange {
	var out []MediaRange
	entries := 0
	for part := range strings.SplitSeq(accept, ",") {
		if entries++; entries > maxMediaRanges {
			break
		}
		part = strings.TrimSpace(part)
		if len(part) > maxMediaRangeBytes {
			continue
		}
		if plainMediaType(part) { // what ParseMediaType returns, without its map
			out = append(out, MediaRange{Type: part, Q: 1})
			continue
		}
		mt, params, err := mime.ParseMediaType(part)
		if err != nil {
			continue
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) {
				q = min(max(f, 0), 1)
			}
		}
		out = append(out, MediaRange{Type: mt, Q: q})
	}
	return out
}

// Negotiate returns the one of offers (lower-case media types without
// parameters, in the server's order of preference) that an Accept header
// prefers, as RFC 9110 section 12.5.1 says: an offer's quality is the q
// of the most specific range that matches it (type/subtype, then type/*,
// then */*; the first of equally specific ones), and q=0 means not
// acceptable. Of offers of equal quality, the one whose range comes first
// in the header wins, then the first of offers: Accept: */* takes
// offers[0]. Parameters other than q are not compared: a range with them
// matches its type/subtype. A header that is empty or blank takes
// offers[0] (which must exist); ok is false when the header accepts none
// of offers (also when none of its entries parses).
func Negotiate(accept string, offers ...string) (offer string, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return offers[0], true
	}
	ranges := MediaRanges(accept)
	bestQ, bestAt := 0.0, len(ranges)
	for _, o := range offers {
		q, at := quality(ranges, o)
		if q > bestQ || q == bestQ && q > 0 && at < bestAt {
			offer, bestQ, bestAt = o, q, at
		}
	}
	return offer, bestQ > 0
}

// quality returns the q the ranges give the media type offer and the
// index of the range it comes from; 0 and len(ranges) when none matches.
func quality(ranges []MediaRange, offer string) (q float64, at int) {
	at, best := len(ranges), -1 // best: the specificity of ranges[at]
	for i, mr := range ranges {
		s := specificity(mr.Type, offer)
		if s > best {
			q, at, best = mr.Q, i, s
		}
	}
	return q, at
}

// specificity says how closely the media range r matches the media type
// t: 2 for the type itself, 1 for its type/*, 0 for */*, -1 when r does
// not match t.
func specificity(r, t string) int {
	switch {
	case r == t:
		return 2
	case r == "*/*":
		return 0
	case strings.HasSuffix(r, "/*") && strings.HasPrefix(t, r[:len(r)-1]):
		return 1
	}
	return -1
}

// plainMediaType reports whether s is a lower-case type/subtype without
// parameters, such as text/event-stream.
func plainMediaType(s string) bool {
	slash := strings.IndexByte(s, '/')
	if slash <= 0 || slash == len(s)-1 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case i == slash:
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '+', c == '*', c == '_':
		default:
			return false
		}
	}
	return true
}
