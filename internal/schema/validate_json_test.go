package schema

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
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

// TestValidateJSONRefusesRepeatedMembers: a document that gives a member
// twice, at any depth and however it is spelled, is refused naming the
// member's path; encoding/json alone would keep the last.
func TestValidateJSONRefusesRepeatedMembers(t *testing.T) {
	t.Parallel()
	s := mustParse(t, docSchema)
	for _, c := range []struct{ doc, want string }{
		{`{"@type":"Person","name":"Ann","name":"Bob"}`, `invalid JSON: the member "name" is given twice (the second time at byte 31, counting from 0)`},
		{`{"@type":"Cat","@type":"Person","name":"Ann"}`, `the member "@type" is given twice`},
		{`{"@type":"Person","@id":"p1","@id":"p2","name":"Ann"}`, `the member "@id" is given twice`},
		{`{"@type":"Person","name":"Ann","n\u0061me":"Bob"}`, `the member "name" is given twice`},
		{`{"@type":"Person","name":"Ann","home":{"city":"X","city":"Y"}}`, `the member "home.city" is given twice`},
		{`{"@type":"Person","name":"Ann","homes":[{"city":"X"},{"city":"X","geo":{"lat":1,"lon":2,"lat":3}}]}`, `the member "homes[1].geo.lat" is given twice`},
	} {
		_, err := RawDocument{JSON: []byte(c.doc)}.Validate(s)
		if sluice.ErrorCode(err) != sluice.CodeInvalid || !strings.Contains(sluice.ErrorMessage(err), c.want) {
			t.Errorf("%s: error %v, want %q", c.doc, err, c.want)
		}
	}
}
