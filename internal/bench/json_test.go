package bench

import (
	"encoding/json"
	"io"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
