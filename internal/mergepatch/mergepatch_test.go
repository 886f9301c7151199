package mergepatch

import (
	"encoding/json"
	"reflect"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

// TestApply runs the examples of RFC 7396, appendix A.
func TestApply(t *testing.T) {
	t.Parallel()
	tests := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, tt := range tests {
		got := Apply(decode(t, tt.target), decode(t, tt.patch))
		if want := decode(t, tt.want); !reflect.DeepEqual(got, want) {
			t.Errorf("Apply(%s, %s) = %v, want %s", tt.target, tt.patch, got, tt.want)
		}
	}
}

// FuzzApply checks properties every merge patch has: applying a patch
// twice gives what applying it once gives, and an object patch leaves
// no null member it set.
func FuzzApply(f *testing.F) {
	f.Add(`{"a":{"b":1}}`, `{"a":{"b":null,"c":[1]},"d":null}`)
	f.Add(`[1]`, `{"x":{"y":null}}`)
	f.Fuzz(func(t *testing.T, target, patch string) {
		var tv, pv, tv2 any
		if json.Unmarshal([]byte(target), &tv) != nil || json.Unmarshal([]byte(patch), &pv) != nil {
			return
		}
		_ = json.Unmarshal([]byte(target), &tv2)
		once := Apply(tv, pv)
		var pv2 any
		_ = json.Unmarshal([]byte(patch), &pv2)
		twice := Apply(Apply(tv2, pv), pv2)
		if !reflect.DeepEqual(once, twice) {
			t.Fatalf("not idempotent: once %v, twice %v", once, twice)
		}
		if pm, ok := pv.(map[string]any); ok {
			om := once.(map[string]any)
			for k, v := range pm {
				if _, has := om[k]; v == nil && has {
					t.Fatalf("member %q set to null stays", k)
				}
			}
		}
	})
}
