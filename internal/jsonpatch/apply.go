package jsonpatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Apply returns JSON document doc with patch applied, as RFC 6902 says,
// for the operations Diff makes (add, remove, replace); other operations
// are an error. Tests apply Diff's patches with it (the client tests with
// fast-json-patch).
func Apply(doc, patch []byte) ([]byte, error) {
	v, err := decode(doc)
	if err != nil {
		return nil, err
	}
	if v, err = apply(v, patch); err != nil {
		return nil, err
	}
	return encodeValue(v)
}

// encodeValue encodes one decoded JSON value, on one line.
func encodeValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func apply(doc any, patch []byte) (any, error) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, err
	}
	for _, op := range ops {
		if op.Op != "add" && op.Op != "remove" && op.Op != "replace" {
			return nil, fmt.Errorf("operation %q: only add, remove and replace are applied", op.Op)
		}
		var v any
		if op.Op != "remove" {
			var err error
			if v, err = decode(op.Value); err != nil {
				return nil, err
			}
		}
		var err error
		if doc, err = applyOp(doc, op.Op, pointer(op.Path), v); err != nil {
			return nil, fmt.Errorf("%s %s: %w", op.Op, op.Path, err)
		}
	}
	return doc, nil
}

func pointer(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts
}

func applyOp(doc any, op string, path []string, v any) (any, error) {
	if len(path) == 0 {
		if op == "remove" {
			return nil, nil
		}
		return v, nil
	}
	k, rest := path[0], path[1:]
	switch d := doc.(type) {
	case map[string]any:
		if len(rest) > 0 {
			child, ok := d[k]
			if !ok {
				return nil, fmt.Errorf("no key %q", k)
			}
			nv, err := applyOp(child, op, rest, v)
			d[k] = nv
			return d, err
		}
		_, has := d[k]
		switch op {
		case "add":
			d[k] = v
		case "replace":
			if !has {
				return nil, fmt.Errorf("replace of missing key %q", k)
			}
			d[k] = v
		case "remove":
			if !has {
				return nil, fmt.Errorf("remove of missing key %q", k)
			}
			delete(d, k)
		}
		return d, nil
	case []any:
		i, err := strconv.Atoi(k)
		if len(rest) > 0 {
			if err != nil || i < 0 || i >= len(d) {
				return nil, fmt.Errorf("bad index %q", k)
			}
			nv, err := applyOp(d[i], op, rest, v)
			d[i] = nv
			return d, err
		}
		switch op {
		case "add":
			if k == "-" {
				return append(d, v), nil
			}
			if err != nil || i < 0 || i > len(d) {
				return nil, fmt.Errorf("bad index %q", k)
			}
			d = append(d, nil)
			copy(d[i+1:], d[i:])
			d[i] = v
			return d, nil
		case "replace", "remove":
			if err != nil || i < 0 || i >= len(d) {
				return nil, fmt.Errorf("bad index %q", k)
			}
			if op == "replace" {
				d[i] = v
				return d, nil
			}
			return append(d[:i], d[i+1:]...), nil
		}
	}
	return nil, fmt.Errorf("%q is not in a container", k)
}
