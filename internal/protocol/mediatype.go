package protocol

import (
	"mime"
	"strconv"
	"strings"
)

// MediaRange is one entry of an Accept header: a media type and its
// quality.
type MediaRange struct {
	Type string
	Q    float64
}

// MediaRanges parses an Accept header, in order, skipping entries that do
// not parse. A missing or unparseable q counts as 1.
func MediaRanges(accept string) []MediaRange {
	var out []MediaRange
	for part := range strings.SplitSeq(accept, ",") {
		part = strings.TrimSpace(part)
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
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				q = f
			}
		}
		out = append(out, MediaRange{Type: mt, Q: q})
	}
	return out
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
