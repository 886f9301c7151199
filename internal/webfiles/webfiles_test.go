package webfiles

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"
)

// TestServe: a file by its base name, gzip to clients that accept it,
// each encoding with its own ETag, 304 for a matching If-None-Match, the
// page's headers (its window of its own among them), and false (nothing written) for an unknown name.
func TestServe(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("export const x = 1;\n"), 200)
	f := New("default-src 'none'", fstest.MapFS{"dir/app.js": {Data: body}}, fstest.MapFS{"style.css": {Data: []byte("p{}")}})
	get := func(name string, header ...string) (*httptest.ResponseRecorder, bool) {
		r := httptest.NewRequest(http.MethodGet, "/"+name, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		return w, f.Serve(w, r, name)
	}
	plain, ok := get("app.js", "Accept-Encoding", "identity")
	if !ok || plain.Code != http.StatusOK || !bytes.Equal(plain.Body.Bytes(), body) {
		t.Fatalf("app.js: %v %d %d bytes", ok, plain.Code, plain.Body.Len())
	}
	for k, v := range map[string]string{
		"Content-Type": "text/javascript; charset=utf-8", "Content-Security-Policy": "default-src 'none'",
		"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache", "Content-Encoding": "",
		"Referrer-Policy": "no-referrer", "Cross-Origin-Opener-Policy": "same-origin",
	} {
		if got := plain.Header().Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	gz, _ := get("app.js", "Accept-Encoding", "gzip, br")
	if gz.Header().Get("Content-Encoding") != "gzip" || gz.Body.Len() >= len(body)/4 {
		t.Fatalf("gzip: %v, %d bytes", gz.Header(), gz.Body.Len())
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("gunzipped: %d bytes, %v", len(got), err)
	}
	pe, ge := plain.Header().Get("ETag"), gz.Header().Get("ETag")
	if pe == "" || ge == "" || pe == ge {
		t.Fatalf("ETags %q and %q", pe, ge)
	}
	if w, _ := get("app.js", "Accept-Encoding", "identity", "If-None-Match", pe); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("If-None-Match: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w, _ := get("style.css"); w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/css; charset=utf-8" {
		t.Errorf("style.css from the second directory: %d %v", w.Code, w.Header())
	}
	if w, ok := get("nope.js"); ok || w.Body.Len() != 0 || len(w.Header()) != 0 {
		t.Errorf("an unknown file: %v, %d bytes, %v", ok, w.Body.Len(), w.Header())
	}
}

// TestTwoFilesOfOneName: the files are served by base name, so two of
// one name are a mistake caught on first use.
func TestTwoFilesOfOneName(t *testing.T) {
	t.Parallel()
	f := New("", fstest.MapFS{"a/x.js": {}}, fstest.MapFS{"b/x.js": {}})
	defer func() {
		if recover() == nil {
			t.Error("no panic for two files named x.js")
		}
	}()
	f.Serve(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil), "x.js")
}

// TestServeKeepsVary: a Vary the CORS middleware set (the answer's
// Access-Control-Allow-Origin depends on Origin) is kept beside
// Accept-Encoding; it was overwritten, so a shared cache could give one
// origin's CORS answer to another.
func TestServeKeepsVary(t *testing.T) {
	t.Parallel()
	f := New("default-src 'none'", fstest.MapFS{"app.js": {Data: []byte("export const x = 1;\n")}})
	w := httptest.NewRecorder()
	w.Header().Add("Vary", "Origin")
	if !f.Serve(w, httptest.NewRequest(http.MethodGet, "/app.js", nil), "app.js") {
		t.Fatal("app.js not served")
	}
	if got := w.Header().Values("Vary"); len(got) != 2 || got[0] != "Origin" || got[1] != "Accept-Encoding" {
		t.Errorf("Vary: %q, want Origin and Accept-Encoding", got)
	}
}
