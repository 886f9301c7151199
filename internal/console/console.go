// Package console serves Sluice's console, a single-page application in
// which people see and change their data, schemas, streams, history,
// webhooks and users from a browser. Everything it is made of is embedded
// in the binary: Preact and htm, vendored from npm into assets/ by `make
// console-assets` (tools/console pins them), and the console's own page,
// scripts and stylesheet in web/. It talks to the daemon only through the
// public API (REST, GraphQL and the streams), with the credential the
// user signs in with, so it can do nothing its user could not do with
// curl.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/internal/webfiles"
)

//go:embed assets/*.js assets/LICENSES.txt web/*
var embedded embed.FS

// Path is where the console is served; every path below it that is not a
// file of AssetsPath is one of its views, served the same page, so that a
// view's URL survives a reload and can be shared.
const Path = "/console/"

// AssetsPath is where the page loads its scripts and stylesheet from.
const AssetsPath = Path + "_assets/"

// ContentSecurityPolicy is sent with the page and its files. Scripts,
// styles and connections may come only from the daemon itself, and the
// page may not be framed; no inline script or style is needed.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the console: its page for every view, and its files.
// Safe for concurrent use.
type Handler struct {
	files *webfiles.Files
}

// New returns a Handler.
func New() *Handler {
	sub := func(dir string) fs.FS {
		f, err := fs.Sub(embedded, dir)
		if err != nil { // the directory is embedded
			panic(err)
		}
		return f
	}
	return &Handler{files: webfiles.New(ContentSecurityPolicy, sub("assets"), sub("web"))}
}

// ServeHTTP answers GET and HEAD requests below Path: a file below
// AssetsPath, or else the page, index.html, which shows the view that
// the URL names. The page and files are the same for everyone and need
// no credentials: the user signs in on the page, and each request it
// makes to the API carries the credential.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if name, ok := strings.CutPrefix(r.URL.Path, AssetsPath); ok {
		if strings.Contains(name, "/") || !h.files.Serve(w, r, name) {
			http.NotFound(w, r)
		}
		return
	}
	h.files.Serve(w, r, "index.html")
}
