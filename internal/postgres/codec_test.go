package postgres

import (
	"encoding/json"
	"testing"

	"github.com/sluice-dev/sluice/internal/schema"
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
	for _, v := range []any{"x", json.Number("-1.5e3"), json.Number(""), true, false, nil, []any{"a", json.Number("1")}, map[string]any{"k": "<v>"}, json.RawMessage(`{"a":1}`), int64(-42), float64(0), 1.5, -1e-6, 1e-7, 1e20, 1e21, 123456789.125} {
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

// FuzzAppendJSONNumber checks the direct encoders of Int and Float values
// against encoding/json.
func FuzzAppendJSONNumber(f *testing.F) {
	f.Add(int64(0), 0.0)
	f.Add(int64(-1)<<63, 1e-7)
	f.Add(int64(90), 2.5e21)
	f.Fuzz(func(t *testing.T, i int64, x float64) {
		for _, v := range []any{i, x} {
			want, wantErr := json.Marshal(v)
			got, err := appendJSONValue(nil, v)
			if (err != nil) != (wantErr != nil) || string(got) != string(want) {
				t.Fatalf("%#v: got %s (%v), want %s (%v)", v, got, err, want, wantErr)
			}
		}
	})
}

// FuzzImageID checks that the id of a change without ids (migration 4) is
// read back from its after image, whatever characters it holds.
func FuzzImageID(f *testing.F) {
	for _, s := range []string{"Person/alice", `Person/"q"`, "Person/<&>", "Person/é\u2028", `Person/back\slash`, "Person/\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if id == "" {
			return // documents always have an id
		}
		image := append(appendJSONString([]byte(`{"@id":`), id), `,"@type":"Person","name":"x"}`...)
		got, err := imageID(image)
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		var want struct {
			ID string `json:"@id"`
		}
		if err := json.Unmarshal(image, &want); err != nil {
			t.Fatal(err)
		}
		if got != want.ID {
			t.Fatalf("%q: got %q, want %q", id, got, want.ID)
		}
	})
}

// FuzzRowImage feeds arbitrary row JSON, as another Postgres role may
// leave in a class table, to the conversion of SQL writes' row images:
// no panic, and what converts is a document image of the class that
// parses as JSON.
func FuzzRowImage(f *testing.F) {
	f.Add(`{"_id":"Person/a","_commit_uid":1,"name":"Ann","age":30,"tags":["x"],"born":"2024-01-01T10:00:00+01:00","big":12345678901234567890}`)
	f.Add(`{"_id":"Person/b","name":null,"age":"thirty","tags":{"a":1},"home":[1,2]}`)
	f.Add(`{"_id":7}`)
	f.Add(`[]`)
	s, err := schema.Parse(`type Address @subdocument { street: String }
type Person { name: String! age: Int score: Float tags: [String!] born: DateTime big: BigInt data: JSON home: Address friend: Person }`)
	if err != nil {
		f.Fatal(err)
	}
	c := s.Class("Person")
	f.Fuzz(func(t *testing.T, raw string) {
		img, _, err := rowImage(c, []byte(raw))
		if err != nil {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(img, &v); err != nil || v["@type"] != "Person" {
			t.Fatalf("image %s of row %s: %v", img, raw, err)
		}
	})
}
