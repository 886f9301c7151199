package doctest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/rest"
)

// routeRE finds a route the prose names, as `GET /api/db/{org}/{db}`.
var routeRE = regexp.MustCompile("`(GET|HEAD|POST|PUT|PATCH|DELETE) (/[^`\\s?]*)")

// TestDocRoutes checks that every route README.md and docs/*.md name in
// prose (`METHOD /path`) is one the router serves with that method: a
// {placeholder} or <placeholder> stands for any segment, a path ending in
// … or ... (or naming a route's first segments, `GET /api/schema`) for
// the routes that start with it. The curl examples are run by
// TestExamples; this covers the routes the text names. benchmarks.md is
// left out: it names the routes of the programs it measures.
func TestDocRoutes(t *testing.T) {
	t.Parallel()
	ok := http.NotFoundHandler()
	router := rest.Routes(rest.Deps{CORS: rest.NewCORS(nil), Metrics: metrics.New(),
		GraphQL: ok, GraphiQL: ok, GraphiQLAssets: ok, Console: ok, Landing: ok}).(chi.Routes)
	patterns := map[string][]string{} // method -> the route patterns it serves
	err := chi.Walk(router, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		patterns[method] = append(patterns[method], pattern)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range append(files, "../../README.md") {
		page := strings.TrimPrefix(f, "../../")
		if page == "docs/benchmarks.md" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range routeRE.FindAllStringSubmatch(string(b), -1) {
			checked++
			method, path := m[1], m[2]
			if method == http.MethodHead {
				method = http.MethodGet // served as the GET of its route
			}
			if !routeServed(router, patterns[method], method, path) {
				t.Errorf("%s: %s %s: no route serves it", page, m[1], path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no route named in the docs: is routeRE right?")
	}
}

// placeholderRE finds the placeholders of a path the docs name.
var placeholderRE = regexp.MustCompile(`\{[^}/]*\}|<[^>/]*>`)

// routeServed reports whether router serves method at the path the docs
// name, or, for a path ending in … or naming a route's first segments
// (without placeholders: a path with them names a whole route), whether
// one of patterns (those of method) starts with it.
func routeServed(router chi.Routes, patterns []string, method, path string) bool {
	prefix, cut := strings.CutSuffix(path, "…")
	if !cut {
		prefix, cut = strings.CutSuffix(path, "...")
	}
	if !cut {
		if router.Match(chi.NewRouteContext(), method, placeholderRE.ReplaceAllString(path, "x")) {
			return true
		}
		if placeholderRE.MatchString(path) {
			return false
		}
	}
	prefix = placeholderRE.ReplaceAllString(prefix, "x")
	prefix = strings.TrimSuffix(prefix, "/") + "/"
	for _, p := range patterns {
		if strings.HasPrefix(placeholderRE.ReplaceAllString(p, "x"), prefix) {
			return true
		}
	}
	return false
}
