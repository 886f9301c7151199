package graph

import (
	"github.com/sluice-dev/sluice/internal/filter"
)

// ParseFilter parses the filter argument of a field on class, as the query
// and subscription fields take it; see package filter for Match.
func (es *ExecutableSchema) ParseFilter(class string, input map[string]any) (filter.Expr, error) {
	return parseFilter(es.schema, class, input)
}
