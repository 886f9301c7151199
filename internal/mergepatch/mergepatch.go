// Package mergepatch applies JSON Merge Patches (RFC 7396), the partial
// writes of documents: a patch is a JSON object whose members replace the
// target's, an object value is merged into the target's member of that
// name recursively, and null removes the member. Arrays and scalars
// replace what they patch whole.
package mergepatch

// Apply returns target with patch merged into it, as RFC 7396 defines.
// Values are decoded JSON (map[string]any, []any, strings, numbers,
// booleans, nil). target's maps are modified in place; patch's values
// are used, not copied, in the result.
func Apply(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = make(map[string]any, len(p))
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = Apply(t[k], v)
	}
	return t
}
