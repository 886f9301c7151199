package rest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

func databaseJSON(d *sluice.Database) map[string]any {
	return map[string]any{
		"path":         d.Path(),
		"organization": d.Org,
		"name":         d.Name,
		// null when it has none, as its UserDatabase document in _system
		// shows it: "" is no label.
		"label":          noneAsNull(d.Label),
		"comment":        noneAsNull(d.Comment),
		"schema_version": d.SchemaVersion,
		// Where its tables are, for roles granted access to them in SQL.
		"postgres_schema": engine.PostgresSchema(d),
		// How long it keeps its commits; null: the server's log_retention.
		"log_retention": retentionJSON(d.LogRetention),
	}
}

// noneAsNull returns s, or nil for "": a database's label or comment it
// has none of.
func noneAsNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// retentionJSON returns a database's log retention as the API shows it:
// a duration ("8760h", "0" for ever), or null for the server's.
func retentionJSON(r *time.Duration) any {
	if r == nil {
		return nil
	}
	if *r == 0 {
		return "0"
	}
	s := r.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// patchDatabase changes a database's settings; the body names the ones
// it changes. log_retention is how long the database keeps its commits
// (a duration such as "8760h", "0" for ever, null for the server's
// log_retention).
func (a *api) patchDatabase(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	var body struct {
		LogRetention json.RawMessage `json:"log_retention"`
	}
	if err := decodeSmallJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	if body.LogRetention == nil {
		writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "the body changes nothing: give log_retention"))
		return
	}
	var retention *time.Duration
	if string(body.LogRetention) != "null" {
		var text string
		if err := json.Unmarshal(body.LogRetention, &text); err != nil {
			writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "log_retention: want a duration such as \"8760h\", \"0\" to keep every commit, or null for the server's"))
			return
		}
		d, err := time.ParseDuration(text)
		if err := sluice.DurationTooLong(text); err != nil {
			writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "log_retention %s: %v", sluice.Echo(text), err))
			return
		}
		if err != nil {
			writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "log_retention %s: want a duration such as \"8760h\", \"0\" to keep every commit, or null for the server's", sluice.Echo(text)))
			return
		}
		retention = &d
	}
	org, name := dbPath(r)
	d, err := a.Engine.SetLogRetention(r.Context(), userFrom(r), org, name, retention)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(databaseJSON(d)))
}

func (a *api) listDatabases(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	ds, roles, err := a.Engine.DatabasesWithRoles(r.Context(), userFrom(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(ds))
	for i, d := range ds {
		j := databaseJSON(d)
		j["role"] = roles[i].String()
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) getDatabase(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	u := userFrom(r)
	d, _, err := a.Engine.Database(r.Context(), u, org, name, sluice.RoleRead)
	if err != nil {
		writeError(w, r, err)
		return
	}
	role, err := a.Engine.Role(r.Context(), u, d)
	if err != nil {
		writeError(w, r, err)
		return
	}
	j := databaseJSON(d)
	j["role"] = role.String()
	writeJSON(w, http.StatusOK, success(j))
}

func (a *api) createDatabase(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	var body struct {
		Label   string `json:"label"`
		Comment string `json:"comment"`
		Schema  string `json:"schema"`
	}
	// Who may create it first, then a body of at most its fields' sizes:
	// read before them, any signed-in user's 64 MiB were held to be
	// refused. Its schema is max_schema_bytes at most, six times that
	// written as \u escapes, beside a label and a comment of a few KiB.
	org, name := dbPath(r)
	if u := userFrom(r); !u.Superuser && u.Org != org {
		writeError(w, r, sluice.Errorf(sluice.CodeForbidden, "user %s may only create databases in organization %s", u.Name, u.Org))
		return
	}
	if r.ContentLength != 0 {
		max := 6*a.Engine.MaxSchemaBytes() + 64<<10
		if err := decodeJSONWithin(w, r, &body, max, "a database: six times max_schema_bytes, and a label and a comment"); err != nil && !isEmptyBody(err) {
			writeError(w, r, err)
			return
		}
	}
	d, err := a.Engine.CreateDatabase(r.Context(), userFrom(r), engine.NewDatabase{
		Org: org, Name: name, Label: body.Label, Comment: body.Comment, Schema: body.Schema,
	})
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, success(databaseJSON(d)))
}

func isEmptyBody(err error) bool {
	return sluice.ErrorMessage(err) == "the request body is empty: expected a JSON object"
}

func (a *api) deleteDatabase(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	if err := a.noBody(w, r, "deleting a database"); err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	if err := a.Engine.DeleteDatabase(r.Context(), userFrom(r), org, name); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(map[string]any{"deleted": org + "/" + name}))
}

