package filter

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
)

// QualifyID returns the full id that id names when a read of class is
// given it (the id or ids argument of a query field or a backlink, or a
// filter's _id or _ids): a key alone (no "/") is a key of class, as a
// typed write takes it (Person(id: "carol") reads Person/carol), and a
// full id <Class>/<key> must be of class or of a class inheriting from
// it. Any other id names no document the read could answer: it was
// answered [] as if the document did not exist, which hid the mistake
// (a key, or the wrong class's id), so it is refused. The error, a
// plain message, says why; the caller names the argument.
func QualifyID(s *sluice.Schema, class, id string) (string, error) {
	// Text Postgres cannot hold names no document, and must not reach
	// SQL, whose error names neither the argument nor the id.
	if !utf8.ValidString(id) {
		return "", fmt.Errorf("%q is not valid UTF-8, which no id is", id)
	}
	if strings.IndexByte(id, 0) >= 0 {
		return "", fmt.Errorf("%q holds a NUL character (\\u0000), which no id can", id)
	}
	if !strings.Contains(id, "/") {
		if id == "" {
			return "", fmt.Errorf(`"" is no id: want <Class>/<key>, or the key of a %s`, class)
		}
		if c := s.Class(class); c == nil || c.Kind != sluice.KindDocument {
			return "", fmt.Errorf("%q is a key, but %s has no documents of its own: give the id as <Class>/<key>", id, class)
		}
		return class + "/" + id, nil
	}
	of, key, _ := strings.Cut(id, "/")
	if of == "" || key == "" {
		return "", fmt.Errorf("%q is no id: want <Class>/<key>, or the key of a %s", id, class)
	}
	c := s.Class(of)
	if c == nil || !s.IsA(of, class) {
		return "", fmt.Errorf("%q is not an id of %s or of a class inheriting from it, so it names no document this reads", id, class)
	}
	if c.Kind != sluice.KindDocument {
		return "", fmt.Errorf("%q is an id of %s, which has no documents of its own", id, of)
	}
	return id, nil
}
