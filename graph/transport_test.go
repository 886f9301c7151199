package graph

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
)

// unread fails the test if the request body is read at all.
type unread struct{ t *testing.T }

func (u unread) Read([]byte) (int, error) {
	u.t.Error("the body was read")
	return 0, io.EOF
}

// TestReadParamsBodyLimit: a POST body is limited before it is read when
// its length is announced, while it is read when it is not (chunked), and
// a body of announced length is read whole.
func TestReadParamsBodyLimit(t *testing.T) {
	const limit = 64
	post := func(body io.Reader, length int64) *http.Request {
		r := httptest.NewRequest("POST", "/api/graphql/a/b", body)
		r.Header.Set("Content-Type", "application/json")
		r.ContentLength = length
		return r
	}
	// Named by its setting, graphql_max_body_bytes (it named
	// max_body_bytes, REST's, which does not change it).
	if _, err := ReadParams(post(unread{t}, limit+1), limit); sluice.ErrorCode(err).HTTPStatus() != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "the most graphql_max_body_bytes allows") {
		t.Fatalf("announced over the limit: %v", err)
	}
	big := `{"query":"` + strings.Repeat("x", limit) + `"}`
	if _, err := ReadParams(post(strings.NewReader(big), -1), limit); sluice.ErrorCode(err).HTTPStatus() != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked over the limit: %v", err)
	}
	ok := `{"query":"{ a }","variables":{"n":1}}`
	p, err := ReadParams(post(strings.NewReader(ok), int64(len(ok))), limit)
	if err != nil || p.Query != "{ a }" || p.Variables["n"] == nil {
		t.Fatalf("a body within the limit: %+v %v", p, err)
	}
	if _, err := ReadParams(post(strings.NewReader(ok), int64(len(ok))+5), limit); sluice.ErrorCode(err).HTTPStatus() != http.StatusBadRequest {
		t.Fatalf("a body shorter than announced: %v", err)
	}
	r := post(strings.NewReader(ok), int64(len(ok)))
	r.Header.Set("Content-Type", "application/json; charset=latin1")
	if _, err := ReadParams(r, limit); sluice.ErrorCode(err).HTTPStatus() != http.StatusUnsupportedMediaType {
		t.Fatalf("a latin1 body: %v", err)
	}
}

// TestParseRequestBodyErrors: what is wrong with a body is named.
func TestParseRequestBodyErrors(t *testing.T) {
	for body, want := range map[string]string{
		``:                                 "the request body is empty; send a JSON object with a query",
		`[1]`:                              "the request body is not a JSON object: expected a JSON object",
		`{"query":"{ a }"} {}`:             "the request body is not a JSON object: invalid JSON: an unexpected character '{' at byte 18 (counting from 0)",
		`{"operationName":"x"}`:            "the query parameter is missing",
		`{"query":1}`:                      "the query parameter must be a string",
		`{"query":"{ a }","variables":[]}`: "the variables parameter must be an object",
	} {
		if _, msg := ParseRequestBody([]byte(body)); msg != want {
			t.Errorf("%q: %q, want %q", body, msg, want)
		}
	}
}

