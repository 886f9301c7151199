// Package jsondup finds a member that a JSON object names twice.
//
// encoding/json keeps the last of two members of the same name (other
// decoders keep the first), so text that names one twice means one thing
// to Sluice and another to a proxy, a validator or a log reader in front
// of it; Sluice refuses it instead. The check reads the text once more
// after it decoded: it follows only strings and nesting, and allocates
// nothing for an object of up to maxScan members whose names have no
// escapes (a map holds the names of a larger one).
package jsondup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Repeat is a member named twice.
type Repeat struct {
	// Path is the member's path: its name, after the names (joined with
	// '.') and list indexes ("[2]") of the members it is in, as in
	// `home.street` or `friends[2].name`.
	Path string
	// Offset is the byte offset, in the text, of the second name.
	Offset int
}

// Message says what is wrong, for an error that says where (a document, a
// request body) around it.
func (r Repeat) Message() string {
	return fmt.Sprintf("the member %q is given twice (the second time at byte %d, counting from 0): each member of a JSON object is given once", r.Path, r.Offset)
}

// Find returns the first member that an object of the JSON text b (at any
// depth) names twice, names compared as encoding/json decodes them (after
// their escapes, invalid UTF-8 replaced). It is for text that decoded:
// of other text it reports a member named twice before the first error,
// or nothing.
func Find(b []byte) (Repeat, bool) {
	return find(b, false)
}

// FindFold is Find for the text of a request decoded into a Go struct:
// encoding/json matches a struct's fields ignoring case, so at the top
// level two names that differ only in case ("schema", "Schema") are one
// member given twice as well.
func FindFold(b []byte) (Repeat, bool) {
	return find(b, true)
}

func find(b []byte, fold bool) (Repeat, bool) {
	s := scanner{b: b, fold: fold}
	if _, r := s.value(skipSpace(b, 0), 0); r != nil {
		return *r, true
	}
	return Repeat{}, false
}

// maxScan is the most members of an object whose names are compared one
// by one; past it, a map holds them.
const maxScan = 16

// maxDepth is as deep as the scan follows nesting: encoding/json refuses
// text nested deeper (and a document may nest far less).
const maxDepth = 10000

// span is the name of a member at b[start:end].
type span struct{ start, end int }

type scanner struct {
	b    []byte
	fold bool
	// The names of the objects being read, a stack: an object's names
	// begin where its parent's end, and are dropped when it ends. They
	// are offsets in b, in small and then in more, rather than a slice
	// of small, so that the scanner stays on the stack.
	small [32]span
	more  []span
	n     int
}

func (s *scanner) name(k int) []byte {
	sp := s.at(k)
	return s.b[sp.start:sp.end]
}

func (s *scanner) at(k int) span {
	if k < len(s.small) {
		return s.small[k]
	}
	return s.more[k-len(s.small)]
}

func (s *scanner) push(sp span) {
	if s.n < len(s.small) {
		s.small[s.n] = sp
	} else {
		s.more = append(s.more[:s.n-len(s.small)], sp)
	}
	s.n++
}

// value reads the value starting at b[i] and returns the index after it,
// or -1 for text that is not JSON, or the first member named twice in
// it.
func (s *scanner) value(i, depth int) (int, *Repeat) {
	b := s.b
	if i >= len(b) || depth > maxDepth {
		return -1, nil
	}
	switch b[i] {
	case '{':
		base := s.n
		next, r := s.object(i, depth)
		s.n = base
		return next, r
	case '[':
		return s.array(i, depth)
	case '"':
		end, _ := skipString(b, i)
		return end, nil
	}
	// A number or a literal: up to the next delimiter.
	j := i
	for j < len(b) && !isDelim(b[j]) {
		j++
	}
	if j == i {
		return -1, nil
	}
	return j, nil
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ':', '"', '{', '[', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// object reads the object at b[i]; its names go on the stack after base,
// where value drops them.
func (s *scanner) object(i, depth int) (int, *Repeat) {
	b := s.b
	base := s.n
	fold := s.fold && depth == 0
	var seen map[string]struct{}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1, nil
		}
		start := i
		end, plain := skipString(b, i)
		if end < 0 {
			return -1, nil
		}
		name := b[start+1 : end-1]
		if !plain {
			if name = unquote(b[start:end]); name == nil {
				return -1, nil
			}
		}
		// An object's names are compared one by one, up to maxScan of
		// them; past that, or for a name that is not its own bytes in
		// b, or for names compared ignoring case, a map holds them.
		if seen == nil && (!plain || fold || s.n-base == maxScan) {
			seen = make(map[string]struct{}, 2*maxScan)
			for k := base; k < s.n; k++ {
				seen[string(s.key(s.name(k), fold))] = struct{}{}
			}
		}
		if seen != nil {
			key := s.key(name, fold)
			if _, dup := seen[string(key)]; dup {
				return -1, &Repeat{Path: string(name), Offset: start}
			}
			seen[string(key)] = struct{}{}
		} else {
			for k := base; k < s.n; k++ {
				if bytes.Equal(s.name(k), name) {
					return -1, &Repeat{Path: string(name), Offset: start}
				}
			}
			s.push(span{start + 1, end - 1})
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return -1, nil
		}
		var r *Repeat
		if i, r = s.value(skipSpace(b, i+1), depth+1); r != nil {
			r.Path = join(string(name), r.Path)
			return -1, r
		}
		if i < 0 {
			return -1, nil
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return -1, nil
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return -1, nil
		}
	}
}

func (s *scanner) array(i, depth int) (int, *Repeat) {
	b := s.b
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for k := 0; ; k++ {
		var r *Repeat
		if i, r = s.value(i, depth+1); r != nil {
			r.Path = join("["+strconv.Itoa(k)+"]", r.Path)
			return -1, r
		}
		if i < 0 {
			return -1, nil
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return -1, nil
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return -1, nil
		}
	}
}

// key is name as compared: folded when fold is set.
func (s *scanner) key(name []byte, fold bool) []byte {
	if fold {
		return foldName(name)
	}
	return name
}

// unquote returns the value of the JSON string q, or nil when it is not
// one.
func unquote(q []byte) []byte {
	var u string
	if json.Unmarshal(q, &u) != nil {
		return nil
	}
	return []byte(u)
}

// join puts the path of a member inside the value at prefix after it.
func join(prefix, path string) string {
	if strings.HasPrefix(path, "[") {
		return prefix + path
	}
	return prefix + "." + path
}

// skipString returns the index after the string starting at b[i] (a
// quote), or -1 when it is not closed, and whether its bytes between the
// quotes are its value: no escape, valid UTF-8.
func skipString(b []byte, i int) (next int, plain bool) {
	plain = true
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(b[i+1:j]) {
				plain = false
			}
			return j + 1, plain
		case c == '\\':
			plain = false
			j++
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return -1, false
}

// foldName returns name with each character replaced by one that stands
// for all those it equals ignoring case (the lower case of the least of
// unicode.SimpleFold's orbit): two names fold to the same bytes when
// encoding/json would match both with one struct field. A name of ASCII
// without capitals is its own.
func foldName(name []byte) []byte {
	plain := true
	for _, c := range name {
		if c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	out := make([]byte, 0, len(name))
	for _, r := range string(name) {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		out = utf8.AppendRune(out, unicode.ToLower(least))
	}
	return out
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
