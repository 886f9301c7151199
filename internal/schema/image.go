package schema

import (
	"bytes"
	"encoding/json"
)

// DecodeImage decodes a document's API-form JSON (a change's image, or a
// document read back), keeping numbers as json.Number. A member holding
// more than MaxValues values is left out without being decoded, as a read
// of a row leaves out such a column: an image logged before documents
// were bounded (written by the API before MaxValues, or in SQL before
// migration 28's check) can hold millions, and decoding builds a value
// for each (16 MiB of [0,0,…] took hundreds of MB for every reader
// redacting or judging it).
func DecodeImage(raw []byte) (map[string]any, error) {
	var m map[string]any
	// Each value takes a byte at least: shorter text has no such member.
	if len(raw) <= MaxValues {
		return m, decodeNumbers(raw, &m)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, err
	}
	if members == nil {
		return nil, nil // null
	}
	m = make(map[string]any, len(members))
	for name, b := range members {
		if CountJSONValues(b) > MaxValues {
			continue
		}
		var v any
		if err := decodeNumbers(b, &v); err != nil {
			return nil, err
		}
		m[name] = v
	}
	return m, nil
}

// decodeNumbers decodes the JSON text raw into v keeping numbers as
// json.Number.
func decodeNumbers(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}
