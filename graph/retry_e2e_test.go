package graph_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/engine"
)

// laggingStore serves GraphQLDatabase from a copy of the database taken
// when pin is called, until the Handler forgets it: what a replica whose
// cache still holds the schema from before another replica changed it
// serves requests with (for up to its cache's TTL).
type laggingStore struct {
	graph.Store
	mu     sync.Mutex
	pinned *pinnedDB
}

type pinnedDB struct {
	d    *sluice.Database
	s    *sluice.Schema
	role sluice.Role
}

// current returns the database as the engine serves it now.
func (l *laggingStore) current(t *testing.T, u *sluice.User) *pinnedDB {
	t.Helper()
	d, s, role, err := l.Store.GraphQLDatabase(context.Background(), u, "admin", "db")
	if err != nil {
		t.Fatal(err)
	}
	return &pinnedDB{d, s, role}
}

// pin makes GraphQLDatabase answer p until the database is forgotten
// (nil: the engine's).
func (l *laggingStore) pin(p *pinnedDB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pinned = p
}

func (l *laggingStore) GraphQLDatabase(ctx context.Context, u *sluice.User, org, name string) (*sluice.Database, *sluice.Schema, sluice.Role, error) {
	l.mu.Lock()
	p := l.pinned
	l.mu.Unlock()
	if p != nil {
		return p.d, p.s, p.role, nil
	}
	return l.Store.GraphQLDatabase(ctx, u, org, name)
}

func (l *laggingStore) ForgetDatabase(org, name string) {
	l.mu.Lock()
	l.pinned = nil
	l.mu.Unlock()
	l.Store.ForgetDatabase(org, name)
}

// post sends a GraphQL request with an Idempotency-Key (none when "") and
// returns the answer's body and its Idempotent-Replayed header.
func (s *stack) post(t *testing.T, key, query string) (string, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req := httptest.NewRequest(http.MethodPost, "/api/graphql/"+s.db, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req = req.WithContext(auth.WithUser(context.Background(), s.admin))
	rec := httptest.NewRecorder()
	s.router.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: status %d: %s", query, rec.Code, b)
	}
	return string(b), rec.Header().Get("Idempotent-Replayed")
}

// TestMutationsAfterASchemaChange: a mutation served by a Handler whose
// database lags a schema change (another replica made it a moment
// before) is validated against the current schema, answering what a
// Handler that knows the change answers; an idempotent retry answers
// its first answer, whichever schema either knows, even one that no
// longer has the field it wrote, as its key is looked up before the
// operation is parsed.
func TestMutationsAfterASchemaChange(t *testing.T) {
	t.Parallel()
	var lag *laggingStore
	st := newStackWith(t, "type T { n: Int label: String }", graph.Options{}, func(s graph.Store) graph.Store {
		lag = &laggingStore{Store: s}
		return lag
	})
	st.insert(t, `[{"@type":"T","@id":"a","n":1},{"@type":"T","@id":"b","n":1}]`)
	// Keys are kept per user: the admin as it is stored.
	users, err := st.eng.Users(context.Background(), st.admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if u.Name == "admin" {
			st.admin = u
		}
	}
	update := `mutation { T_update(documents: [{_id: "T/a", n: 5}]) }`
	first, replayed := st.post(t, "k1", update)
	if !strings.HasPrefix(first, `{"data":{"T_update":["T/a"]},"extensions":{"position":"`) || replayed != "" {
		t.Fatalf("the first request: %s (replayed %q)", first, replayed)
	}
	if again, replayed := st.post(t, "k1", update); again != first || replayed != "true" {
		t.Fatalf("the retry answered %s (replayed %q), the first %s", again, replayed, first)
	}
	seq := lastCommit(t, st).Seq

	for _, sdl := range []string{"type T { n: String label: String }", "type T { label: String }"} {
		before := lag.current(t, st.admin)
		if _, err := st.eng.PutSchema(context.Background(), st.admin, "admin", "db", sdl, engine.PutSchemaOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		// The retry answers the first answer, lagging or not.
		for _, pinned := range []*pinnedDB{before, nil} {
			lag.pin(pinned)
			if again, replayed := st.post(t, "k1", update); again != first || replayed != "true" {
				t.Errorf("after %q (lagging %v), the retry answered %s (replayed %q), the first %s", sdl, pinned != nil, again, replayed, first)
			}
		}
		// Without a key, both answer what the current schema says of it.
		lag.pin(before)
		lagging, _ := st.post(t, "", update)
		lag.pin(nil)
		current, _ := st.post(t, "", update)
		if lagging != current || !strings.Contains(current, `"code":"GRAPHQL_VALIDATION_FAILED"`) {
			t.Errorf("after %q, a mutation without a key answered\n%s lagging,\n%s knowing the change", sdl, lagging, current)
		}
	}
	if c := lastCommit(t, st); c.Seq != seq+2 {
		t.Errorf("commit %d after two schema changes from %d: a retry or a refused mutation wrote", c.Seq, seq)
	}
}
