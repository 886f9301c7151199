// Package graphiql serves the GraphiQL page of every database and the files
// it loads, all from the binary: React, GraphiQL and graphql-sse are the
// npm packages' browser builds vendored into assets/ by `make
// graphiql-assets` (tools/graphiql pins them), and web/ holds Sluice's own
// page, stylesheet and script. No request leaves for a CDN, so the page
// works offline and under a Content-Security-Policy that allows only the
// daemon itself.
package graphiql

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
)

//go:embed assets/*.js assets/*.css assets/LICENSES.txt web/*.js web/*.css
var files embed.FS

//go:embed web/page.html
var pageHTML string

//go:embed web/landing.html
var landingHTML string

// Docs is where the landing page sends readers for documentation: the
// repository's README and docs/.
const Docs = "https://github.com/sluice-dev/sluice"

// AssetsPath is where Handler.Assets is mounted: the page loads its
// scripts and styles from there.
const AssetsPath = "/api/graphiql/_assets/"

// ContentSecurityPolicy is sent with the page and its files. Scripts,
// styles and connections may come only from the daemon itself; GraphiQL's
// stylesheet inlines its fonts and icons as data: URLs, which load nothing
// from anywhere. No inline script or style is needed.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; font-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Options are what the pages show of the daemon and of the reader; nil
// functions show nothing.
type Options struct {
	// Version is the daemon's version.
	Version string
	// Databases returns the databases (org/name) the request's user may
	// read, and whether the user may read _system too.
	Databases func(r *http.Request) (dbs []string, system bool, err error)
	// Sample returns the query GraphiQL opens with on database org/name
	// for the request's user (see SampleQuery); "" for GraphiQL's own.
	Sample func(r *http.Request, org, name string) string
	// User returns the name and organization of the request's user.
	User func(r *http.Request) (name, org string)
}

// Handler serves the GraphiQL page (ServeHTTP), its files (Assets) and
// the landing page (Landing). Safe for concurrent use.
type Handler struct {
	opts    Options
	page    *template.Template
	landing *template.Template
	// assets is built on first use: hashing and compressing about 1.6 MB
	// is wasted on daemons (and tests) that never serve GraphiQL.
	assets func() map[string]*asset
}

// asset is one file with its precomputed validators and gzip encoding.
type asset struct {
	body, gzipped         []byte
	etag, gzipETag, ctype string
}

// New returns a Handler.
func New(opts Options) *Handler {
	return &Handler{
		opts:    opts,
		page:    template.Must(template.New("page").Parse(pageHTML)),
		landing: template.Must(template.New("landing").Parse(landingHTML)),
		assets:  sync.OnceValue(loadAssets),
	}
}

// ServeHTTP writes the GraphiQL page for the database named by the route
// parameters org and db, or for _system when the route has neither. The
// page talks to /api/graphql/{org}/{db}; it is served to any authenticated
// user (the GraphQL endpoint authorizes each request).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	org, name := chi.URLParam(r, "org"), chi.URLParam(r, "db")
	db := org + "/" + name
	if org == "" && name == "" {
		db = "_system"
	}
	sample := ""
	if h.opts.Sample != nil {
		if org == "" && name == "" {
			org, name = "_system", "_system"
		}
		sample = h.opts.Sample(r, org, name)
	}
	h.render(w, r, h.page, struct{ Database, Endpoint, Assets, Sample string }{db, "/api/graphql/" + db, AssetsPath, sample})
}

// Landing returns the handler of the landing page: what Sluice is, the
// databases the user may read, each a link to its GraphiQL page, and
// where the documentation is. Like GraphiQL's pages, it is served to
// authenticated users.
func (h *Handler) Landing() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data := struct {
			Version, User, Org, Origin, Assets, Docs string
			Databases                                []string
			System                                   bool
		}{Version: h.opts.Version, Origin: "http://" + r.Host, Assets: AssetsPath, Docs: Docs}
		if r.TLS != nil {
			data.Origin = "https://" + r.Host
		}
		if h.opts.User != nil {
			data.User, data.Org = h.opts.User(r)
		}
		if h.opts.Databases != nil {
			var err error
			if data.Databases, data.System, err = h.opts.Databases(r); err != nil {
				http.Error(w, "the databases could not be listed; retry", http.StatusServiceUnavailable)
				return
			}
		}
		h.render(w, r, h.landing, data)
	})
}

// render writes the page tmpl makes of data.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, tmpl *template.Template, data any) {
	var b bytes.Buffer
	if err := tmpl.Execute(&b, data); err != nil { // the templates are fixed and their data are strings
		panic(err)
	}
	header(w.Header(), "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b.Bytes()) // the client went away
	}
}

// Assets returns the handler of the page's files, at AssetsPath + name (the
// route parameter file). They are the same public files for everyone, so
// they need no credentials. Each has an ETag (browsers revalidate rather
// than download again) and is sent gzip-compressed to clients that accept
// it.
func (h *Handler) Assets() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := h.assets()[chi.URLParam(r, "file")]
		if a == nil {
			http.NotFound(w, r)
			return
		}
		hd := w.Header()
		header(hd, a.ctype)
		hd.Set("Cache-Control", "no-cache")
		hd.Set("Vary", "Accept-Encoding")
		// The two encodings are different representations, so each has
		// its own strong ETag.
		body, etag := a.body, a.etag
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			body, etag = a.gzipped, a.gzipETag
			hd.Set("Content-Encoding", "gzip")
		}
		hd.Set("ETag", etag)
		if etagMatch(r.Header.Get("If-None-Match"), etag) {
			hd.Del("Content-Encoding")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		hd.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(body) // the client went away
		}
	})
}

func header(h http.Header, ctype string) {
	h.Set("Content-Type", ctype)
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// loadAssets reads every embedded file, served by its base name.
func loadAssets() map[string]*asset {
	m := map[string]*asset{}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression) // the level is valid
		_, _ = zw.Write(body)                                   // a bytes.Buffer does not fail
		_ = zw.Close()
		tag := hex.EncodeToString(sum[:12])
		m[path.Base(p)] = &asset{body: body, gzipped: gz.Bytes(), etag: `"` + tag + `"`, gzipETag: `"` + tag + `-gzip"`, ctype: contentType(p)}
		return nil
	})
	if err != nil { // an embedded file system does not fail
		panic(err)
	}
	return m
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

// acceptsGzip reports whether an Accept-Encoding header accepts gzip: gzip
// (or *) is listed and its q is not 0.
func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.TrimSpace(coding)
		if !strings.EqualFold(coding, "gzip") && coding != "*" {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); strings.EqualFold(strings.TrimSpace(k), "q") && err == nil {
				q = f
			}
		}
		return q > 0
	}
	return false
}

// contentType returns the Content-Type of a file by its extension.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	default:
		return "text/plain; charset=utf-8"
	}
}
