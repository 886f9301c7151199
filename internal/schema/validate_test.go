package schema

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
)

// docSchema is the schema the document tests validate against.
const docSchema = `
enum Color { RED GREEN }

type Address @subdocument {
  street: String
  city: String!
  tags: [String!]
  geo: Geo
}

type Geo @subdocument { lat: Float! lon: Float! }

interface Animal { name: String! }
type Dog implements Animal { owner: Person }

interface Pet @concrete { name: String! }
type Cat implements Pet { lives: Int }

type Person {
  name: String!
  nick: ID
  age: Int
  score: Float
  active: Boolean
  born: DateTime
  big: BigInt
  meta: JSON
  color: Color
  colors: [Color!]
  friends: [Person!]
  pet: Pet
  animal: Animal
  home: Address
  homes: [Address!]
  ssn: String @private
}

type Wide {
  ints: [Int]!
}
`

// decode decodes one JSON object the way the HTTP layer does.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

func TestValidateDocument(t *testing.T) {
	t.Parallel()
	s := mustParse(t, docSchema)
	tests := []struct {
		name string
		in   string
		id   string
		want map[string]any
	}{
		{"minimal", `{"@type":"Person","name":"Ann"}`, "", map[string]any{"name": "Ann"}},
		{"full id", `{"@type":"Person","@id":"Person/ann","name":"Ann"}`, "Person/ann", map[string]any{"name": "Ann"}},
		{"bare key", `{"@type":"Person","@id":"ann","name":"Ann"}`, "Person/ann", map[string]any{"name": "Ann"}},
		{"key with slash", `{"@type":"Person","@id":"Person/a/b","name":"A"}`, "Person/a/b", map[string]any{"name": "A"}},
		{"unicode key", `{"@type":"Person","@id":"Zoë-é_1.2:3","name":"Ann"}`, "Person/Zoë-é_1.2:3", map[string]any{"name": "Ann"}},
		{"null id", `{"@type":"Person","@id":null,"name":"Ann"}`, "", map[string]any{"name": "Ann"}},
		{"version", `{"@type":"Person","@id":"ann","@version":"3f","name":"Ann"}`, "Person/ann", map[string]any{"name": "Ann"}},
		{"null version", `{"@type":"Person","@version":null,"name":"Ann"}`, "", map[string]any{"name": "Ann"}},
		{"null optional is absent", `{"@type":"Person","name":"Ann","age":null,"home":null,"friends":null}`, "", map[string]any{"name": "Ann"}},
		{"empty string", `{"@type":"Person","name":""}`, "", map[string]any{"name": ""}},
		{"scalars", `{"@type":"Person","name":"Ann","nick":"a1","age":-42,"score":1.5e3,"active":false,"ssn":"123"}`, "",
			map[string]any{"name": "Ann", "nick": "a1", "age": int64(-42), "score": 1500.0, "active": false, "ssn": "123"}},
		{"int bounds", `{"@type":"Person","name":"A","age":2147483647}`, "", map[string]any{"name": "A", "age": int64(2147483647)}},
		{"int lower bound", `{"@type":"Person","name":"A","age":-2147483648}`, "", map[string]any{"name": "A", "age": int64(-2147483648)}},
		{"int with zero fraction", `{"@type":"Person","name":"A","age":3.000}`, "", map[string]any{"name": "A", "age": int64(3)}},
		{"negative zero int", `{"@type":"Person","name":"A","age":-0}`, "", map[string]any{"name": "A", "age": int64(0)}},
		{"float from integer", `{"@type":"Person","name":"A","score":7}`, "", map[string]any{"name": "A", "score": 7.0}},
		{"tiny float", `{"@type":"Person","name":"A","score":1e-400}`, "", map[string]any{"name": "A", "score": 0.0}},
		{"datetime utc", `{"@type":"Person","name":"A","born":"2024-08-01T16:00:00Z"}`, "", map[string]any{"name": "A", "born": "2024-08-01T16:00:00Z"}},
		{"datetime offset", `{"@type":"Person","name":"A","born":"2024-08-01T18:30:00.123456+02:30"}`, "",
			map[string]any{"name": "A", "born": "2024-08-01T16:00:00.123456Z"}},
		{"datetime nanosecond zeros", `{"@type":"Person","name":"A","born":"2024-08-01T16:00:00.123456000Z"}`, "",
			map[string]any{"name": "A", "born": "2024-08-01T16:00:00.123456Z"}},
		{"datetime trailing zeros", `{"@type":"Person","name":"A","born":"2024-08-01T16:00:00.500-00:00"}`, "",
			map[string]any{"name": "A", "born": "2024-08-01T16:00:00.5Z"}},
		{"bigint number", `{"@type":"Person","name":"A","big":123456789012345678901234567890}`, "",
			map[string]any{"name": "A", "big": "123456789012345678901234567890"}},
		{"bigint string", `{"@type":"Person","name":"A","big":"-000123"}`, "", map[string]any{"name": "A", "big": "-123"}},
		{"bigint zero", `{"@type":"Person","name":"A","big":"-0000"}`, "", map[string]any{"name": "A", "big": "0"}},
		{"bigint zero fraction", `{"@type":"Person","name":"A","big":-12.0}`, "", map[string]any{"name": "A", "big": "-12"}},
		{"json object", `{"@type":"Person","name":"A","meta":{"b": [1, 2.50, "<&>"], "a": null}}`, "",
			map[string]any{"name": "A", "meta": json.RawMessage(`{"a":null,"b":[1,2.50,"<&>"]}`)}},
		{"json numbers in plain form", `{"@type":"Person","name":"A","meta":{"n":[1E2,-0.0,1.0e-2,0e999,0.000e+1073741822,-1e-3,1.5e64]}}`, "",
			map[string]any{"name": "A", "meta": json.RawMessage(`{"n":[100,0.0,0.010,0,0,-0.001,15` + strings.Repeat("0", 63) + `]}`)}},
		{"json numbers at the limits of numeric", `{"@type":"Person","name":"A","meta":[1` + strings.Repeat("0", 131071) + `,-0.` + strings.Repeat("0", 16382) + `1]}`, "",
			map[string]any{"name": "A", "meta": json.RawMessage(`[1` + strings.Repeat("0", 131071) + `,-0.` + strings.Repeat("0", 16382) + `1]`)}},
		{"json scalar", `{"@type":"Person","name":"A","meta":"x"}`, "", map[string]any{"name": "A", "meta": json.RawMessage(`"x"`)}},
		{"json false", `{"@type":"Person","name":"A","meta":false}`, "", map[string]any{"name": "A", "meta": json.RawMessage(`false`)}},
		{"enum", `{"@type":"Person","name":"A","color":"GREEN","colors":["RED","RED"]}`, "",
			map[string]any{"name": "A", "color": "GREEN", "colors": []any{"RED", "RED"}}},
		{"references", `{"@type":"Person","name":"A","friends":["Person/b",{"@id":"Person/c"}],"pet":"Cat/tom","animal":"Dog/rex"}`, "",
			map[string]any{"name": "A", "friends": []any{"Person/b", "Person/c"}, "pet": "Cat/tom", "animal": "Dog/rex"}},
		{"reference with slash in key", `{"@type":"Person","name":"A","friends":["Person/a/b"]}`, "", map[string]any{"name": "A", "friends": []any{"Person/a/b"}}},
		{"reference to concrete parent", `{"@type":"Person","name":"A","pet":"Pet/p"}`, "", map[string]any{"name": "A", "pet": "Pet/p"}},
		{"empty list", `{"@type":"Person","name":"A","friends":[]}`, "", map[string]any{"name": "A", "friends": []any{}}},
		{"subdocument", `{"@type":"Person","name":"A","home":{"city":"Oslo","tags":["x"],"geo":{"lat":1,"lon":2.5}}}`, "",
			map[string]any{"name": "A", "home": map[string]any{"@type": "Address", "city": "Oslo", "tags": []any{"x"},
				"geo": map[string]any{"@type": "Geo", "lat": 1.0, "lon": 2.5}}}},
		{"subdocument with type", `{"@type":"Person","name":"A","homes":[{"@type":"Address","city":"Oslo","street":null}]}`, "",
			map[string]any{"name": "A", "homes": []any{map[string]any{"@type": "Address", "city": "Oslo"}}}},
		{"subclass document", `{"@type":"Cat","@id":"tom","name":"Tom","lives":9}`, "Cat/tom", map[string]any{"name": "Tom", "lives": int64(9)}},
		{"concrete parent document", `{"@type":"Pet","name":"P"}`, "", map[string]any{"name": "P"}},
		{"required empty list", `{"@type":"Wide","ints":[]}`, "", map[string]any{"ints": []any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := ValidateDocument(s, decode(t, tt.in))
			if err != nil {
				t.Fatalf("ValidateDocument: %v", err)
			}
			typ := decode(t, tt.in)["@type"]
			if v, _ := decode(t, tt.in)["@version"].(string); doc.Expect.Version != v {
				t.Errorf("expected version %q, want %q", doc.Expect.Version, v)
			}
			if doc.ID != tt.id || doc.Type != typ {
				t.Errorf("id, type = %q, %q; want %q, %q", doc.ID, doc.Type, tt.id, typ)
			}
			if !reflect.DeepEqual(doc.Fields, tt.want) {
				t.Errorf("fields:\n got %#v\nwant %#v", doc.Fields, tt.want)
			}
			// What ValidateDocument returns validates to itself.
			again, err := ValidateDocument(s, documentMap(doc))
			if err != nil {
				t.Fatalf("validating the result again: %v", err)
			}
			if !reflect.DeepEqual(again, doc) {
				t.Errorf("validating again changed it:\n got %#v\nwant %#v", again, doc)
			}
		})
	}
}