func (a *api) getSchema(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	s, err := a.Engine.Schema(r.Context(), userFrom(r), org, name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	privateAnswer(w)
	w.Header().Set("ETag", schemaETag(s.Version, s.Role))
	w.Header().Set("Content-Type", "application/graphql; charset=utf-8")
	downloadAs(w, name, ".graphql")
	_, _ = io.WriteString(w, s.SDL)
}

// schemaETag returns the entity tag of a schema at version as role reads
// it: the version alone for an admin, who reads the whole SDL and is the
// one who may change it ("3", what PUT's If-Match takes), the version and
// the role for the others, who read a view of it ("3-read"), so that a
// cache never answers one role's view for another's.
func schemaETag(version int, role sluice.Role) string {
	if role >= sluice.RoleAdmin {
		return `"` + strconv.Itoa(version) + `"`
	}
	return `"` + strconv.Itoa(version) + "-" + role.String() + `"`
}

// schemaPrecondition returns the schema version a PUT /api/schema's
// If-Match expects (0: none): one strong tag, the version as GET's ETag
// (or a dry run's schema_version) gave it, such as "3".
func schemaPrecondition(r *http.Request) (int, error) {
	im := r.Header.Values("If-Match")
	if len(im) == 0 {
		return 0, nil
	}
	tag := strings.TrimSpace(strings.Join(im, ","))
	if quoted, ok := strings.CutPrefix(tag, `"`); ok {
		if v, err := strconv.Atoi(strings.TrimSuffix(quoted, `"`)); err == nil && v > 0 && `"`+strconv.Itoa(v)+`"` == tag {
			return v, nil
		}
	}
	// Anything else (*, a weak tag, a list, a view's tag) names no one
	// version an admin read: refused rather than taken as no
	// precondition, which would let the change through.
	return 0, sluice.Errorf(sluice.CodeInvalid, "If-Match: %s is not a schema version: give the schema version the change expects, in quotes, as GET /api/schema answers it to an admin in its ETag (or a dry run in schema_version), such as \"3\"", shownTag(tag))
}

// putSchema takes the SDL as the raw body (any content type) and answers
// with the changes it applied, or, with dry_run=true, with what it would
// do (see previewSchema). With If-Match, either is done only if the
// schema is at the version it names (412 otherwise): so that "Apply"
// makes the change its preview showed, not one against a schema another
// admin changed since (whose additions a forced change would drop).
func (a *api) putSchema(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "force", "dry_run")
	if err != nil {
		writeError(w, r, err)
		return
	}
	force, err := boolParam(q, "force")
	if err != nil {
		writeError(w, r, err)
		return
	}
	dryRun, err := boolParam(q, "dry_run")
	if err != nil {
		writeError(w, r, err)
		return
	}
	version, err := schemaPrecondition(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	// The role first, then at most max_schema_bytes: read before them,
	// any signed-in user's 64 MiB were held to be refused (four at once
	// held 550 MB).
	org, name := dbPath(r)
	if _, _, err := a.Engine.Database(r.Context(), userFrom(r), org, name, sluice.RoleAdmin); err != nil {
		writeError(w, r, err)
		return
	}
	body, err := readWithin(w, r, a.Engine.MaxSchemaBytes(), "a schema: max_schema_bytes")
	if err != nil {
		writeError(w, r, err)
		return
	}
	if err := checkSchemaBody(body); err != nil {
		writeError(w, r, err)
		return
	}
	if dryRun {
		a.previewSchema(w, r, org, name, string(body), version)
		return
	}
	res, err := a.Engine.PutSchema(r.Context(), userFrom(r), org, name, string(body), engine.PutSchemaOptions{Force: force, Version: version})
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set("ETag", schemaETag(res.Version, sluice.RoleAdmin))
	changes := make([]string, 0, len(res.Changes))
	for _, c := range res.Changes {
		changes = append(changes, c.Reason)
	}
	out := map[string]any{"schema_version": res.Version, "changes": changes}
	if res.Commit != nil {
		out["commit"] = res.Commit.ID()
	}
	writeJSON(w, http.StatusOK, success(out))
}

// checkSchemaBody refuses a PUT /api/schema body that cannot be the
// schema its sender meant: an empty one (a script's unset $SCHEMA), which
// as SDL declares no class and so, with force=true, dropped every class
// and document, the 409 before it having advised just that; and JSON,
// such as POST /api/db's {"schema": …}, which was refused as SDL with
// "line 1, column 1: Unexpected {", not saying what the body should be.
// SDL never starts with "{" (a schema is type, enum and interface
// definitions, each starting with a name or a description), so a leading
// "{" tells JSON. A schema of only comments is deliberate: it goes on.
func checkSchemaBody(body []byte) error {
	// What GraphQL ignores before a definition, comments aside: white
	// space, line ends, commas and a byte order mark.
	sdl := bytes.TrimLeft(body, " \t\r\n,\ufeff")
	if len(sdl) == 0 {
		return sluice.Errorf(sluice.CodeInvalid, "the request body is empty: PUT /api/schema takes the new schema, its SDL, as the body (such as --data-binary @schema.graphql), and changes nothing without one; to drop every class, send a schema of only a comment (# no classes) with force=true")
	}
	if sdl[0] == '{' {
		return sluice.Errorf(sluice.CodeInvalid, "the request body starts with \"{\": PUT /api/schema takes the SDL itself as its body (such as type Person { name: String }), not JSON; {\"schema\": …} is the body of POST /api/db, which creates a database")
	}
	return nil
}

// previewSchema answers what putting sdl would do, changing nothing: each
// change with the number of stored documents it affects and the first of
// their ids, whether it needs force=true, and why it would be refused even
// so.
func (a *api) previewSchema(w http.ResponseWriter, r *http.Request, org, name, sdl string, version int) {
	p, err := a.Engine.PreviewSchema(r.Context(), userFrom(r), org, name, sdl, version)
	if err != nil {
		writeError(w, r, err)
		return
	}
	changes := make([]map[string]any, 0, len(p.Changes))
	for _, c := range p.Changes {
		ids := c.IDs
		if ids == nil {
			ids = []string{}
		}
		changes = append(changes, map[string]any{"change": c.Reason, "destructive": c.Destructive, "documents": c.Documents, "ids": ids})
	}
	refused := p.Refused
	if refused == nil {
		refused = []string{}
	}
	writeJSON(w, http.StatusOK, success(map[string]any{
		"dry_run": true, "schema_version": p.Version, "changes": changes, "force_needed": p.Force, "refused": refused,
	}))
}
