package schema

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
)

// MaxKeyBytes is the longest document key, the part of an id after "Class/".
const MaxKeyBytes = 255

// ParseID splits a document id "Class/key" into its class and key. It
// returns a CodeInvalid error when id has no "/", when Class is not a class
// of s that has documents of its own (KindDocument), or when the key breaks
// the rules of CheckKey.
func ParseID(s *sluice.Schema, id string) (class, key string, err error) {
	class, key, ok := strings.Cut(id, "/")
	if !ok {
		return "", "", sluice.Errorf(sluice.CodeInvalid, "invalid id %s: want Class/key", quote(id))
	}
	if err := CheckDocumentClass(s, class); err != nil {
		return "", "", sluice.Errorf(sluice.CodeInvalid, "invalid id %s: %s", quote(id), sluice.ErrorMessage(err))
	}
	if err := CheckKey(key); err != nil {
		return "", "", sluice.Errorf(sluice.CodeInvalid, "invalid id %s: %s", quote(id), sluice.ErrorMessage(err))
	}
	return class, key, nil
}

// CheckKey returns a CodeInvalid error unless key is a valid document key:
// 1 to MaxKeyBytes bytes of UTF-8 without whitespace or control characters,
// so that ids stay printable and survive being pasted into URLs and logs. A
// key may contain "/" (the system database names databases
// UserDatabase/<org>/<name>): an id is split at its first "/", and class
// names never contain one.
func CheckKey(key string) error {
	switch {
	case key == "":
		return sluice.Errorf(sluice.CodeInvalid, "the key is empty")
	case len(key) > MaxKeyBytes:
		return sluice.Errorf(sluice.CodeInvalid, "the key is longer than %d bytes", MaxKeyBytes)
	case !utf8.ValidString(key):
		return sluice.Errorf(sluice.CodeInvalid, "the key is not valid UTF-8")
	}
	for _, r := range key {
		switch {
		case unicode.IsSpace(r):
			return sluice.Errorf(sluice.CodeInvalid, "the key contains whitespace")
		case unicode.IsControl(r):
			return sluice.Errorf(sluice.CodeInvalid, "the key contains a control character")
		}
	}
	return nil
}

// CheckDocumentClass returns a CodeInvalid error unless name is a class of s
// with documents of its own, saying what it is instead (unknown, abstract
// or a subdocument).
func CheckDocumentClass(s *sluice.Schema, name string) error {
	c := s.Class(name)
	switch {
	case c == nil:
		return sluice.Errorf(sluice.CodeInvalid, "unknown class %s", quote(name))
	case c.Kind == sluice.KindAbstract:
		return sluice.Errorf(sluice.CodeInvalid, "class %s is abstract and has no documents of its own", name)
	case c.Kind == sluice.KindSubdocument:
		return sluice.Errorf(sluice.CodeInvalid, "class %s is a subdocument and exists only inside documents", name)
	}
	return nil
}

// normalizeID returns the full id for the "@id" value id of a document of
// class: "Class/key" stays as it is, a bare key gets the class prefix. An id
// with a "/" is always the full form, so a key containing "/" must be given
// in full.
func normalizeID(s *sluice.Schema, class, id string) (string, error) {
	prefix, key, ok := strings.Cut(id, "/")
	if !ok {
		key = id
	} else if prefix != class {
		return "", sluice.Errorf(sluice.CodeInvalid, "%s: @id %s names class %s; a %s id is %s/<key>", class, quote(id), quote(prefix), class, class)
	}
	if err := CheckKey(key); err != nil {
		return "", sluice.Errorf(sluice.CodeInvalid, "%s: invalid @id %s: %s", class, quote(id), sluice.ErrorMessage(err))
	}
	return class + "/" + key, nil
}

// quote quotes s for an error message, shortened so that a huge input does
// not make a huge message.
func quote(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
