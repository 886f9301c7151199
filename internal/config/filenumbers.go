package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
	"go.yaml.in/yaml/v3"
)

// fileNumber is a number in a config file as it is written there (0x10,
// 1_000, 16.0, 1e3, 010, 16): the decoders viper uses turn each into the
// same kind of value as a plain 16 (010 into 8, in YAML), so a size or a
// count is checked against its text instead, as a variable's is.
type fileNumber string

// fileNumbers returns, by lower-cased key, the top-level values of data,
// a config file in format ext (yaml, yml, toml or json), that are
// unquoted numbers, as written. Nested keys are left out: they name no
// setting. data must be valid in its format (viper read it first).
func fileNumbers(ext string, data []byte) (map[string]fileNumber, error) {
	numbers := map[string]fileNumber{}
	switch ext {
	case "yaml", "yml":
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, err
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			return numbers, nil // empty, or not a mapping (viper refused it)
		}
		m := doc.Content[0].Content
		for i := 0; i+1 < len(m); i += 2 {
			value := m[i+1]
			if value.Kind == yaml.AliasNode {
				value = value.Alias
			}
			if tag := value.ShortTag(); value.Kind == yaml.ScalarNode && (tag == "!!int" || tag == "!!float") {
				numbers[strings.ToLower(m[i].Value)] = fileNumber(value.Value)
			}
		}
	case "toml":
		p := unstable.Parser{}
		p.Reset(data)
		for p.NextExpression() {
			e := p.Expression()
			if e.Kind == unstable.Table || e.Kind == unstable.ArrayTable {
				break // what follows is nested
			}
			if e.Kind != unstable.KeyValue {
				continue
			}
			key := e.Key()
			if !key.Next() || !key.IsLast() { // a dotted key is nested
				continue
			}
			if v := e.Value(); v.Kind == unstable.Integer || v.Kind == unstable.Float {
				numbers[strings.ToLower(string(key.Node().Data))] = fileNumber(v.Data)
			}
		}
		if err := p.Error(); err != nil {
			return nil, err
		}
	case "json":
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		for k, v := range m {
			if n, ok := v.(json.Number); ok {
				numbers[strings.ToLower(k)] = fileNumber(n)
			}
		}
	default:
		return nil, fmt.Errorf("unsupported format %q", ext)
	}
	return numbers, nil
}
