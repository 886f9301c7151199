package schema

import (
	"testing"
)

// TestValidateFlatTakesTheFastPath checks which documents the fast path
// reads itself; FuzzValidateJSON checks that what it reads is right.
func TestValidateFlatTakesTheFastPath(t *testing.T) {
	t.Parallel()
	s := mustParse(t, docSchema)
	for _, c := range []struct {
		doc  string
		fast bool
	}{
		{`{"@type":"Person","@id":"p1","name":"Ann","age":3,"score":1.5,"active":true,"nick":"a","color":"RED","pet":"Cat/tom"}`, true},
		{` {"name":"Ann","@type":"Person","age":null,"born":"2024-08-01T18:30:00Z","big":"12"} `, true},
		{`{"@type":"Person","name":"Zo\u00eb"}`, false},         // an escape
		{`{"@type":"Person","name":"Ann","friends":[]}`, false}, // an array
		{`{"@type":"Person","name":"Ann","name":"Bob"}`, false}, // a repeated key
		{`{"@type":"Person","name":"Ann","age":3.5}`, false},    // invalid
		{`{"@type":"Person"}`, false},                           // invalid
	} {
		_, fast := validateFlat(s, []byte(c.doc))
		if fast != c.fast {
			t.Errorf("%s: fast path %v, want %v", c.doc, fast, c.fast)
		}
	}
}
