package rest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// maxErrorBytes bounds the message of an error that refuses a client's
// parameter or header: it names what is wrong and repeats at most a
// bounded part of the value (sluice.Echo, %.64q), whatever the value's
// length.
const maxErrorBytes = 1024

// checkRefusal fails t unless err is a client error (CodeInvalid) whose
// message is valid UTF-8 and within maxErrorBytes.
func checkRefusal(t *testing.T, what string, err error) {
	t.Helper()
	sh := sluice.Show(err)
	if sh.Code != sluice.CodeInvalid {
		t.Fatalf("%.200q: error %v is shown as %s, not %s", what, err, sh.Code, sluice.CodeInvalid)
	}
	if msg := sluice.ErrorMessage(err); len(msg) > maxErrorBytes || !utf8.ValidString(msg) {
		t.Fatalf("%.200q: error message of %d bytes (valid UTF-8: %t): %.200q", what, len(msg), utf8.ValidString(msg), msg)
	}
}

// FuzzQueryParams reads any query string as the REST routes read their
// parameters: the query is checked (query), then each parameter parsed as
// the routes do (limit, count, an integer, a flag, positions). Each is
// read or refused as a client error of bounded size, and a value read
// keeps the range it was checked for.
func FuzzQueryParams(f *testing.F) {
	for _, s := range []string{"", "limit=10", "limit=0", "limit=", "count=1001", "as_of=k3x9-42-7", "after=a-0-0-t", "x=1&x=2",
		"from=%ff", "to=a%00b", "limit=-1", "limit=99999999999999999999", "flag=maybe", "flag=TRUE", "n=007", "as_of=" + strings.Repeat("9", 300),
		"unknown=1", "a;b=1", "limit=1&count=2&n=3&flag=1&from=a-1-2&to=a-1-3&as_of=b-2-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.RawQuery = raw
		q, err := query(r, "limit", "count", "n", "flag", "from", "to", "as_of", "after")
		if err != nil {
			checkRefusal(t, raw, err)
			return
		}
		if n, err := boundedParam(q, "limit", 7, 1000); err != nil {
			checkRefusal(t, raw, err)
		} else if n < 1 || n > 1000 {
			t.Fatalf("%q: limit %d, outside 1 to 1000", raw, n)
		}
		if n, err := countParam(q); err != nil {
			checkRefusal(t, raw, err)
		} else if n < 1 || n > maxLogCount {
			t.Fatalf("%q: count %d, outside 1 to %d", raw, n, maxLogCount)
		}
		if n, err := intParam(q, "n", 3); err != nil {
			checkRefusal(t, raw, err)
		} else if n < 0 {
			t.Fatalf("%q: n %d < 0", raw, n)
		}
		if _, err := boolParam(q, "flag"); err != nil {
			checkRefusal(t, raw, err)
		}
		for _, name := range []string{"from", "to", "after"} {
			p, err := positionParam(q, name)
			switch {
			case err != nil:
				checkRefusal(t, raw, err)
			case p != nil && p.String() != q.Get(name):
				t.Fatalf("%q: %s %q read as %v, which prints as %q", raw, name, q.Get(name), p, p.String())
			}
		}
		if p, err := asOfParam(q); err != nil {
			checkRefusal(t, raw, err)
		} else if p != nil && p.String() != q.Get("as_of") {
			t.Fatalf("%q: as_of %q read as %v", raw, q.Get("as_of"), p)
		}
	})
}

// FuzzDatabasePath: a ticket's database is read as org/name or _system,
// or refused as a client error; what is read joins back to it.
func FuzzDatabasePath(f *testing.F) {
	for _, s := range []string{"admin/people", "_system", "a/b/c", "/x", "x/", "", "\xff/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		org, name, err := parseDatabasePath(s)
		if err != nil {
			checkRefusal(t, s, err)
			return
		}
		if s != sluice.SystemDB && org+"/"+name != s {
			t.Fatalf("%q read as %q / %q", s, org, name)
		}
	})
}

