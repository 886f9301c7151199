package daemon_test

import (
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestCommitMetadataUser: _CommitMetadata { _user } is the signed-in user
// who made the commit, whatever author the writer claimed, in a query of
// one class, of an interface (several classes), as of a past position
// and in a _ChangeSet. Found by review: GraphQL had only _author, which
// any writer sets to any name (?author=admin), and the console's Stream
// view showed it, so a writer could appear as the admin.
func TestCommitMetadataUser(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "claims", "interface Pet { name: String! }\ntype Cat implements Pet { indoor: Boolean }\ntype Dog implements Pet { good: Boolean }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wes","organization":"admin","password":"wes-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/claims", `{"user":"wes","role":"write"}`)
	res := d.MustDo(t, 200, dt.Basic("wes", "wes-password"), "POST", "/api/document/admin/claims?author=admin&message=not+me",
		`[{"@type":"Cat","@id":"Cat/tom","name":"Tom"},{"@type":"Dog","@id":"Dog/rex","name":"Rex"}]`)
	pos := res.Header.Get("Sluice-Position")
	if pos == "" {
		t.Fatal("the write answered no Sluice-Position")
	}
	const meta = `{"_author":"admin","_user":"wes"}`
	for _, c := range []struct{ query, want string }{
		{`{ Cat { _CommitMetadata { _author _user } } }`, `{"Cat":[{"_CommitMetadata":` + meta + `}]}`},
		{`{ Pet(orderBy: {name: ASC}) { name _CommitMetadata { _author _user } } }`,
			`{"Pet":[{"name":"Rex","_CommitMetadata":` + meta + `},{"name":"Tom","_CommitMetadata":` + meta + `}]}`},
		{`{ Pet(asOf: "` + pos + `", orderBy: {name: ASC}) { name _CommitMetadata { _author _user } } }`,
			`{"Pet":[{"name":"Rex","_CommitMetadata":` + meta + `},{"name":"Tom","_CommitMetadata":` + meta + `}]}`},
		{`{ _ChangeSet { _CommitMetadata { _author _user } } }`, `{"_ChangeSet":{"_CommitMetadata":` + meta + `}}`},
	} {
		if got := gqlData(t, d, dt.Admin(), "claims", c.query); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.query, got, c.want)
		}
	}
}
