package doctest_test

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile("(?m)^#{1,6} (.+)$")
	fenceRE   = regexp.MustCompile("(?ms)^```.*?^```")
)

// anchor returns the id GitHub gives a heading: lower case, punctuation
// but - and _ dropped, spaces as -.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocLinks checks that every relative link of README.md and docs/*.md
// names a file of the repository, and every #fragment a heading of the
// page it points to: pages moved or sections renamed leave no dead link.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	anchors := map[string]map[string]bool{} // page (from the repository root) -> its anchors
	pages := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		page := strings.TrimPrefix(f, "../../")
		text := fenceRE.ReplaceAllString(string(b), "")
		pages[page] = text
		anchors[page] = map[string]bool{}
		for _, m := range headingRE.FindAllStringSubmatch(text, -1) {
			anchors[page][anchor(m[1])] = true
		}
	}
	for page, text := range pages {
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, frag, _ := strings.Cut(link, "#")
			if target == "" {
				target = page
			} else {
				target = path.Clean(path.Join(path.Dir(page), target))
				if _, err := os.Stat("../../" + target); err != nil {
					t.Errorf("%s: link %q: no file %s", page, link, target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if a, ok := anchors[target]; !ok {
				t.Errorf("%s: link %q: a fragment of a page that is not checked", page, link)
			} else if !a[frag] {
				t.Errorf("%s: link %q: %s has no heading with that anchor", page, link, target)
			}
		}
	}
}

func TestAnchor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"How writes work":                          "how-writes-work",
		"Memory of `/api/changes`":                 "memory-of-apichanges",
		"GraphQL over WebSocket (graphql-ws)":      "graphql-over-websocket-graphql-ws",
		"Apollo's multipart HTTP subscriptions":    "apollos-multipart-http-subscriptions",
		"Cross-site request forgery (CSRF)":        "cross-site-request-forgery-csrf",
		"Users, roles and tokens":                  "users-roles-and-tokens",
		"graphql-sse single connection mode":       "graphql-sse-single-connection-mode",
		"Extra subscriptions on one connection":    "extra-subscriptions-on-one-connection",
		"Fan-out: `BenchmarkStreams`":              "fan-out-benchmarkstreams",
		"Access that holds while a stream is open": "access-that-holds-while-a-stream-is-open",
	} {
		if got := anchor(in); got != want {
			t.Errorf("anchor(%q) = %q, want %q", in, got, want)
		}
	}
}
