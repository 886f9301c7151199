// Package webfiles serves the static files of Sluice's browser pages (the
// console's, GraphiQL's) from a file system embedded in the binary: each
// file by its base name, with a strong ETag per encoding (browsers
// revalidate rather than download again), gzip-compressed for clients
// that accept it, and the page's Content-Security-Policy.
package webfiles

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
)

// Files is a set of static files. Safe for concurrent use.
type Files struct {
	csp string
	// files is built on first use: hashing and compressing the files is
	// wasted on daemons (and tests) that never serve them.
	files func() map[string]*file
}

// file is one file with its precomputed validators and gzip encoding.
type file struct {
	body, gzipped         []byte
	etag, gzipETag, ctype string
}

// New returns the files of every file system of dirs, served by base name
// with csp as their Content-Security-Policy. Two files of one base name
// panic on first use: the embedded files are fixed at build time, and
// their package's tests serve them.
func New(csp string, dirs ...fs.FS) *Files {
	return &Files{csp: csp, files: sync.OnceValue(func() map[string]*file {
		m := map[string]*file{}
		for _, d := range dirs {
			load(d, m)
		}
		return m
	})}
}

// Serve writes the file named name (a base name) for a GET or HEAD
// request, or 304 Not Modified when the request's If-None-Match names its
// current ETag. It reports false, having written nothing, when there is no
// such file. The files are the same for everyone: Cache-Control no-cache
// makes browsers revalidate them on each use, so a new release is picked
// up at once.
func (f *Files) Serve(w http.ResponseWriter, r *http.Request, name string) bool {
	a := f.files()[name]
	if a == nil {
		return false
	}
	hd := w.Header()
	Header(hd, a.ctype, f.csp)
	hd.Set("Cache-Control", "no-cache")
	// Added, not set: the CORS middleware has already said the answer
	// varies by Origin, and a shared cache must keep that apart too.
	hd.Add("Vary", "Accept-Encoding")
	// The two encodings are different representations, so each has its
	// own strong ETag.
	body, etag := a.body, a.etag
	if acceptsGzip(r.Header.Values("Accept-Encoding")) {
		body, etag = a.gzipped, a.gzipETag
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("ETag", etag)
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		hd.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body) // the client went away
	}
	return true
}

// Header sets the headers every answer of a page or its files carries:
// its Content-Type and Content-Security-Policy, no MIME sniffing, no
// Referer to other sites, and a window of its own.
func Header(h http.Header, ctype, csp string) {
	h.Set("Content-Type", ctype)
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// A page of another origin that opens one of these pages (or that one
	// of them opens) gets no handle on its window: window.open returns a
	// closed window and window.opener is null, so it cannot navigate the
	// page, post messages to it or count its frames.
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// load adds every file of fsys to m, keyed by its base name.
func load(fsys fs.FS, m map[string]*file) {
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		name := path.Base(p)
		if m[name] != nil {
			return fmt.Errorf("two files named %s", name)
		}
		sum := sha256.Sum256(body)
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression) // the level is valid
		_, _ = zw.Write(body)                                   // a bytes.Buffer does not fail
		_ = zw.Close()
		tag := hex.EncodeToString(sum[:12])
		m[name] = &file{body: body, gzipped: gz.Bytes(), etag: `"` + tag + `"`, gzipETag: `"` + tag + `-gzip"`, ctype: ContentType(name)}
		return nil
	})
	if err != nil { // an embedded file system does not fail, and its names are fixed
		panic(err)
	}
}

// etagMatch reports whether an If-None-Match header lists etag (or is *).
func etagMatch(inm, etag string) bool {
	for _, t := range strings.Split(inm, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether Accept-Encoding (its field lines, which
// mean one list joined by commas) accepts gzip: gzip is listed with a q
// that is not 0, or, gzip not listed, * is (RFC 9110 section 12.5.3).
func acceptsGzip(values []string) bool {
	gzip, star := -1.0, -1.0 // their q; -1: not listed
	for _, ae := range values {
		for part := range strings.SplitSeq(ae, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.TrimSpace(coding)
			q := 1.0
			for p := range strings.SplitSeq(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); strings.EqualFold(strings.TrimSpace(k), "q") && err == nil {
					q = f
				}
			}
			switch {
			case strings.EqualFold(coding, "gzip") && gzip < 0:
				gzip = q
			case coding == "*" && star < 0:
				star = q
			}
		}
	}
	if gzip >= 0 {
		return gzip > 0
	}
	return star > 0
}

// ContentType returns the Content-Type of a file by its extension.
func ContentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".json":
		return "application/json"
	default:
		return "text/plain; charset=utf-8"
	}
}
