package graph_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestDecodeDocumentLeavesOutFieldsOfTooManyValues: a change image whose
// field holds more than schema.MaxValues values (logged before documents
// were bounded) is decoded without that field, as a read of its row
// leaves it out; the other fields, the id and the type are decoded, and
// numbers stay exact. Before, the field was decoded whole: a value each.
func TestDecodeDocumentLeavesOutFieldsOfTooManyValues(t *testing.T) {
	t.Parallel()
	many := "[" + strings.Repeat("0,", schema.MaxValues) + "0]" // MaxValues+2 values with the list
	atBound := "[" + strings.Repeat("1,", schema.MaxValues-2) + "1]"
	raw := `{"@id":"W/old","@type":"W","many":` + many + `,"atBound":` + atBound + `,"n":12345678901234567890}`
	doc, err := graph.DecodeDocument([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if doc.ID != "W/old" || doc.Type != "W" {
		t.Errorf("id %q type %q, want W/old W", doc.ID, doc.Type)
	}
	if _, ok := doc.Fields["many"]; ok {
		t.Errorf("the field of %d values was decoded, want it left out", schema.MaxValues+2)
	}
	if l, ok := doc.Fields["atBound"].([]any); !ok || len(l) != schema.MaxValues-1 {
		t.Errorf("the field of %d values: %T of %d, want it decoded", schema.MaxValues, doc.Fields["atBound"], len(l))
	}
	if n, ok := doc.Fields["n"].(json.Number); !ok || n != "12345678901234567890" {
		t.Errorf("n = %#v, want the exact json.Number", doc.Fields["n"])
	}

	small, err := graph.DecodeDocument([]byte(`{"@id":"W/a","@type":"W","xs":[1,2],"f":1.5}`))
	if err != nil || small.ID != "W/a" || len(small.Fields) != 2 || small.Fields["f"] != json.Number("1.5") {
		t.Errorf("a small image: %+v %v", small, err)
	}
}
