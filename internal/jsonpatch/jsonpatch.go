// Package jsonpatch computes RFC 6902 JSON Patches: Diff returns the
// operations that turn one JSON document into another, which any standard
// applier (fast-json-patch, rfc6902, Apply here) reproduces exactly, as
// JSON values (an object's keys may come out in another order). A live
// query sends them instead of its full result when its client asks.
//
// The patch is correct, not minimal: objects are compared key by key, and
// lists by their common beginning and end, the elements in between
// compared in place, the surplus removed or added at the end of the
// middle. A document inserted into or removed from a sorted list is one
// add or remove; one changed field is one replace.
package jsonpatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
)

// Diff returns the patch from JSON document a to JSON document b, as the
// JSON array of its operations ("[]" when they are equal), when it is at
// most max bytes long; past that it stops and returns the replace of the
// whole document instead, [{"op":"replace","path":"","value":<b>}]
// (ReplaceSize(b) bytes). It fails only when a or b is not JSON.
//
// The budget is what makes a patch's cost that of its documents: the
// paths of its operations repeat their parents' keys, so the patch of a
// deep document with long keys can be many times its size (each of
// 2,000 leaves under 40 keys of 500 bytes has a path of 20 KB). Diff
// counts each operation's path and value as it writes them and stops at
// the first that passes max; a path is built only for an operation it
// writes, and a subtree equal on both sides is walked without building
// any, so what Diff allocates is about its two decoded documents and max
// (and an entry for each pair of lists or objects it compares).
func Diff(a, b []byte, max int) ([]byte, error) {
	va, err := decode(a)
	if err != nil {
		return nil, fmt.Errorf("jsonpatch: from: %w", err)
	}
	vb, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("jsonpatch: to: %w", err)
	}
	d := newDiffer(max)
	d.buf.WriteByte('[')
	d.diff(va, vb)
	if d.err != nil {
		return nil, d.err
	}
	if d.over {
		// The patch written so far is dropped; its buffer, about max
		// bytes, holds the whole replace instead.
		d.buf.Reset()
		return replaceWhole(&d.buf, b)
	}
	d.buf.WriteByte(']')
	return d.buf.Bytes(), nil
}

// replacePrefix and replaceSuffix surround the document in the replace of
// a whole document.
const (
	replacePrefix = `[{"op":"replace","path":"","value":`
	replaceSuffix = `}]`
)

// ReplaceSize returns the size of the patch that replaces the whole
// document with b (JSON without spaces): a caller that would send that
// patch rather than a larger one gives it to Diff as max.
func ReplaceSize(b []byte) int {
	return len(replacePrefix) + len(b) + len(replaceSuffix)
}

// replaceWhole writes to buf and returns the patch that replaces the
// whole document with b, compacted.
func replaceWhole(buf *bytes.Buffer, b []byte) ([]byte, error) {
	buf.Grow(ReplaceSize(b))
	buf.WriteString(replacePrefix)
	if err := json.Compact(buf, b); err != nil {
		return nil, fmt.Errorf("jsonpatch: to: %w", err)
	}
	buf.WriteString(replaceSuffix)
	return buf.Bytes(), nil
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// step is one token of the path of the value a differ is at: an object's
// key, or a list's index when key is nil.
type step struct {
	key   *string
	index int
}

// differ writes the operations of a patch to buf as it finds them.
type differ struct {
	buf bytes.Buffer
	enc *json.Encoder
	max int
	// at is the path of the value being compared, as its steps: joined
	// only when an operation is written.
	at []step
	// keys holds the sorted keys of the objects being compared, each
	// object's after its parent's, so that walking a document allocates
	// for its deepest branch, not for each object.
	keys []string
	// over is set once the operations pass max; err when encoding fails.
	over bool
	err  error
	// same remembers, by the identity of a pair of lists or objects (one
	// of each document), whether equal found them equal: diffLists
	// compares a list's elements before it walks into them, and each
	// holds every level below it, so without it each value of a document
	// nested n levels deep was compared up to n times (7 s for a 2 MB
	// document of lists 400 levels deep). compared counts the values
	// equal compared.
	same     map[pair]bool
	compared int
}

// pair is the identity of a list or object of each document.
type pair struct{ a, b uintptr }

// newDiffer returns a differ writing a patch of at most max bytes.
func newDiffer(max int) *differ {
	d := &differ{max: max}
	d.enc = json.NewEncoder(&d.buf)
	d.enc.SetEscapeHTML(false)
	return d
}

// stopped reports whether the walk is to end: past the budget, or failed.
func (d *differ) stopped() bool { return d.over || d.err != nil }

// emit writes operation op at d.at's path (plus last, when not nil), with
// value v unless it removes, and notes when the patch passes max: then
// as soon as its path does, before writing the rest of it or the value.
func (d *differ) emit(op string, last *step, v any) {
	if d.stopped() {
		return
	}
	if d.buf.Len() > 1 {
		d.buf.WriteByte(',')
	}
	d.buf.WriteString(`{"op":"` + op + `","path":"`)
	for _, s := range d.at {
		if d.writeStep(s) {
			return
		}
	}
	if last != nil && d.writeStep(*last) {
		return
	}
	d.buf.WriteByte('"')
	if op != "remove" {
		d.buf.WriteString(`,"value":`)
		if d.err = d.enc.Encode(v); d.err != nil {
			return
		}
		d.buf.Truncate(d.buf.Len() - 1) // Encode's newline
	}
	d.buf.WriteByte('}')
	d.over = d.buf.Len()+len(`]`) > d.max
}

// writeStep writes s as a JSON Pointer token (RFC 6901) inside the JSON
// string of a path, and reports whether the patch has passed max.
func (d *differ) writeStep(s step) bool {
	d.buf.WriteByte('/')
	if s.key == nil {
		d.buf.WriteString(strconv.Itoa(s.index))
	} else {
		for _, c := range []byte(*s.key) {
			switch {
			case c == '~':
				d.buf.WriteString("~0")
			case c == '/':
				d.buf.WriteString("~1")
			case c == '"' || c == '\\':
				d.buf.WriteByte('\\')
				d.buf.WriteByte(c)
			case c < 0x20:
				// Keys decoded from JSON are valid UTF-8: only quotes,
				// backslashes and control characters need escaping.
				d.buf.WriteString(`\u00`)
				d.buf.WriteByte(hexDigits[c>>4])
				d.buf.WriteByte(hexDigits[c&0xf])
			default:
				d.buf.WriteByte(c)
			}
		}
	}
	d.over = d.buf.Len()+len(`"}]`) > d.max
	return d.over
}

const hexDigits = "0123456789abcdef"

// diff writes what turns a into b, at d.at.
func (d *differ) diff(a, b any) {
	switch x := a.(type) {
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			d.diffObjects(x, y)
			return
		}
	case []any:
		if y, ok := b.([]any); ok {
			d.diffLists(x, y)
			return
		}
	}
	if !d.equal(a, b) {
		d.emit("replace", nil, b)
	}
}

