package graph_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// stack is the GraphQL handler over a real engine and Postgres, without an
// HTTP server, so tests can put values (a statement counter) in the
// request context.
type stack struct {
	eng    *engine.Engine
	router http.Handler
	admin  *sluice.User
	db     string // "admin/<name>"
	url    string // the Postgres database
}

func newStack(t testing.TB, sdl string) *stack {
	t.Helper()
	return newStackWith(t, sdl, graph.Options{}, nil)
}

// newStackWith is newStack with handler options, and with wrap, when not
// nil, around the engine the handler reads and writes through.
func newStackWith(t testing.TB, sdl string, opts graph.Options, wrap func(graph.Store) graph.Store) *stack {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	dbURL := pgtest.NewDatabase(t)
	store, err := postgres.Open(ctx, dbURL, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(store, auth.New(store, 4, nil), logger, engine.Hooks{})
	if _, err := eng.Bootstrap(ctx, "pw"); err != nil {
		t.Fatal(err)
	}
	admin := &sluice.User{Name: "admin", Org: "admin", Superuser: true}
	if _, err := eng.CreateDatabase(ctx, admin, engine.NewDatabase{Org: "admin", Name: "db", Schema: sdl}); err != nil {
		t.Fatal(err)
	}
	var gs graph.Store = eng
	if wrap != nil {
		gs = wrap(eng)
	}
	if opts.Logger == nil {
		opts.Logger = logger
	}
	r := chi.NewRouter()
	r.Handle("/api/graphql/{org}/{db}", graph.NewHandler(gs, opts))
	return &stack{eng: eng, router: r, admin: admin, db: "admin/db", url: dbURL}
}

// do runs a GraphQL request as user u (the admin when nil) under ctx.
func (s *stack) do(ctx context.Context, t testing.TB, u *sluice.User, query string, vars map[string]any) gqlResult {
	t.Helper()
	if u == nil {
		u = s.admin
	}
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req := httptest.NewRequest(http.MethodPost, "/api/graphql/"+s.db, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req = req.WithContext(auth.WithUser(ctx, u))
	rec := httptest.NewRecorder()
	s.router.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, b)
	}
	var res gqlResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	res.raw = strings.TrimSuffix(string(b), "\n")
	return res
}

func (s *stack) query(t testing.TB, query string, vars map[string]any) gqlResult {
	t.Helper()
	return s.do(context.Background(), t, nil, query, vars)
}

// insert writes documents (a JSON array) in one commit.
func (s *stack) insert(t testing.TB, docs string) {
	t.Helper()
	var raw []map[string]any
	dec := json.NewDecoder(strings.NewReader(docs))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if _, err := s.eng.Insert(context.Background(), s.admin, "admin", "db", &docSource{docs: raw}, engine.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

type docSource struct {
	docs []map[string]any
	i    int
}

func (s *docSource) Next() (schema.RawDocument, error) {
	if s.i >= len(s.docs) {
		return schema.RawDocument{}, io.EOF
	}
	s.i++
	return schema.RawDocument{Map: s.docs[s.i-1]}, nil
}

// ids returns the _id of every object of the list in data field name.
func (r gqlResult) ids(t testing.TB, name string) []string {
	t.Helper()
	var data map[string][]struct {
		ID string `json:"_id"`
	}
	if err := json.Unmarshal(r.Data, &data); err != nil {
		t.Fatalf("decode %s: %v", r.raw, err)
	}
	out := []string{}
	for _, o := range data[name] {
		out = append(out, o.ID)
	}
	return out
}
