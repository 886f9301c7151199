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
	"embed"
	"html/template"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/origin"
	"github.com/sluice-dev/sluice/internal/webfiles"
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
	files   *webfiles.Files
}

// New returns a Handler.
func New(opts Options) *Handler {
	return &Handler{
		opts:    opts,
		page:    template.Must(template.New("page").Parse(pageHTML)),
		landing: template.Must(template.New("landing").Parse(landingHTML)),
		files:   webfiles.New(ContentSecurityPolicy, files),
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
		}{Version: h.opts.Version, Origin: origin.Of(r), Assets: AssetsPath, Docs: Docs}
		if data.Origin == "" {
			// A Host origin.Of cannot normalize: shown as sent (the
			// template escapes it).
			data.Origin = "http://" + r.Host
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
	webfiles.Header(w.Header(), "text/html; charset=utf-8", ContentSecurityPolicy)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b.Bytes()) // the client went away
	}
}

// Assets returns the handler of the page's files, at AssetsPath + name (the
// route parameter file). They are the same public files for everyone, so
// they need no credentials; see webfiles for their validators and
// encodings.
func (h *Handler) Assets() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.files.Serve(w, r, chi.URLParam(r, "file")) {
			http.NotFound(w, r)
		}
	})
}
