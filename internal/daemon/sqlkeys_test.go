package daemon_test

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestSQLKeysAsTheAPIChecksThem: a document key written in SQL is held
// to the API's rules (schema.CheckKey), character by character, whatever
// the server's locale: every character the API refuses in a key
// (unicode.IsSpace, unicode.IsControl) is refused in SQL, and every other
// is taken. The check was a POSIX class, [[:space:][:cntrl:]], whose
// meaning is the locale's: in the C locale it took U+00A0, U+2028 and
// U+3000, and GET then answered 400 for the document.
func TestSQLKeysAsTheAPIChecksThem(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "keys", "type Note { text: String }")
	w := newSQLWriter(t, d, "keys")
	tbl := w.table("Note")
	// Every character the API refuses in a key (NUL aside: Postgres
	// text cannot hold it): 64 control characters and 25 spaces, 6 of
	// them controls too.
	var refused []string
	for r := rune(1); r <= utf8.MaxRune; r++ {
		if utf8.ValidRune(r) && schema.CheckKey("a"+string(r)+"b") != nil {
			refused = append(refused, strconv.Itoa(int(r)))
		}
	}
	if len(refused) != 64+25-6 {
		t.Errorf("the API refuses %d characters in a key, want 83: check sluice.check_document's", len(refused))
	}
	for _, n := range refused {
		err := sqlTx(w.url, "INSERT INTO "+tbl+" (_id) VALUES ('Note/a' || chr("+n+") || 'b')")
		if err == nil || !strings.Contains(err.Error(), "without whitespace or control characters") {
			t.Errorf("a key holding chr(%s): %v, want it refused", n, err)
		}
	}
	// And every other character is taken: each of the Basic Multilingual
	// Plane, which holds every one refused, and one in 61 of the others
	// (asked of the function itself, as Sluice's role: the million would
	// take 10 s, and be too many rows to insert).
	err := sqlTx(d.DatabaseURL, `SELECT count(*) FROM (SELECT generate_series(1, 65535) UNION ALL SELECT generate_series(65536, 1114111, 61)) c(n)
		WHERE n NOT BETWEEN 55296 AND 57343 AND n <> ALL ('{`+strings.Join(refused, ",")+`}'::int[])
			AND sluice.check_document('Note', jsonb_build_object('_id', 'Note/a' || chr(n) || 'b'), '{1}')::text = ''`)
	if err != nil {
		t.Errorf("a key the API takes: %v", err)
	}
	// The pattern naming them is read as written whatever the session's
	// standard_conforming_strings ("\u2028" read as "u2028" would refuse
	// the letter u, and take U+2028).
	sqlExec(t, w.url, "SET LOCAL standard_conforming_strings = off", "INSERT INTO "+tbl+" (_id) VALUES ('Note/u2028')")
	if err := sqlTx(w.url, "SET LOCAL standard_conforming_strings = off", "INSERT INTO "+tbl+" (_id) VALUES ('Note/a' || chr(8232))"); err == nil {
		t.Error("a key holding U+2028 written with standard_conforming_strings off was taken")
	}
	// The other rules: 1 to 255 bytes.
	for _, c := range []struct {
		key  string
		fail bool
	}{
		{"", true},
		{strings.Repeat("é", 127) + "x", false},
		{strings.Repeat("é", 128), true},
	} {
		err := sqlTx(w.url, "INSERT INTO "+tbl+" (_id) VALUES ('Note/"+c.key+"')")
		if c.fail != (err != nil) || err != nil && !strings.Contains(err.Error(), "the key must be 1 to 255 bytes") {
			t.Errorf("a key of %d bytes: %v", len(c.key), err)
		}
	}
	// Keys written in SQL read through the API: characters next to those
	// refused, and ones some locales call spaces (U+180E, U+200B, U+FEFF).
	for _, r := range []rune{0x21, 0x7e, 0xa1, 0xad, 0x180e, 0x200b, 0x2027, 0x202a, 0x2060, 0x2fff, 0x3001, 0xfeff, 0x1f600, 0x10ffff} {
		id := "Note/a" + string(r) + "b"
		sqlExec(t, w.url, fmt.Sprintf("INSERT INTO %s (_id) VALUES ('Note/a' || chr(%d) || 'b')", tbl, r))
		d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/keys?id="+url.QueryEscape(id), nil)
	}
	checkLogMatchesTables(t, d, "keys", "Note")
}
