// The fast path of MediaRanges must say what mime.ParseMediaType says.

package protocol

import (
	"mime"
	"slices"
	"strings"
	"testing"
)

func FuzzPlainMediaTypeAgreesWithMime(f *testing.F) {
	for _, s := range []string{"text/event-stream", "*/*", "application/json", "a/b/c", "/x", "x/", "Text/Plain", "a/b;q=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !plainMediaType(s) {
			return
		}
		mt, params, err := mime.ParseMediaType(s)
		if err != nil || mt != s || len(params) != 0 {
			t.Fatalf("%q: plain, but mime says %q %v %v", s, mt, params, err)
		}
	})
}

// FuzzNegotiate: whatever the header, Negotiate answers one of its offers
// or none, and an offer it answers has a q above 0 by some range.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{"text/*", "*/*;q=0.8, text/event-stream;q=0.8", "text/*;q=0.5, application/json;q=0.1", "a/b;q=1e400", ",,", "*/*;q=0"} {
		f.Add(s)
	}
	offers := []string{"application/json", MediaSSE, MediaNDJSON}
	f.Fuzz(func(t *testing.T, accept string) {
		got, ok := Negotiate(accept, offers...)
		if !ok {
			return
		}
		if !slices.Contains(offers, got) {
			t.Fatalf("%q: %q is no offer", accept, got)
		}
		if q, _ := quality(MediaRanges(accept), got); q <= 0 && strings.TrimSpace(accept) != "" {
			t.Fatalf("%q: %q has q %v", accept, got, q)
		}
	})
}