// documentMap returns doc as the raw map ValidateDocument takes.
func documentMap(doc *sluice.Document) map[string]any {
	m := map[string]any{"@type": doc.Type}
	if doc.ID != "" {
		m["@id"] = doc.ID
	}
	if doc.Expect.Version != "" {
		m["@version"] = doc.Expect.Version
	}
	for k, v := range doc.Fields {
		m[k] = v
	}
	return m
}

func TestValidateDocumentErrors(t *testing.T) {
	t.Parallel()
	s := mustParse(t, docSchema)
	long := strings.Repeat("k", 256)
	tests := []struct {
		name, in, want string
	}{
		// The document itself.
		{"no type", `{"name":"A"}`, `document has no "@type"`},
		{"null type", `{"@type":null}`, `document has no "@type"`},
		{"type not a string", `{"@type":3}`, `"@type" must be a string, got number 3`},
		{"unknown type", `{"@type":"Robot"}`, `invalid "@type": unknown class "Robot"`},
		{"abstract type", `{"@type":"Animal","name":"A"}`, `invalid "@type": class Animal is abstract and has no documents of its own`},
		{"subdocument type", `{"@type":"Address","city":"A"}`, `invalid "@type": class Address is a subdocument and exists only inside documents`},
		{"id not a string", `{"@type":"Person","@id":7,"name":"A"}`, `Person: "@id" must be a string, got number 7`},
		{"id of another class", `{"@type":"Person","@id":"Cat/tom","name":"A"}`, `Person: @id "Cat/tom" names class "Cat"; a Person id is Person/<key>`},
		{"id with unknown prefix", `{"@type":"Person","@id":"a/b","name":"A"}`, `Person: @id "a/b" names class "a"; a Person id is Person/<key>`},
		{"empty id", `{"@type":"Person","@id":"","name":"A"}`, `Person: invalid @id "": the key is empty`},
		{"empty key", `{"@type":"Person","@id":"Person/","name":"A"}`, `Person: invalid @id "Person/": the key is empty`},
		{"key with space", `{"@type":"Person","@id":"a b","name":"A"}`, `Person: invalid @id "a b": the key contains whitespace`},
		{"key with non-breaking space", "{\"@type\":\"Person\",\"@id\":\"a\u00a0b\",\"name\":\"A\"}", `Person: invalid @id "a\u00a0b": the key contains whitespace`},
		{"key with control", `{"@type":"Person","@id":"a\u0007b","name":"A"}`, `Person: invalid @id "a\ab": the key contains a control character`},
		{"long key", `{"@type":"Person","@id":"` + long + `","name":"A"}`, `Person: invalid @id "` + long[:64] + `"…: the key is longer than 255 bytes`},
		{"version not a string", `{"@type":"Person","@version":7,"name":"A"}`, `Person: "@version" must be a version string as Sluice gave it (or null), got number 7`},
		{"empty version", `{"@type":"Person","@version":"","name":"A"}`, `Person: "@version" must be a version string as Sluice gave it (or null), got string ""`},
		{"version in a subdocument", `{"@type":"Person","name":"A","home":{"@version":"a","city":"O"}}`, `Person: unknown key "home.@version": in a subdocument only "@type" starts with @`},
		{"unknown @ key", `{"@type":"Person","@context":"x","name":"A"}`, `Person: unknown key "@context": only "@id", "@type" and "@version" start with @`},
		{"unknown field", `{"@type":"Person","name":"A","nmae":"B"}`, `Person: unknown field "nmae": Person has no such field`},
		{"first unknown field in byte order", `{"@type":"Person","zz":1,"name":"A","b":2,"y":3}`, `Person: unknown field "b": Person has no such field`},
		{"missing required", `{"@type":"Person"}`, `Person: field "name": required field is missing`},
		{"null required", `{"@type":"Person","name":null}`, `Person: field "name": required field is null`},
		{"missing required list", `{"@type":"Wide"}`, `Wide: field "ints": required field is missing`},

		// Scalars.
		{"string from number", `{"@type":"Person","name":3}`, `Person: field "name": expected String, got number 3`},
		{"string from bool", `{"@type":"Person","name":true}`, `Person: field "name": expected String, got boolean true`},
		{"string from list", `{"@type":"Person","name":["A"]}`, `Person: field "name": expected String, got list`},
		{"string from object", `{"@type":"Person","name":{}}`, `Person: field "name": expected String, got object`},
		{"string with NUL", `{"@type":"Person","name":"a\u0000b"}`, `Person: field "name": string contains a NUL character (\u0000), which cannot be stored`},
		{"id from number", `{"@type":"Person","name":"A","nick":5}`, `Person: field "nick": expected ID, got number 5`},
		{"int from string", `{"@type":"Person","name":"A","age":"x"}`, `Person: field "age": expected Int (a whole number), got string "x"`},
		{"int from numeric string", `{"@type":"Person","name":"A","age":"3"}`, `Person: field "age": expected Int (a whole number), got string "3"`},
		{"int with fraction", `{"@type":"Person","name":"A","age":3.5}`, `Person: field "age": expected Int (a whole number), got number 3.5`},
		{"int with exponent", `{"@type":"Person","name":"A","age":3e0}`, `Person: field "age": expected Int (a whole number), got number 3e0`},
		{"int too big", `{"@type":"Person","name":"A","age":2147483648}`, `Person: field "age": number 2147483648 is out of Int range (-2147483648 to 2147483647)`},
		{"int too small", `{"@type":"Person","name":"A","age":-2147483649}`, `Person: field "age": number -2147483649 is out of Int range (-2147483648 to 2147483647)`},
		{"int huge", `{"@type":"Person","name":"A","age":` + strings.Repeat("9", 80) + `}`, `Person: field "age": number ` + strings.Repeat("9", 64) + `… is out of Int range (-2147483648 to 2147483647)`},
		{"float from string", `{"@type":"Person","name":"A","score":"1.5"}`, `Person: field "score": expected Float, got string "1.5"`},
		{"float overflow", `{"@type":"Person","name":"A","score":1e400}`, `Person: field "score": number 1e400 is out of Float range`},
		{"boolean from string", `{"@type":"Person","name":"A","active":"true"}`, `Person: field "active": expected Boolean, got string "true"`},
		{"boolean from number", `{"@type":"Person","name":"A","active":1}`, `Person: field "active": expected Boolean, got number 1`},
		{"datetime without zone", `{"@type":"Person","name":"A","born":"2024-08-01T16:00:00"}`, `Person: field "born": expected DateTime (RFC 3339, such as 2024-08-01T16:00:00Z), got string "2024-08-01T16:00:00"`},
		{"datetime date only", `{"@type":"Person","name":"A","born":"2024-08-01"}`, `Person: field "born": expected DateTime (RFC 3339, such as 2024-08-01T16:00:00Z), got string "2024-08-01"`},
		{"datetime bad month", `{"@type":"Person","name":"A","born":"2024-13-01T00:00:00Z"}`, `Person: field "born": expected DateTime (RFC 3339, such as 2024-08-01T16:00:00Z), got string "2024-13-01T00:00:00Z"`},
		{"datetime number", `{"@type":"Person","name":"A","born":1722528000}`, `Person: field "born": expected DateTime (RFC 3339, such as 2024-08-01T16:00:00Z), got number 1722528000`},
		{"datetime nanoseconds", `{"@type":"Person","name":"A","born":"2024-08-01T16:00:00.123456789Z"}`, `Person: field "born": DateTime "2024-08-01T16:00:00.123456789Z" is more precise than a microsecond, the most that is stored`},
		{"datetime year 0", `{"@type":"Person","name":"A","born":"0000-06-01T00:00:00Z"}`, `Person: field "born": DateTime "0000-06-01T00:00:00Z" is out of range (years 1 to 9999 in UTC)`},
		{"datetime past 9999 in UTC", `{"@type":"Person","name":"A","born":"9999-12-31T23:00:00-05:00"}`, `Person: field "born": DateTime "9999-12-31T23:00:00-05:00" is out of range (years 1 to 9999 in UTC)`},
		{"bigint fraction", `{"@type":"Person","name":"A","big":1.5}`, `Person: field "big": expected BigInt (a whole number or a string of decimal digits), got number 1.5`},
		{"bigint exponent", `{"@type":"Person","name":"A","big":1e30}`, `Person: field "big": expected BigInt (a whole number or a string of decimal digits), got number 1e30`},
		{"bigint bad string", `{"@type":"Person","name":"A","big":"12a"}`, `Person: field "big": expected BigInt (a whole number or a string of decimal digits), got string "12a"`},
		{"bigint plus", `{"@type":"Person","name":"A","big":"+1"}`, `Person: field "big": expected BigInt (a whole number or a string of decimal digits), got string "+1"`},
		{"bigint minus only", `{"@type":"Person","name":"A","big":"-"}`, `Person: field "big": expected BigInt (a whole number or a string of decimal digits), got string "-"`},
		{"bigint empty", `{"@type":"Person","name":"A","big":""}`, `Person: field "big": expected BigInt (a whole number or a string of decimal digits), got string ""`},
		{"bigint bool", `{"@type":"Person","name":"A","big":true}`, `Person: field "big": expected BigInt (a whole number or a string of decimal digits), got boolean true`},
		{"bigint too long", `{"@type":"Person","name":"A","big":"1` + strings.Repeat("0", maxBigIntDigits) + `"}`, `Person: field "big": BigInt has more than 131072 digits`},
		{"json number too large", `{"@type":"Person","name":"A","meta":{"a":[1e131072]}}`, `Person: field "meta": number 1e131072 is too large or too precise to store`},
		{"json number too large by mantissa", `{"@type":"Person","name":"A","meta":12.5e131071}`, `Person: field "meta": number 12.5e131071 is too large or too precise to store`},
		{"json number too precise", `{"@type":"Person","name":"A","meta":1e-16384}`, `Person: field "meta": number 1e-16384 is too large or too precise to store`},
		{"json number too precise by mantissa", `{"@type":"Person","name":"A","meta":0.12e-16382}`, `Person: field "meta": number 0.12e-16382 is too large or too precise to store`},
		{"json number too precise by trailing zeros", `{"@type":"Person","name":"A","meta":0.0120e-16380}`, `Person: field "meta": number 0.0120e-16380 is too large or too precise to store`},
		{"json zero too precise", `{"@type":"Person","name":"A","meta":0e-99999}`, `Person: field "meta": number 0e-99999 is too large or too precise to store`},
		{"json zero with huge exponent", `{"@type":"Person","name":"A","meta":0e1073741823}`, `Person: field "meta": number 0e1073741823 is too large or too precise to store`},
		{"json number huge exponent", `{"@type":"Person","name":"A","meta":1e-99999999999}`, `Person: field "meta": number 1e-99999999999 is too large or too precise to store`},
		{"json with NUL", `{"@type":"Person","name":"A","meta":{"a\u0000":1}}`, `Person: field "meta": string contains a NUL character (\u0000), which cannot be stored`},
		{"json with nested NUL", `{"@type":"Person","name":"A","meta":[{"a":["\u0000"]}]}`, `Person: field "meta": string contains a NUL character (\u0000), which cannot be stored`},

		// Enums, references, subdocuments, lists.
		{"enum unknown value", `{"@type":"Person","name":"A","color":"BLUE"}`, `Person: field "color": expected Color (one of RED, GREEN), got string "BLUE"`},
		{"enum lower case", `{"@type":"Person","name":"A","colors":["RED","red"]}`, `Person: field "colors[1]": expected Color (one of RED, GREEN), got string "red"`},
		{"enum number", `{"@type":"Person","name":"A","color":0}`, `Person: field "color": expected Color (one of RED, GREEN), got number 0`},
		{"reference number", `{"@type":"Person","name":"A","pet":3}`, `Person: field "pet": expected a reference to Pet ("Pet/<key>"), got number 3`},
		{"reference bare key", `{"@type":"Person","name":"A","pet":"tom"}`, `Person: field "pet": invalid id "tom": want Class/key`},
		{"reference wrong class", `{"@type":"Person","name":"A","pet":"Dog/rex"}`, `Person: field "pet": "Dog/rex": class Dog is neither Pet nor a subclass of it`},
		{"reference unknown class", `{"@type":"Person","name":"A","pet":"Robot/x"}`, `Person: field "pet": invalid id "Robot/x": unknown class "Robot"`},
		{"reference to abstract", `{"@type":"Person","name":"A","animal":"Animal/x"}`, `Person: field "animal": invalid id "Animal/x": class Animal is abstract and has no documents of its own`},
		{"reference to subdocument", `{"@type":"Person","name":"A","pet":"Address/x"}`, `Person: field "pet": invalid id "Address/x": class Address is a subdocument and exists only inside documents`},
		{"reference bad key", `{"@type":"Person","name":"A","friends":["Person/a b"]}`, `Person: field "friends[0]": invalid id "Person/a b": the key contains whitespace`},
		{"reference object extra key", `{"@type":"Person","name":"A","pet":{"@id":"Cat/t","name":"T"}}`, `Person: field "pet": a reference object has exactly one key, "@id"`},
		{"reference object no id", `{"@type":"Person","name":"A","pet":{}}`, `Person: field "pet": a reference object has exactly one key, "@id"`},
		{"reference object id number", `{"@type":"Person","name":"A","pet":{"@id":1}}`, `Person: field "pet": expected a reference to Pet ("Pet/<key>"), got number 1`},
		{"subdocument not an object", `{"@type":"Person","name":"A","home":"Oslo"}`, `Person: field "home": expected subdocument Address (an object), got string "Oslo"`},
		{"subdocument missing field", `{"@type":"Person","name":"A","home":{}}`, `Person: field "home.city": required field is missing`},
		{"subdocument bad field", `{"@type":"Person","name":"A","home":{"city":1}}`, `Person: field "home.city": expected String, got number 1`},
		{"subdocument unknown field", `{"@type":"Person","name":"A","home":{"city":"O","zip":"1"}}`, `Person: unknown field "home.zip": Address has no such field`},
		{"subdocument wrong type", `{"@type":"Person","name":"A","home":{"@type":"Geo","city":"O"}}`, `Person: field "home": "@type" must be "Address", got string "Geo"`},
		{"subdocument type number", `{"@type":"Person","name":"A","home":{"@type":1,"city":"O"}}`, `Person: field "home": "@type" must be "Address", got number 1`},
		{"subdocument with id", `{"@type":"Person","name":"A","home":{"@id":"x","city":"O"}}`, `Person: field "home": a subdocument has no "@id"`},
		{"subdocument unknown @ key", `{"@type":"Person","name":"A","home":{"@x":1,"city":"O"}}`, `Person: unknown key "home.@x": in a subdocument only "@type" starts with @`},
		{"nested subdocument", `{"@type":"Person","name":"A","homes":[{"city":"O"},{"city":"P","geo":{"lat":1}}]}`, `Person: field "homes[1].geo.lon": required field is missing`},
		{"nested list element", `{"@type":"Person","name":"A","homes":[{"city":"O","tags":["a",2]}]}`, `Person: field "homes[0].tags[1]": expected String, got number 2`},
		{"list not an array", `{"@type":"Person","name":"A","friends":"Person/b"}`, `Person: field "friends": expected a list of Person, got string "Person/b"`},
		{"list null element", `{"@type":"Person","name":"A","friends":["Person/b",null]}`, `Person: field "friends[1]": list elements cannot be null`},
		{"list of ints bad element", `{"@type":"Wide","ints":[1,"2"]}`, `Wide: field "ints[1]": expected Int (a whole number), got string "2"`},
		{"long string quoted short", `{"@type":"Person","name":"A","age":"` + strings.Repeat("x", 100) + `"}`, `Person: field "age": expected Int (a whole number), got string "` + strings.Repeat("x", 64) + `"…`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := ValidateDocument(s, decode(t, tt.in))
			if err == nil {
				t.Fatalf("ValidateDocument succeeded: %+v", doc)
			}
			if code := sluice.ErrorCode(err); code != sluice.CodeInvalid {
				t.Errorf("code = %s, want %s", code, sluice.CodeInvalid)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestValidateDocumentGoValues checks the Go values a caller may pass besides
// what json.Decoder.UseNumber makes, and invalid ones.
func TestValidateDocumentGoValues(t *testing.T) {
	t.Parallel()
	s := mustParse(t, docSchema)
	tests := []struct {
		name  string
		field string
		in    any
		want  any    // when err is ""
		err   string // the error message
	}{
		{"float64 int", "age", float64(7), int64(7), ""},
		{"float64 large int", "age", float64(1234567), int64(1234567), ""},
		{"float64 bigint", "big", 1e20, "100000000000000000000", ""},
		{"float64 huge bigint", "big", 1e21, nil, `Person: field "big": expected BigInt (a whole number or a string of decimal digits), got number 1e+21`},
		{"float64 NaN", "score", math.NaN(), nil, `Person: field "score": expected Float, got float64`},
		{"int", "age", 7, int64(7), ""},
		{"int64", "age", int64(-7), int64(-7), ""},
		{"float64 fraction int", "age", 7.5, nil, `Person: field "age": expected Int (a whole number), got number 7.5`},
		{"float64 float", "score", 0.1, 0.1, ""},
		{"int float", "score", 3, 3.0, ""},
		{"bad json.Number", "score", json.Number("1_0"), nil, `Person: field "score": expected Float, got json.Number`},
		{"json.Number hex", "age", json.Number("0x10"), nil, `Person: field "age": expected Int (a whole number), got json.Number`},
		{"int64 bigint", "big", int64(1) << 62, "4611686018427387904", ""},
		{"raw json", "meta", json.RawMessage(` { "b" : 1 , "a" : [ ] } `), json.RawMessage(`{"a":[],"b":1}`), ""},
		{"raw json malformed", "meta", json.RawMessage(`{"a"`), nil, `Person: field "meta": expected JSON, got malformed JSON text`},
		{"raw json two values", "meta", json.RawMessage(`1 2`), nil, `Person: field "meta": expected JSON, got malformed JSON text`},
		{"raw json null", "meta", json.RawMessage(`null`), nil, `Person: field "meta": expected JSON, got null; leave the field out instead`},
		{"json from Go value", "meta", map[string]any{"x": []any{true, int64(2)}}, json.RawMessage(`{"x":[true,2]}`), ""},
		{"json unencodable", "meta", map[string]any{"x": make(chan int)}, nil, `Person: field "meta": expected JSON, got a value JSON cannot encode`},
		{"invalid utf-8", "name", "a\xffb", nil, `Person: field "name": string is not valid UTF-8`},
		{"unknown Go type", "name", struct{}{}, nil, `Person: field "name": expected String, got struct {}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw := map[string]any{"@type": "Person", "name": "A"}
			raw[tt.field] = tt.in
			doc, err := ValidateDocument(s, raw)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || sluice.ErrorCode(err) != sluice.CodeInvalid {
					t.Fatalf("error = %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ValidateDocument: %v", err)
			}
			if got := doc.Fields[tt.field]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

// TestValidateDocumentUnknownScalar checks that a schema built by hand with
// a scalar Parse never makes is reported as a bug, not as bad input.
func TestValidateDocumentUnknownScalar(t *testing.T) {
	t.Parallel()
	s := &sluice.Schema{Classes: map[string]*sluice.Class{"T": {Name: "T", Fields: []*sluice.Field{
		{Name: "x", Type: sluice.FieldType{Kind: sluice.TypeScalar, Name: "Decimal"}, ReadRole: sluice.RoleRead},
	}}}, Order: []string{"T"}}
	_, err := ValidateDocument(s, map[string]any{"@type": "T", "x": "1"})
	if err == nil || sluice.ErrorCode(err) != sluice.CodeInternal {
		t.Fatalf("error = %v (code %s), want an internal error", err, sluice.ErrorCode(err))
	}
}

func TestParseID(t *testing.T) {
	t.Parallel()
	s := mustParse(t, docSchema)
	tests := []struct {
		id, class, key, err string
	}{
		{id: "Person/ann", class: "Person", key: "ann"},
		{id: "Cat/" + strings.Repeat("k", 255), class: "Cat", key: strings.Repeat("k", 255)},
		{id: "Pet/x", class: "Pet", key: "x"},
		{id: "ann", err: `invalid id "ann": want Class/key`},
		{id: "", err: `invalid id "": want Class/key`},
		{id: "/x", err: `invalid id "/x": unknown class ""`},
		{id: "Person/", err: `invalid id "Person/": the key is empty`},
		{id: "Person/a/b", class: "Person", key: "a/b"},
		{id: "Person//", class: "Person", key: "/"},
		{id: "Person/a\tb", err: `invalid id "Person/a\tb": the key contains whitespace`},
		{id: "Person/a\x7fb", err: `invalid id "Person/a\x7fb": the key contains a control character`},
		{id: "Person/a\xffb", err: `invalid id "Person/a\xffb": the key is not valid UTF-8`},
		{id: "Person/" + strings.Repeat("k", 256), err: `invalid id "Person/` + strings.Repeat("k", 57) + `"…: the key is longer than 255 bytes`},
		{id: "Animal/x", err: `invalid id "Animal/x": class Animal is abstract and has no documents of its own`},
		{id: "Geo/x", err: `invalid id "Geo/x": class Geo is a subdocument and exists only inside documents`},
	}
	for _, tt := range tests {
		class, key, err := ParseID(s, tt.id)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err || sluice.ErrorCode(err) != sluice.CodeInvalid {
				t.Errorf("ParseID(%q) error = %v, want %s", tt.id, err, tt.err)
			}
			continue
		}
		if err != nil || class != tt.class || key != tt.key {
			t.Errorf("ParseID(%q) = %q, %q, %v; want %q, %q", tt.id, class, key, err, tt.class, tt.key)
		}
	}
}

// TestValidateDocumentJSONRoundTrip checks that a validated document encodes
// as JSON: json.RawMessage values embed as they are.
func TestValidateDocumentJSONRoundTrip(t *testing.T) {
	t.Parallel()
	s := mustParse(t, docSchema)
	doc, err := ValidateDocument(s, decode(t, `{"@type":"Person","name":"A","meta":{"k":[1,"<"]},"home":{"city":"O"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc.Fields); err != nil {
		t.Fatal(err)
	}
	want := `{"home":{"@type":"Address","city":"O"},"meta":{"k":[1,"<"]},"name":"A"}` + "\n"
	if buf.String() != want {
		t.Errorf("got %s want %s", buf.String(), want)
	}
}

// TestValidateDocumentDepth: a document may nest objects and arrays
// MaxDepth levels deep, its own object counted, through JSON values and
// subdocuments alike; one level more is refused, naming the bound.
func TestValidateDocumentDepth(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `type Doc { data: JSON home: Home }
		type Home @subdocument { inner: Home n: Int }`)
	nested := func(levels int) string { // levels of arrays around 1
		return strings.Repeat("[", levels) + "1" + strings.Repeat("]", levels)
	}
	home := func(levels int) string { // levels of subdocuments
		return strings.Repeat(`{"inner":`, levels-1) + `{"n":1}` + strings.Repeat("}", levels-1)
	}
	for _, c := range []struct {
		doc string
		ok  bool
	}{
		{`{"@type":"Doc","data":` + nested(MaxDepth-1) + `}`, true},
		{`{"@type":"Doc","data":` + nested(MaxDepth) + `}`, false},
		{`{"@type":"Doc","data":{"s":"[[[[[[[[[[[[[[[[[[[[\"]]","x":` + nested(MaxDepth-2) + `}}`, true},
		{`{"@type":"Doc","home":` + home(MaxDepth-1) + `}`, true},
		{`{"@type":"Doc","home":` + home(MaxDepth) + `}`, false},
	} {
		var raw map[string]any
		if err := json.Unmarshal([]byte(c.doc), &raw); err != nil {
			t.Fatal(err)
		}
		_, err := ValidateDocument(s, raw)
		if c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "nests deeper than 512 levels") {
			t.Errorf("%.60s…: %v", c.doc, err)
		}
	}
}

// TestValidateDocumentValues: a document may hold MaxValues values in its
// fields, counted at any depth through lists, subdocuments (their "@type"
// too) and JSON values; one more is refused, naming the bound.
func TestValidateDocumentValues(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `type Doc { xs: [Int!] data: JSON home: Home name: String }
		type Home @subdocument { n: Int }`)
	zeros := func(n int) string { // a list of n zeros
		return "[" + strings.TrimSuffix(strings.Repeat("0,", n), ",") + "]"
	}
	for _, c := range []struct {
		doc string
		ok  bool
	}{
		// The list and its elements.
		{`{"@type":"Doc","xs":` + zeros(MaxValues-1) + `}`, true},
		{`{"@type":"Doc","xs":` + zeros(MaxValues) + `}`, false},
		// A JSON value, with nulls and empty containers, the same.
		{`{"@type":"Doc","data":[null,{},[],` + zeros(MaxValues - 4)[1:] + `}`, true},
		{`{"@type":"Doc","data":[null,{},[],` + zeros(MaxValues - 3)[1:] + `}`, false},
		// Every field counts: name, home, its "@type" and n, xs.
		{`{"@type":"Doc","name":"a","home":{"n":1},"xs":` + zeros(MaxValues-5) + `}`, true},
		{`{"@type":"Doc","name":"a","home":{"n":1},"xs":` + zeros(MaxValues-4) + `}`, false},
	} {
		var raw map[string]any
		dec := json.NewDecoder(strings.NewReader(c.doc))
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		_, err := ValidateDocument(s, raw)
		if c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "more than 1000000, the most a document may") {
			t.Errorf("%.60s…: %v", c.doc, err)
		}
	}
}

// TestValidateDocumentNumberGrowth: the numbers of a document's JSON
// values, read back from Postgres in plain decimal form (1e131000 is
// 131,001 digits), may be at most MaxNumberGrowth bytes longer than
// written, summed over the document's fields at any depth: 9 KB of
// 1e131000 read back as 131 MB, and four such reads took the daemon to
// 2.3 GB. One byte more is refused, naming the field where the sum passes
// the bound.
func TestValidateDocumentNumberGrowth(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `type Doc { data: JSON home: Home }
		type Home @subdocument { meta: [JSON!] }`)
	huge := func(n int) string { // n numbers that grow by 130,993 bytes each
		return "[" + strings.TrimSuffix(strings.Repeat("1e131000,", n), ",") + "]"
	}
	const each = 131001 - len("1e131000")
	fits := MaxNumberGrowth / each
	for _, c := range []struct {
		doc, err string
	}{
		{`{"@type":"Doc","data":` + huge(fits) + `}`, ""},
		{`{"@type":"Doc","data":` + huge(fits+1) + `}`, `Doc: field "data": `},
		{`{"@type":"Doc","data":` + huge(fits-1) + `,"home":{"meta":[1,` + huge(1) + `]}}`, ""},
		{`{"@type":"Doc","data":` + huge(fits) + `,"home":{"meta":[1,` + huge(1) + `]}}`, `Doc: field "home.meta[1]": `},
		// Numbers that grow less are counted too: 1e-300 is 302 bytes.
		{`{"@type":"Doc","data":{"a":` + huge(fits) + `,"b":[1e-300,1e-300]}}`, ""},
		{`{"@type":"Doc","data":{"a":` + huge(fits) + `,"b":[` + strings.TrimSuffix(strings.Repeat("1e-300,", 100), ",") + `]}}`, `Doc: field "data": `},
	} {
		_, err := ValidateDocument(s, decode(t, c.doc))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%.60s…: %v", c.doc, err)
		case c.err != "" && (err == nil || !strings.HasPrefix(sluice.ErrorMessage(err), c.err) ||
			!strings.Contains(err.Error(), "more than 16777216 bytes longer in plain decimal form")):
			t.Errorf("%.60s…: %v, want an error starting %q naming the bound", c.doc, err, c.err)
		}
	}
}

// FuzzCountJSONValues: CountJSONValues counts what decoding finds, in
// any valid JSON text.
func FuzzCountJSONValues(f *testing.F) {
	for _, s := range []string{`0`, `[]`, `{}`, `[1, [2, {}], {"a": [null, "x,]"]}]`, `{"k\"[": "v\\", "b": []}`, ` [ ] `} {
		f.Add(s)
	}
	var count func(v any) int
	count = func(v any) int {
		n := 1
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				n += count(e)
			}
		case map[string]any:
			for _, e := range x {
				n += count(e)
			}
		}
		return n
	}
	f.Fuzz(func(t *testing.T, text string) {
		var v any
		if json.Unmarshal([]byte(text), &v) != nil || hasDuplicateKeys(text) {
			return
		}
		if got, want := CountJSONValues([]byte(text)), count(v); got != want {
			t.Fatalf("%s: %d values counted, %d decoded", text, got, want)
		}
	})
}

