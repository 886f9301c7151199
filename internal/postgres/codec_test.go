package postgres

import (
	"encoding/json"
	"testing"
)

// FuzzAppendJSONString checks the direct string encoder against
// encoding/json: stored images must not depend on which path ran.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `quote"`, `back\slash`, "tab\t", "<b>&amp;</b>", "é", "\u2028", "\x7f", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

func TestAppendJSONValueMatchesEncodingJSON(t *testing.T) {
	for _, v := range []any{"x", json.Number("-1.5e3"), json.Number(""), true, false, nil, []any{"a", json.Number("1")}, map[string]any{"k": "<v>"}, json.RawMessage(`{"a":1}`)} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendJSONValue(nil, v)
		if err != nil || string(got) != string(want) {
			t.Errorf("%#v: got %s (%v), want %s", v, got, err, want)
		}
	}
}
