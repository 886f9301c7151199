package filter_test

import (
	"encoding/json"
	"testing"

	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestParseWholeNumberForms: an Int or BigInt filter value given as a
// number's text (a webhook's filter, a GraphQL variable) is written as a
// document's Int or BigInt is: digits with at most a zero fraction, no
// exponent. Found by review: 1E2 and 1.5e1 were taken as 100 and 15.
func TestParseWholeNumberForms(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(fuzzSDL)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"age", "wealth"} {
		for _, c := range []struct {
			num string
			ok  bool
		}{{"100", true}, {"100.0", true}, {"-7.00", true}, {"1E2", false}, {"1e2", false}, {"1.5e1", false}, {"100.5", false}} {
			_, err := filter.Parse(s, "Person", map[string]any{field: map[string]any{"eq": json.Number(c.num)}})
			if (err == nil) != c.ok {
				t.Errorf("%s eq %s: %v, want accepted %v", field, c.num, err, c.ok)
			}
		}
	}
}
