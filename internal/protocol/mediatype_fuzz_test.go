// The fast path of MediaRanges must say what mime.ParseMediaType says.

package protocol

import (
	"mime"
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
