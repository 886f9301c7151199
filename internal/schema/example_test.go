package schema_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/internal/schema"
)

// The schema of the package documentation.
const sdl = `
"""A person."""
type Person {
  name: String!
  age: Int
  friends: [Person!]
  home: Address
  favorite: Color
  ssn: String @private
  salary: Int @protected(role: "write")
}

type Address @subdocument {
  street: String
  city: String
}

enum Color { RED GREEN }

interface Animal { name: String! }
type Dog implements Animal { breed: String }

interface Pet @concrete { name: String! }
interface Puppy implements Pet @concrete { age: Int }
type Cat implements Pet & Animal { indoor: Boolean }
`

func ExampleParse() {
	s, err := schema.Parse(sdl)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range s.Order {
		c := s.Class(name)
		var fields []string
		for _, f := range c.Fields {
			fields = append(fields, f.Name)
		}
		fmt.Printf("%s (kind %d, parents %v): %s\n", name, c.Kind, c.Parents, strings.Join(fields, " "))
	}
	_, err = schema.Parse("type Person {\n  friend: Persn\n}")
	fmt.Println(err)
	// Output:
	// Person (kind 0, parents []): name age friends home favorite ssn salary
	// Address (kind 2, parents []): street city
	// Animal (kind 1, parents []): name
	// Dog (kind 0, parents [Animal]): name breed
	// Pet (kind 0, parents []): name
	// Puppy (kind 0, parents [Pet]): name age
	// Cat (kind 0, parents [Pet Animal]): name indoor
	// line 2, column 3: field Person.friend: unknown type Persn
}

func ExampleValidateDocument() {
	s, err := schema.Parse(sdl)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, in := range []string{
		`{"@type": "Person", "@id": "ann", "name": "Ann", "age": 41, "friends": ["Person/bob"], "home": {"city": "Oslo"}}`,
		`{"@type": "Person", "name": "Bob", "home": {"city": 3}}`,
	} {
		var raw map[string]any
		d := json.NewDecoder(strings.NewReader(in))
		d.UseNumber()
		if err := d.Decode(&raw); err != nil {
			fmt.Println(err)
			return
		}
		doc, err := schema.ValidateDocument(s, raw)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fields, _ := json.Marshal(doc.Fields)
		fmt.Println(doc.ID, doc.Type, string(fields))
	}
	// Output:
	// Person/ann Person {"age":41,"friends":["Person/bob"],"home":{"@type":"Address","city":"Oslo"},"name":"Ann"}
	// Person: field "home.city": expected String, got number 3
}
