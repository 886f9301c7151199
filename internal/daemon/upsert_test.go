package daemon_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestConcurrentUpsertsOverRESTAndGraphQL: REST and GraphQL write through
// the same commit path, so a GraphQL upsert (_replaceDocuments with
// create) that races a REST one to create a document behaves as two REST
// upserts do: both succeed, one creating the document and the other then
// updating it.
func TestConcurrentUpsertsOverRESTAndGraphQL(t *testing.T) {
	t.Parallel()
	d1 := dt.Start(t)
	d1.CreateDatabase(t, "upserts", "type Note { by: Int! }")
	d2 := dt.Start(t, dt.WithDatabaseURL(d1.DatabaseURL))
	const rounds = 40
	for i := range rounds {
		doc := func(by int) string { return fmt.Sprintf(`{"@type":"Note","@id":"n%d","by":%d}`, i, by) }
		var wg sync.WaitGroup
		var rest, gql dt.Response
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			rest = d1.Do(t, dt.Admin(), "PUT", "/api/document/admin/upserts?create=true", doc(0))
		})
		wg.Go(func() {
			<-start
			body := fmt.Sprintf(`{"query":"mutation($j: JSON!) { _replaceDocuments(json: $j, create: true) }","variables":{"j":%s}}`, doc(1))
			gql = d2.Do(t, dt.Admin(), "POST", "/api/graphql/admin/upserts", body, "Content-Type", "application/json")
		})
		close(start)
		wg.Wait()
		if rest.Status != 200 {
			t.Fatalf("round %d, REST: %d %s", i, rest.Status, rest.Body)
		}
		if want := fmt.Sprintf(`{"data":{"_replaceDocuments":["Note/n%d"]},"extensions":{"position":`, i); gql.Status != 200 || !strings.HasPrefix(string(gql.Body), want) {
			t.Fatalf("round %d, GraphQL: %d %s, want %s", i, gql.Status, gql.Body, want)
		}
	}
	ops := map[string][]string{}
	for _, c := range allChanges(t, d1, "upserts") {
		for _, ch := range c.Changes {
			ops[ch.ID] = append(ops[ch.ID], ch.Op)
		}
	}
	for i := range rounds {
		id := fmt.Sprintf("Note/n%d", i)
		if got := strings.Join(ops[id], ","); got != "added,updated" {
			t.Fatalf("%s: changes %s, want added,updated", id, got)
		}
	}
}