// TestBodyValueLimit: a body is counted whole before its top level is
// decoded: members other than the parameters count too.
func TestBodyValueLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"query":"{ a }"`)
	for i := range 2*maxParamValues + 16 {
		fmt.Fprintf(&b, `,"%da":0`, i)
	}
	b.WriteString("}")
	if _, msg := ParseRequestBody([]byte(b.String())); !strings.Contains(msg, "the request body: it holds more than 100000 JSON values") {
		t.Errorf("a body of %d other members: %q", 2*maxParamValues+16, msg)
	}
	if _, msg := ParseRequestBody([]byte(`{"query":"{ a }","x":0}`)); msg != "" {
		t.Errorf("a body with another member: %q", msg)
	}
}

// TestParamsValueLimit: variables (and extensions) of more than
// maxParamValues JSON values are refused, naming the limit, before they
// are decoded, on every way a request sends them; a comma or bracket
// inside a string is not a value.
func TestParamsValueLimit(t *testing.T) {
	ids := func(n int) string {
		return `{"ids":[` + strings.TrimSuffix(strings.Repeat(`"",`, n), ",") + `]}`
	}
	for _, c := range []struct {
		vars string
		ok   bool
	}{
		{ids(maxParamValues - 2), true}, // the object, the array and the ids
		{ids(maxParamValues - 1), false},
		{`{"s":"` + strings.Repeat(`,[{`, maxParamValues) + `"}`, true},
		{`{"s":"\"` + strings.Repeat(`,`, maxParamValues) + `"}`, true},
	} {
		p, msg := ParseRequestBody([]byte(`{"query":"{ a }","variables":` + c.vars + `}`))
		if c.ok && (msg != "" || p.Variables == nil) {
			t.Errorf("variables of %d bytes within the limit: %q", len(c.vars), msg)
		}
		if !c.ok && !strings.Contains(msg, "the variables parameter: it holds more than 100000 JSON values") {
			t.Errorf("variables of %d bytes past the limit: %q", len(c.vars), msg)
		}
		if _, msg := ParseRequestBody([]byte(`{"query":"{ a }","extensions":` + c.vars + `}`)); c.ok == (msg != "") {
			t.Errorf("extensions of %d bytes: %q", len(c.vars), msg)
		}
		r := httptest.NewRequest("GET", "/api/graphql/a/b?query=%7B+a+%7D&variables="+url.QueryEscape(c.vars), nil)
		if _, err := ReadParams(r, 0); c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "variables: it holds more than") {
			t.Errorf("GET variables of %d bytes: %v", len(c.vars), err)
		}
	}
}

// TestJSONDocumentsStringsAreBounded: the documents a mutation gives as a
// JSON string are counted before they are decoded, over all the strings
// of a request, and refused past maxParamValues as variables are (a
// string variable is one value of the variables: a 7 MB one of empty
// objects decoded to 245 MB).
func TestJSONDocumentsStringsAreBounded(t *testing.T) {
	objects := func(n int) string { return "[" + strings.Repeat("{},", n-1) + "{}]" }
	values := 0
	// n objects in an array count 2n+1 values (jsonValues: each
	// object and comma).
	if docs, err := jsonDocuments(objects(maxParamValues/4), &values); err != nil || len(docs) != maxParamValues/4 {
		t.Fatalf("about half the bound: %d documents, %v", len(docs), err)
	}
	_, err := jsonDocuments(objects(maxParamValues/4), &values)
	if err == nil || !strings.Contains(err.Error(), "more than 100000 JSON values") {
		t.Fatalf("a second half, past the bound: %v, want the bound's error", err)
	}
	values = 0
	if _, err := jsonDocuments(map[string]any{"@type": "Note"}, &values); err != nil || values != 0 {
		t.Fatalf("an object (counted with the variables): %v, %d values", err, values)
	}
}

// TestRepeatedParamMembersRefused: variables (in a POST body or a GET's
// query string) that give a member twice are refused naming it, rather
// than decoded to the last.
func TestRepeatedParamMembersRefused(t *testing.T) {
	t.Parallel()
	_, _, msg := parseRequestBody([]byte(`{"query":"{ a }","variables":{"v":{"x":1,"x":2}}}`))
	if want := `the request body: invalid JSON: the member "variables.v.x" is given twice`; !strings.Contains(msg, want) {
		t.Errorf("POST body: %q, want %q", msg, want)
	}
	_, _, msg = parseRequestBody([]byte(`{"query":"{ a }","query":"{ b }"}`))
	if want := `the member "query" is given twice`; !strings.Contains(msg, want) {
		t.Errorf("POST body: %q, want %q", msg, want)
	}
	r := httptest.NewRequest("GET", "/?query=%7Ba%7D&variables="+url.QueryEscape(`{"v":1,"v":2}`), nil)
	_, _, err := getParams(r)
	if want := `variables: invalid JSON: the member "v" is given twice`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("GET: %v, want %q", err, want)
	}
}
