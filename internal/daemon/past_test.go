package daemon_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

func TestPastQuick(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "hist", "type Person { name: String! age: Int }")
	pos := []string{a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/hist?type=Person", nil).Header.Get("Sluice-Position")}
	step := func(method, path, body string) {
		a.MustDo(t, 200, dt.Admin(), method, path, body)
		pos = append(pos, a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/hist?type=Person", nil).Header.Get("Sluice-Position"))
	}
	step("POST", "/api/document/admin/hist", `{"@type":"Person","@id":"alice","name":"Alice","age":30}`)
	step("PUT", "/api/document/admin/hist", `{"@type":"Person","@id":"Person/alice","name":"Alice","age":31}`)
	step("POST", "/api/document/admin/hist", `{"@type":"Person","@id":"bob","name":"Bob"}`)
	step("DELETE", "/api/document/admin/hist?id=Person/alice", "")
	for i, p := range pos {
		r := a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/hist?type=Person&as_list=true&as_of="+url.QueryEscape(p), nil)
		fmt.Println(i, p, strings.TrimSpace(string(r.Body)), r.Header.Get("Sluice-Position"))
	}
}

func TestPastQuickGQL(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "hist", "type Person { name: String! age: Int friend: Person }")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/hist", `[{"@type":"Person","@id":"alice","name":"Alice","age":30},{"@type":"Person","@id":"bob","name":"Bob","friend":"Person/alice"}]`)
	p1 := a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/hist?type=Person", nil).Header.Get("Sluice-Position")
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/hist", `{"@type":"Person","@id":"Person/alice","name":"Alicia","age":31}`)
	for _, q := range []string{
		`{ Person(asOf: "` + p1 + `", orderBy: {age: DESC}) { _id name age friend { name age } _CommitMetadata { _id } } }`,
		`{ Person(asOf: "` + p1 + `", filter: {friend: {name: {eq: "Alice"}}}) { _id name } }`,
		`{ Person(filter: {friend: {name: {eq: "Alice"}}}) { _id name } }`,
		`{ Person(asOf: "x-1-1") { _id name } }`,
		`{ a: Person(asOf: "` + p1 + `") { _id name } b: Person { name } }`,
	} {
		body := fmt.Sprintf(`{"query":%q}`, q)
		r := a.Do(t, dt.Admin(), "POST", "/api/graphql/admin/hist", body, "Content-Type", "application/json")
		fmt.Println(r.Status, string(r.Body))
	}
}

func TestPastQuickHistory(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "hist", "type Person { name: String! age: Int }")
	p0 := a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/hist?type=Person", nil).Header.Get("Sluice-Position")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/hist?author=ann&message=first", `{"@type":"Person","@id":"alice","name":"Alice","age":30}`)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/hist", `{"@type":"Person","@id":"Person/alice","name":"Alice","age":31}`)
	p2 := a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/hist?type=Person", nil).Header.Get("Sluice-Position")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/hist", `{"@type":"Person","@id":"bob","name":"Bob"}`)
	a.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/hist?id=Person/alice", "")
	for _, path := range []string{
		"/api/history/admin/hist?id=Person/alice",
		"/api/history/admin/hist?id=Person/alice&count=1",
		"/api/history/admin/hist?id=Person/bob",
		"/api/diff/admin/hist?from=" + p0,
		"/api/diff/admin/hist?from=" + p2,
		"/api/diff/admin/hist?from=" + p0 + "&to=" + p2,
		"/api/diff/admin/hist?from=" + p2 + "&to=" + p0,
	} {
		r := a.Do(t, dt.Admin(), "GET", path, nil)
		fmt.Println(path, r.Status, r.Header.Get("Link"), strings.TrimSpace(string(r.Body)))
	}
}