// hasDuplicateKeys reports whether an object of text repeats a key, which
// decoding keeps once but the text holds twice.
func hasDuplicateKeys(text string) bool {
	dec := json.NewDecoder(strings.NewReader(text))
	var stack []map[string]bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, map[string]bool{})
			expectKey = true
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		case json.Delim('['):
			stack = append(stack, nil)
		default:
			if k, ok := tok.(string); ok && expectKey && len(stack) > 0 && stack[len(stack)-1] != nil {
				if stack[len(stack)-1][k] {
					return true
				}
				stack[len(stack)-1][k] = true
				expectKey = false
				continue
			}
		}
		expectKey = len(stack) > 0 && stack[len(stack)-1] != nil
	}
}

// TestFitsNumeric: the numbers Postgres's numeric accepts at its limits,
// and the nearest it refuses (checked against Postgres 15).
func TestFitsNumeric(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"1e131071", "-1E-16383", "0e999", "0e-16383", "1.5e131070", "0.012e-16380", "100e131069", "9.9e131071", "1.2e-16382", "0.000e+1073741822"} {
		if !fitsNumeric(n) {
			t.Errorf("fitsNumeric(%s) is false", n)
		}
	}
	for _, n := range []string{"1e131072", "12.5e131071", "1e-16384", "0.12e-16382", "0.0120e-16380", "0e-99999", "0e1073741823"} {
		if fitsNumeric(n) {
			t.Errorf("fitsNumeric(%s) is true", n)
		}
	}
}

