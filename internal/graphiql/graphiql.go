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

	"github.com/sluice-dev/sluice/internal/webfiles"
)

//go:embed assets/*.js assets/*.css assets/LICENSES.txt web/*.js web/*.css
var files embed.FS

//go:embed web/page.html
var pageHTML string

// AssetsPath is where Handler.Assets is mounted: the page loads its
// scripts and styles from there.
const AssetsPath = "/api/graphiql/_assets/"

// ContentSecurityPolicy is sent with the page and its files. Scripts,
// styles and connections may come only from the daemon itself; GraphiQL's
// stylesheet inlines its fonts and icons as data: URLs, which load nothing
// from anywhere. No inline script or style is needed.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; font-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the GraphiQL page (ServeHTTP) and its files (Assets).
// Safe for concurrent use.
type Handler struct {
	page  *template.Template
	files *webfiles.Files
}

// New returns a Handler.
func New() *Handler {
	return &Handler{
		page:  template.Must(template.New("page").Parse(pageHTML)),
		files: webfiles.New(ContentSecurityPolicy, files),
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
	var b bytes.Buffer
	err := h.page.Execute(&b, struct{ Database, Endpoint, Assets string }{db, "/api/graphql/" + db, AssetsPath})
	if err != nil { // the template is fixed and its data are strings
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
