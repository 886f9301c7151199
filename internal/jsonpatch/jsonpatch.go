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
	"slices"
	"strconv"
	"strings"
)

// Op is one patch operation (op is add, remove or replace).
type Op struct {
	Op    string
	Path  string
	Value any // add and replace
}

// Diff returns the patch from JSON document a to JSON document b, as the
// JSON array of its operations ("[]" when they are equal). It fails only
// when a or b is not JSON.
func Diff(a, b []byte) ([]byte, error) {
	va, err := decode(a)
	if err != nil {
		return nil, fmt.Errorf("jsonpatch: from: %w", err)
	}
	vb, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("jsonpatch: to: %w", err)
	}
	var ops []Op
	diff("", va, vb, &ops)
	return encode(ops)
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

func encode(ops []Op) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('[')
	for i, op := range ops {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"op":"` + op.Op + `","path":`)
		if err := enc.Encode(op.Path); err != nil {
			return nil, err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		if op.Op != "remove" {
			buf.WriteString(`,"value":`)
			if err := enc.Encode(op.Value); err != nil {
				return nil, err
			}
			buf.Truncate(buf.Len() - 1)
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// diff appends to ops what turns a into b, at path.
func diff(path string, a, b any, ops *[]Op) {
	switch x := a.(type) {
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			diffObjects(path, x, y, ops)
			return
		}
	case []any:
		if y, ok := b.([]any); ok {
			diffLists(path, x, y, ops)
			return
		}
	}
	if !equal(a, b) {
		*ops = append(*ops, Op{Op: "replace", Path: path, Value: b})
	}
}

func diffObjects(path string, a, b map[string]any, ops *[]Op) {
	for _, k := range sortedKeys(a) {
		if _, ok := b[k]; !ok {
			*ops = append(*ops, Op{Op: "remove", Path: path + "/" + escape(k)})
		}
	}
	for _, k := range sortedKeys(b) {
		p := path + "/" + escape(k)
		if va, ok := a[k]; ok {
			diff(p, va, b[k], ops)
		} else {
			*ops = append(*ops, Op{Op: "add", Path: p, Value: b[k]})
		}
	}
}

func diffLists(path string, a, b []any, ops *[]Op) {
	pre := 0
	for pre < len(a) && pre < len(b) && equal(a[pre], b[pre]) {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && equal(a[len(a)-1-suf], b[len(b)-1-suf]) {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n := min(len(ma), len(mb))
	for i := range n {
		diff(path+"/"+strconv.Itoa(pre+i), ma[i], mb[i], ops)
	}
	// Removing at one index removes the elements after it in turn.
	for range len(ma) - n {
		*ops = append(*ops, Op{Op: "remove", Path: path + "/" + strconv.Itoa(pre+n)})
	}
	for i := n; i < len(mb); i++ {
		*ops = append(*ops, Op{Op: "add", Path: path + "/" + strconv.Itoa(pre+i), Value: mb[i]})
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// escape escapes a key as a JSON Pointer token (RFC 6901).
func escape(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// equal reports whether two decoded JSON values are equal. Numbers are
// equal when their text is: a patch then keeps the text b has.
func equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return a == b // string, json.Number, bool, nil
	}
}