// TestPlainNumber: numbers as Postgres's numeric prints them (the daemon's
// TestLoggedNumbersAreRead writes the same numbers and reads them back from
// Postgres), and the bound on their length.
func TestPlainNumber(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {"-0.00", "0.00"}, {"0e5", "0"}, {"0.00e1", "0.0"}, {"0e-3", "0.000"},
		{"1E2", "100"}, {"1e+2", "100"}, {"1.50", "1.50"}, {"-1.50", "-1.50"}, {"1e-3", "0.001"}, {"-1e-3", "-0.001"},
		{"1.0e-2", "0.010"}, {"100e-2", "1.00"}, {"1.00e2", "100"}, {"123.456e1", "1234.56"}, {"123.456e-1", "12.3456"},
		{"2.50e-1", "0.250"}, {"12e-1", "1.2"}, {"0.012e2", "1.2"}, {"0.0012e1", "0.012"}, {"5e-05", "0.00005"},
		{"1.2345675e+06", "1234567.5"}, {"6.02214076e23", "602214076000000000000000"},
	} {
		if got, ok := plainFormOf(c.in).text(c.in, 100); !ok || got != c.want {
			t.Errorf("plain form of %s: %q %v, want %s", c.in, got, ok, c.want)
		}
	}
	if got, ok := plainFormOf("1e3").text("1e3", 4); !ok || got != "1000" {
		t.Errorf("plain form of 1e3 in 4: %q %v", got, ok)
	}
	for _, c := range []struct {
		in  string
		max int
	}{{"1e3", 3}, {"-1e3", 4}, {"1e-3", 4}, {"0e-3", 4}, {"1.5", 2}} {
		if got, ok := plainFormOf(c.in).text(c.in, c.max); ok {
			t.Errorf("plain form of %s in %d: %q, past its bound", c.in, c.max, got)
		}
	}
}
