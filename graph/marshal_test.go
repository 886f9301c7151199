package graph

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
)

// data writes a response's data as the executor does: strings with str,
// a JSON scalar with writeScalar, numbers and literals.
func data(strs []string, jsonValue json.RawMessage) json.RawMessage {
	w := &jsonWriter{}
	w.WriteByte('{')
	for i, s := range strs {
		w.key(s, i == 0)
		w.str(s)
	}
	w.key("j", len(strs) == 0)
	writeScalar(w, sluice.ScalarJSON, jsonValue)
	w.key("f", false)
	writeScalar(w, sluice.ScalarFloat, 1.5e300)
	w.key("n", false)
	w.null()
	w.WriteByte('}')
	return w.Bytes()
}

// TestMarshalResponseIsJSONMarshal: a response written by MarshalResponse
// has the bytes json.Marshal gives it (which checks, compacts and escapes
// the data), whatever its strings, JSON values, errors and extensions.
func TestMarshalResponseIsJSONMarshal(t *testing.T) {
	t.Parallel()
	yes := true
	strs := []string{"plain", `<script>alert("x") & 'y'</script>`, "tab\tnew\nline\r", "\x00\x1f\x7f", "\u2028\u2029", "bad \xff utf-8", "é 世界 🙂", `back\slash`}
	for _, resp := range []*graphql.Response{
		{Data: data(strs, json.RawMessage(`{ "a" : [1, 2,  3], "h": "<b>&amp;</b>" }`))},
		{Data: data(nil, json.RawMessage(`"\u003c already escaped"`)), Extensions: map[string]any{"position": "e-1-2", "version": "3"}},
		{Errors: gqlerror.List{{Message: "a <b> & c", Path: ast.Path{ast.PathName("Person"), ast.PathIndex(0)}, Extensions: map[string]any{"code": "FORBIDDEN", "data": nil}}},
			Data: data(strs[:2], json.RawMessage(`null`)), Extensions: map[string]any{"data": nil}},
		{Errors: gqlerror.List{{Message: "no data"}}},
		{Data: json.RawMessage(`{}`), Label: "l<", Path: ast.Path{ast.PathName("x")}, HasNext: &yes},
		{},
	} {
		sameAsJSONMarshal(t, resp)
	}
	// A JSON scalar that is not JSON is written as null (json.Marshal
	// would fail the whole response).
	w := &jsonWriter{}
	w.any(json.RawMessage(`{"a":`))
	if w.String() != "null" {
		t.Errorf("a broken JSON value: %s", w.String())
	}
}

// FuzzMarshalResponse: for any string, and any JSON value, the data a
// jsonWriter writes needs no pass of json.Marshal's.
func FuzzMarshalResponse(f *testing.F) {
	f.Add("<&>", `{"a": "<b>"}`)
	f.Add("\u2028\xff\x01", `[1, 2.50, "\u2029"]`)
	f.Fuzz(func(t *testing.T, s, j string) {
		if !json.Valid([]byte(j)) {
			j = "null"
		}
		sameAsJSONMarshal(t, &graphql.Response{Data: data([]string{s}, json.RawMessage(j)), Extensions: map[string]any{s: s}})
	})
}

// sameAsJSONMarshal fails t unless MarshalResponse gives resp the bytes
// json.Marshal gives it.
func sameAsJSONMarshal(t *testing.T, resp *graphql.Response) {
	t.Helper()
	want, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := MarshalResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("MarshalResponse:\n%s\njson.Marshal:\n%s", got, want)
	}
}