// sortedKeys appends m's keys to d.keys, sorted, and returns them; the
// caller truncates d.keys to its length before once done with them.
func (d *differ) sortedKeys(m map[string]any) []string {
	start := len(d.keys)
	for k := range m {
		d.keys = append(d.keys, k)
	}
	keys := d.keys[start:]
	slices.Sort(keys)
	return keys
}

func (d *differ) diffObjects(a, b map[string]any) {
	start := len(d.keys)
	defer func() { d.keys = d.keys[:start] }()
	for _, k := range d.sortedKeys(a) {
		if _, ok := b[k]; !ok {
			d.emit("remove", &step{key: &k}, nil)
		}
	}
	d.keys = d.keys[:start]
	// keys stays valid while diff appends to d.keys past it, even into
	// another array.
	keys := d.sortedKeys(b)
	for i := range keys {
		if d.stopped() {
			return
		}
		k := &keys[i]
		if va, ok := a[*k]; ok {
			d.at = append(d.at, step{key: k})
			d.diff(va, b[*k])
			d.at = d.at[:len(d.at)-1]
		} else {
			d.emit("add", &step{key: k}, b[*k])
		}
	}
}

func (d *differ) diffLists(a, b []any) {
	pre := 0
	for pre < len(a) && pre < len(b) && d.equal(a[pre], b[pre]) {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && d.equal(a[len(a)-1-suf], b[len(b)-1-suf]) {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n := min(len(ma), len(mb))
	for i := range n {
		if d.stopped() {
			return
		}
		d.at = append(d.at, step{index: pre + i})
		d.diff(ma[i], mb[i])
		d.at = d.at[:len(d.at)-1]
	}
	// Removing at one index removes the elements after it in turn.
	for range len(ma) - n {
		d.emit("remove", &step{index: pre + n}, nil)
	}
	for i := n; i < len(mb); i++ {
		d.emit("add", &step{index: pre + i}, mb[i])
	}
}

// equal reports whether two decoded JSON values are equal. Numbers are
// equal when their text is: a patch then keeps the text b has. It
// remembers what it found of each pair of non-empty lists and objects
// (d.same), so that a diff compares each pair once however deep it lies.
func (d *differ) equal(a, b any) bool {
	d.compared++
	var k pair
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if len(x) == 0 {
			return true
		}
		k = pair{reflect.ValueOf(x).Pointer(), reflect.ValueOf(y).Pointer()}
		if eq, ok := d.same[k]; ok {
			return eq
		}
		eq := true
		for key, v := range x {
			if w, ok := y[key]; !ok || !d.equal(v, w) {
				eq = false
				break
			}
		}
		d.remember(k, eq)
		return eq
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if len(x) == 0 {
			return true
		}
		k = pair{reflect.ValueOf(x).Pointer(), reflect.ValueOf(y).Pointer()}
		if eq, ok := d.same[k]; ok {
			return eq
		}
		eq := true
		for i := range x {
			if !d.equal(x[i], y[i]) {
				eq = false
				break
			}
		}
		d.remember(k, eq)
		return eq
	default:
		return a == b // string, json.Number, bool, nil
	}
}

// remember records that equal found the pair k equal or not.
func (d *differ) remember(k pair, eq bool) {
	if d.same == nil {
		d.same = map[pair]bool{}
	}
	d.same[k] = eq
}
