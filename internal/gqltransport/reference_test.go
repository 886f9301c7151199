package gqltransport_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// The examples of the GraphQL subscriptions reference this API follows, run
// verbatim apart from host and auth. Its frames show bare data objects;
// Sluice sends GraphQL ExecutionResults ({"data":…}), as the graphql-sse
// protocol requires.

// referenceSDL has what the examples use: Person, and Dog inheriting from
// Animal, which has documents of its own ("only direct Animal documents").
const referenceSDL = `
type Person { name: String! }
interface Animal @concrete { name: String! }
type Dog implements Animal { name: String! }
`

func TestReferenceExamples(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", referenceSDL)
	insert(t, d, "people", `{"@type":"Person","@id":"charlie","name":"Charlie"}`)

	added := subscribe(t, d, "people", `subscription { Person_added { _id name } }`)
	filtered := subscribe(t, d, "people", `subscription {
  Person_added(filter: { name: { eq: "Alice" } }) {
    _id
    name
  }
}`)
	meta := subscribe(t, d, "people", `subscription {
  Person_added {
    _id
    name
    _CommitMetadata {
      _id
      _timestamp
      _datetime
      _change_type
    }
  }
}`)
	changeSet := subscribe(t, d, "people", `subscription {
  _ChangeSet {
    Person_added { _id name }
    Person_changed { _id name }
    Person_deleted { _id name }
    _CommitMetadata { _id _timestamp _datetime _change_type }
  }
}`)
	noChildren := subscribe(t, d, "people", `subscription {
  _ChangeSet(include_children: false) {
    Animal_added { _id name }
  }
}`)
	override := subscribe(t, d, "people", `subscription {
  _ChangeSet(include_children: false) {
    Animal_added(include_children: true) { _id name }
    Dog_added { _id name }
  }
}`)
	nd := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/people",
		`{"query": "subscription { Person_added { _id name } }"}`, nil, "Accept", ndjson)
	system := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/_system",
		`{"query": "subscription { UserDatabase_added { _id name } }"}`, nil, "Accept", sse)
	for _, s := range []*stream{added, filtered, meta, changeSet, noChildren, override, nd, system} {
		s.connected()
	}

	// One commit: Alice and Bob added, Charlie deleted (the change set
	// example's event).
	gql(t, d, "people", `mutation {
		_insertDocuments(json: "[{\"@type\":\"Person\",\"@id\":\"alice\",\"name\":\"Alice\"},{\"@type\":\"Person\",\"@id\":\"bob\",\"name\":\"Bob\"}]")
		_deleteDocuments(ids: ["Person/charlie"])
	}`)
	insert(t, d, "people", `[{"@type":"Animal","@id":"generic","name":"Generic"},{"@type":"Dog","@id":"rex","name":"Rex"}]`)
	d.CreateDatabase(t, "other", "")

	if _, data := added.nexts(2); data[0] != `{"data":{"Person_added":{"_id":"Person/alice","name":"Alice"}}}` ||
		data[1] != `{"data":{"Person_added":{"_id":"Person/bob","name":"Bob"}}}` {
		t.Fatalf("Person_added: %q", data)
	}
	if _, data := filtered.nexts(1); data[0] != `{"data":{"Person_added":{"_id":"Person/alice","name":"Alice"}}}` {
		t.Fatalf("filtered: %q", data)
	}
	metaRE := regexp.MustCompile(`^\{"data":\{"Person_added":\{"_id":"Person/alice","name":"Alice","_CommitMetadata":\{"_id":"2","_timestamp":[0-9.]+,"_datetime":"[0-9T:.-]+Z","_change_type":"added"\}\}\}\}$`)
	if _, data := meta.nexts(1); !metaRE.MatchString(data[0]) {
		t.Fatalf("commit metadata: %s", data[0])
	}
	csRE := regexp.MustCompile(`^\{"data":\{"_ChangeSet":\{"Person_added":\[\{"_id":"Person/alice","name":"Alice"\},\{"_id":"Person/bob","name":"Bob"\}\],"Person_changed":\[\],"Person_deleted":\[\{"_id":"Person/charlie","name":"Charlie"\}\],"_CommitMetadata":\{"_id":"2","_timestamp":[0-9.]+,"_datetime":"[^"]+","_change_type":"commit"\}\}\}\}$`)
	if _, data := changeSet.nexts(1); !csRE.MatchString(data[0]) {
		t.Fatalf("change set: %s", data[0])
	}
	if _, data := noChildren.nexts(1); data[0] != `{"data":{"_ChangeSet":{"Animal_added":[{"_id":"Animal/generic","name":"Generic"}]}}}` {
		t.Fatalf("include_children: false: %s", data[0])
	}
	if _, data := override.nexts(1); data[0] != `{"data":{"_ChangeSet":{"Animal_added":[{"_id":"Animal/generic","name":"Generic"},{"_id":"Dog/rex","name":"Rex"}],"Dog_added":[{"_id":"Dog/rex","name":"Rex"}]}}}` {
		t.Fatalf("per-field override: %s", data[0])
	}
	var lines []string
	for len(lines) < 2 {
		if f := nd.Next(); f[0] != "null" {
			lines = append(lines, withoutEventPosition(t, f[0]))
		}
	}
	if lines[0] != `{"data":{"Person_added":{"_id":"Person/alice","name":"Alice"}}}` || lines[1] != `{"data":{"Person_added":{"_id":"Person/bob","name":"Bob"}}}` {
		t.Fatalf("NDJSON: %q", lines)
	}
	if _, data := system.nexts(1); data[0] != `{"data":{"UserDatabase_added":{"_id":"UserDatabase/admin/other","name":"other"}}}` {
		t.Fatalf("system: %s", data[0])
	}

	// On-demand querying of the current commit's changes.
	if got := gql(t, d, "people", `query {
  _ChangeSet {
    Person_added { _id name }
  }
}`); got != `{"data":{"_ChangeSet":{"Person_added":[]}}}` {
		t.Fatalf("query _ChangeSet (the newest commit added animals only): %s", got)
	}

	// Finite operations over SSE: one next, then complete.
	fin := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/people", body(`{ Person { _id name } }`), nil, "Accept", sse)
	frames := fin.Ended()
	if len(frames) != 2 || frames[0][0] != "event: next" || withoutPosition(frames[0].Field("data")) != `{"data":{"Person":[{"_id":"Person/alice","name":"Alice"},{"_id":"Person/bob","name":"Bob"}]}}` ||
		frames[1].String() != "event: complete\ndata:" {
		t.Fatalf("finite operation frames: %q", frames)
	}

	// Error events: a query that does not parse is a 200 stream with an
	// errors next, then complete.
	bad := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/people", body(`subscription { Person_added { `), nil, "Accept", sse)
	frames = bad.Ended()
	if len(frames) != 2 || !strings.HasPrefix(frames[0].Field("data"), `{"errors":[{"message":`) || frames[1].String() != "event: complete\ndata:" {
		t.Fatalf("error frames: %q", frames)
	}
}
