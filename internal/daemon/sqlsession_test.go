package daemon_test

import (
	"fmt"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// sessionSDL has a field of every kind whose text Postgres writes by the
// session's settings: a Float and a DateTime column, and lists of them.
const sessionSDL = `type Note { text: String x: Float at: DateTime b: BigInt xs: [Float!] ds: [DateTime!] data: JSON }`

// sessionSettings are the settings another role may set in its session
// that change how Postgres writes values as text, or how it reads the
// capture functions' own SQL.
var sessionSettings = [][]string{
	{"SET LOCAL extra_float_digits = -15", "SET LOCAL TimeZone = 'Asia/Kolkata'"},
	{"SET LOCAL extra_float_digits = 0", "SET LOCAL TimeZone = 'America/St_Johns'", "SET LOCAL DateStyle = 'SQL, DMY'"},
	{"SET LOCAL DateStyle = 'German'", "SET LOCAL IntervalStyle = 'sql_standard'", "SET LOCAL TimeZone = 'Pacific/Chatham'"},
	{"SET LOCAL DateStyle = 'Postgres, MDY'", "SET LOCAL IntervalStyle = 'iso_8601'", "SET LOCAL bytea_output = 'escape'", "SET LOCAL TimeZone = 'Europe/Amsterdam'"},
	{"SET LOCAL standard_conforming_strings = off", "SET LOCAL extra_float_digits = 1"},
}

// TestSQLWritesUnderAnySessionSettings: the image a SQL write records of
// a row does not depend on the writer's session settings. With
// extra_float_digits = -15 Postgres wrote a Float 3.14159265 as 3, and in
// Asia/Kolkata a DateTime before 1900 with an offset in seconds
// (+05:53:28), which RFC 3339 has no room for: the log then held 3 and no
// DateTime, while the table held both. Whatever the settings, each change's
// after image is the document as the table holds it, and its before image
// the document as the change before left it (UPDATE, DELETE and TRUNCATE
// record one); and with standard_conforming_strings off, the checks still
// refuse a DateTime in a list that RFC 3339 does not allow.
func TestSQLWritesUnderAnySessionSettings(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "sess", sessionSDL)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/sess", `{"@type":"Note","@id":"api","text":"t","x":3.14159265,
		"at":"1880-01-01T00:00:00Z","b":"12345678901234567890","xs":[0.1,1e300],"ds":["1880-01-01T00:00:00.5Z"],"data":{"f":0.1}}`)
	w := newSQLWriter(t, d, "sess")
	tbl := w.table("Note")
	for i, set := range sessionSettings {
		stmts := append(append([]string(nil), set...),
			"UPDATE "+tbl+" SET text = 'touched "+fmt.Sprint(i)+"' WHERE _id = 'Note/api'",
			fmt.Sprintf(`INSERT INTO %s (_id, x, at, b, xs, ds) VALUES ('Note/sql%d', 2.718281828459045, '1900-06-01T12:34:56.789Z', 10,
				'[0.1, 3.14159265]', '["1900-06-01T12:00:00Z"]')`, tbl, i),
			fmt.Sprintf("UPDATE %s SET x = x * 3, at = at - interval '100 years' WHERE _id = 'Note/sql%d'", tbl, i))
		if i > 0 {
			stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE _id = 'Note/sql%d'", tbl, i-1))
		}
		sqlExec(t, w.url, stmts...)
		checkLogMatchesTables(t, d, "sess", "Note")
		checkBeforeImages(t, d, "sess")
		// A DateTime in a list is RFC 3339 whatever the settings (with
		// standard_conforming_strings off, "\." in a pattern read as "."
		// let this through, and Postgres reads it as 01:00 UTC).
		err := sqlTx(w.url, append(append([]string(nil), set...),
			"INSERT INTO "+tbl+` (_id, ds) VALUES ('Note/bad', '["2020-01-01T00:00:00Z1Z"]')`)...)
		if err == nil || !strings.Contains(err.Error(), "Note.ds holds") {
			t.Errorf("%v: a DateTime that is not RFC 3339 in a list: %v", set, err)
		}
	}
	// TRUNCATE records every row's image as its before image.
	sqlExec(t, w.url, append(append([]string(nil), sessionSettings[0]...), "TRUNCATE "+tbl)...)
	checkLogMatchesTables(t, d, "sess", "Note")
	checkBeforeImages(t, d, "sess")
}

// checkBeforeImages fails unless, replaying database admin/db's log from
// its start, each change's before image is the document as the log left
// it, and a change that deletes a document has one.
func checkBeforeImages(t testing.TB, d *dt.Daemon, db string) {
	t.Helper()
	walkLog(t, d, db, func(id, before, left string) {
		if before != left {
			t.Errorf("%s: the change's before image\n%s\nthe log left\n%s", id, before, left)
		}
	})
}
