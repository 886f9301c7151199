package daemon_test

import (
	"encoding/json"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestGraphQLRetryAcrossSchemaChanges: an idempotent GraphQL mutation
// retried on either replica right after a forced schema change (a type
// changed, then the field it wrote dropped) answers its first answer,
// although the operation no longer validates; the same mutation without
// a key, whose parsed form both replicas cached before the change,
// answers the same error on both (validated against the current schema)
// and writes nothing.
func TestGraphQLRetryAcrossSchemaChanges(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	replicas := []*dt.Daemon{a, b}
	a.CreateDatabase(t, "retry", "type T { n: Int label: String }")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/retry", `[{"@type":"T","@id":"a","n":1},{"@type":"T","@id":"b","n":1}]`)
	post := func(d *dt.Daemon, key, query string) dt.Response {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"query": query})
		header := []string{"Content-Type", "application/json"}
		if key != "" {
			header = append(header, "Idempotency-Key", key)
		}
		return d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/retry", body, header...)
	}
	updateA := `mutation { T_update(documents: [{_id: "T/a", n: 5}]) }`
	updateB := `mutation { T_update(documents: [{_id: "T/b", n: 6}]) }`
	plain := `mutation { T_update(documents: [{_id: "T/b", n: 7}]) }`
	first := map[string]dt.Response{"k1": post(a, "k1", updateA), "k2": post(b, "k2", updateB)}
	for _, d := range replicas {
		post(d, "", plain) // parsed, validated and cached under the schema of now
	}
	commits := logLength(t, a, "retry")

	for _, sdl := range []string{"type T { n: String label: String }", "type T { label: String }"} {
		a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/retry?force=true", sdl)
		commits++
		// Right after the change: b may still hold the schema before it.
		for _, d := range []*dt.Daemon{b, a} {
			for key, query := range map[string]string{"k1": updateA, "k2": updateB} {
				r := post(d, key, query)
				if string(r.Body) != string(first[key].Body) || r.Header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("after %q, the retry of %s answered %s (replayed %q), the first %s", sdl, key, r.Body, r.Header.Get("Idempotent-Replayed"), first[key].Body)
				}
			}
		}
		onB, onA := post(b, "", plain), post(a, "", plain)
		var answer struct {
			Data   json.RawMessage
			Errors []struct{ Extensions struct{ Code string } }
		}
		if err := json.Unmarshal(onA.Body, &answer); err != nil || string(onB.Body) != string(onA.Body) ||
			len(answer.Errors) != 1 || answer.Errors[0].Extensions.Code != "GRAPHQL_VALIDATION_FAILED" || answer.Data != nil {
			t.Errorf("after %q, the mutation answered\n%s on b,\n%s on a", sdl, onB.Body, onA.Body)
		}
	}
	if n := logLength(t, a, "retry"); n != commits {
		t.Errorf("%d commits, want %d: a retry or a refused mutation wrote", n, commits)
	}
}
