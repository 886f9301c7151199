package gqltransport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestStreamVariablesMemory measures what variables of several shapes
// hold decoded (as graph.ReadParams decodes them: encoding/json, numbers
// as json.Number), 100,000 values each, against what a stream is charged
// for them (variablesBytes), writes it to the file SLUICE_VARIABLES_MEMORY
// names, and fails when a shape holds more than it is charged (skipped
// without it: a measurement, not a check).
func TestStreamVariablesMemory(t *testing.T) {
	out := os.Getenv("SLUICE_VARIABLES_MEMORY")
	if out == "" {
		t.Skip("set SLUICE_VARIABLES_MEMORY to a file to measure")
	}
	const n = 100_000
	list := func(item func(i int) string, per int) string {
		items := make([]string, n/per)
		for i := range items {
			items[i] = item(i)
		}
		return `{"v":[` + strings.Join(items, ",") + `]}`
	}
	shapes := []struct{ name, json string }{
		{"null", list(func(int) string { return "null" }, 1)},
		{"true", list(func(int) string { return "true" }, 1)},
		{`""`, list(func(int) string { return `""` }, 1)},
		{`"a"`, list(func(int) string { return `"a"` }, 1)},
		{"1", list(func(int) string { return "1" }, 1)},
		{"[]", list(func(int) string { return "[]" }, 1)},
		{"{}", list(func(int) string { return "{}" }, 1)},
		{`{"a":1}`, list(func(int) string { return `{"a":1}` }, 2)},
		{`{"a":1,"b":2}`, list(func(int) string { return `{"a":1,"b":2}` }, 3)},
		{"an object of 9 members", list(func(int) string { return `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}` }, 10)},
		{"an object of 16 members", list(func(int) string {
			m := make([]string, 16)
			for i := range m {
				m[i] = fmt.Sprintf(`"%c":1`, 'a'+i)
			}
			return "{" + strings.Join(m, ",") + "}"
		}, 17)},
		{"arrays of nine {}", list(func(int) string { return "[{},{},{},{},{},{},{},{},{}]" }, 10)},
		{"an object of 57 members", list(func(int) string {
			m := make([]string, 57)
			for i := range m {
				m[i] = fmt.Sprintf(`"m%d":%d`, i, i)
			}
			return "{" + strings.Join(m, ",") + "}"
		}, 58)},
		{"ids", list(func(i int) string { return fmt.Sprintf(`"Dog/%d"`, i) }, 1)},
		{"one object of 100,000 members", func() string {
			m := make([]string, n)
			for i := range m {
				m[i] = fmt.Sprintf(`"%d":1`, i)
			}
			return `{"v":{` + strings.Join(m, ",") + `}}`
		}()},
	}
	var report strings.Builder
	fmt.Fprintf(&report, "%-32s %10s %12s %12s %8s\n", "shape", "JSON", "held", "charged", "held/JSON")
	for _, sh := range shapes {
		base := heapInUse()
		var vars map[string]any
		dec := json.NewDecoder(bytes.NewReader([]byte(sh.json)))
		dec.UseNumber()
		if err := dec.Decode(&vars); err != nil {
			t.Fatal(err)
		}
		held := int64(heapInUse() - base)
		charged := variablesBytes(int64(len(sh.json)), vars)
		runtime.KeepAlive(vars)
		fmt.Fprintf(&report, "%-32s %10d %12d %12d %8.1f\n", sh.name, len(sh.json), held, charged, float64(held)/float64(len(sh.json)))
		if held > charged {
			t.Errorf("%s: held %d bytes decoded, charged %d", sh.name, held, charged)
		}
	}
	if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