// FuzzConditionalHeaders reads any If-Match and If-None-Match values (none,
// one or two of each) as a write reads them (precondition), as a change
// of schema reads If-Match (schemaPrecondition), and as a read
// compares them (matchesETag, matchesStrongETag), and any Idempotency-Key
// values (engine.IdempotencyKeyOf). Each is read or refused as a client
// error of bounded size; a strong match is a weak match too; a version
// read from If-Match is the one the tag quotes; a key read is printable.
func FuzzConditionalHeaders(f *testing.F) {
	f.Add(`"3f"`, "", "", "", "", `"3f"`)
	f.Add(`*`, "", "", "", "k", `"3f"`)
	f.Add(`W/"3f"`, "", "", "", `"q\"k"`, `"3f-v"`)
	f.Add(`"3f-1a"`, `"3f"`, "", "", "a", `"3f-1a"`)
	f.Add("", "", "*", "", "\x00", `"x"`)
	f.Add("", "", `"3f"`, "*", strings.Repeat("k", 300), `"x"`)
	f.Add(`3f`, "", "", "", `""`, `"3f"`)
	f.Add(`"a", "b"`, "", `W/"a"`, "", "\"", `"a"`)
	f.Add("\"\xff\"", "", "", "", "\xff", "\"\xff\"")
	f.Fuzz(func(t *testing.T, im1, im2, inm1, inm2, key, tag string) {
		r := httptest.NewRequest(http.MethodPut, "/", nil)
		for _, h := range [][2]string{{"If-Match", im1}, {"If-Match", im2}, {"If-None-Match", inm1}, {"If-None-Match", inm2}} {
			if h[1] != "" {
				r.Header.Add(h[0], h[1])
			}
		}
		what := strings.Join([]string{im1, im2, inm1, inm2}, " | ")
		p, err := precondition(r)
		if err != nil {
			checkRefusal(t, what, err)
		} else if p.Version != "" {
			quoted := strings.TrimSpace(r.Header.Values("If-Match")[0])
			if !isEntityTag(quoted) || p.Version != sluice.VersionOfTag(quoted[1:len(quoted)-1]) {
				t.Fatalf("%s: If-Match read as version %q", what, p.Version)
			}
		}
		if v, err := schemaPrecondition(r); err != nil {
			checkRefusal(t, what, err)
		} else if v < 0 || (v > 0 && strings.TrimSpace(strings.Join(r.Header.Values("If-Match"), ",")) != schemaETag(v, sluice.RoleAdmin)) {
			t.Fatalf("%s: If-Match read as schema version %d", what, v)
		}
		for _, values := range [][]string{r.Header.Values("If-Match"), r.Header.Values("If-None-Match")} {
			if matchesStrongETag(values, tag) && !matchesETag(values, tag) {
				t.Fatalf("%q matches %q strongly, not weakly", values, tag)
			}
		}
		var keys []string
		if key != "" {
			keys = append(keys, key)
		}
		k, err := engine.IdempotencyKeyOf(keys)
		if err != nil {
			checkRefusal(t, key, err)
			return
		}
		if key != "" && k == "" {
			t.Fatalf("Idempotency-Key %q read as no key", key)
		}
		for i := range len(k) {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Fatalf("Idempotency-Key %q read as %q, not printable", key, k)
			}
		}
	})
}

// TestRefusalsEscapeBytesNotUTF8: a header value or a query parameter's
// name with bytes that are not UTF-8 (a header may carry them) is
// repeated with those bytes escaped, as sluice.Echo shows them, rather
// than as sent, which a JSON answer shows as U+FFFD. Found by
// FuzzConditionalHeaders and FuzzQueryParams.
func TestRefusalsEscapeBytesNotUTF8(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]string{
		"\xd2":       `If-Match: "\xd2" is not an entity tag: give a version in quotes`,
		"W/\"\xd2\"": `If-Match: "W/\"\xd2\"" is a weak entity tag (W/)`,
		`3f`:         `If-Match: 3f is not an entity tag: an entity tag is in quotes, "3f"`,
	} {
		r := httptest.NewRequest(http.MethodPut, "/", nil)
		r.Header.Set("If-Match", header)
		if _, err := precondition(r); !strings.HasPrefix(sluice.ErrorMessage(err), want) {
			t.Errorf("If-Match: %q: %v, want %s…", header, err, want)
		}
	}
	r := httptest.NewRequest(http.MethodPut, "/", nil)
	r.Header.Set("If-Match", "\"\xd2\"")
	if _, err := schemaPrecondition(r); !strings.HasPrefix(sluice.ErrorMessage(err), `If-Match: "\"\xd2\"" is not a schema version`) {
		t.Errorf("a schema's If-Match: %q: %v", r.Header.Get("If-Match"), err)
	}
	r = httptest.NewRequest(http.MethodGet, "/?%FF=%93", nil)
	if _, err := query(r, "from"); sluice.ErrorMessage(err) != `unknown query parameter "\xff" (allowed: [from])` {
		t.Errorf("?%%FF=%%93: %v", err)
	}
	// A value is repeated as every value is (sluice.Echo): its first 100
	// bytes, not 64 characters.
	long := strings.Repeat("a", 150) + "%FF"
	r = httptest.NewRequest(http.MethodGet, "/?from="+long, nil)
	want := `query parameter from="` + strings.Repeat("a", 100) + `"… (151 bytes): not valid UTF-8, or contains a NUL character`
	if _, err := query(r, "from"); sluice.ErrorMessage(err) != want {
		t.Errorf("?from=%s: %v", long, err)
	}
}
