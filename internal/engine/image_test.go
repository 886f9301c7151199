package engine

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestRedactedImagesLeaveOutFieldsOfTooManyValues: a change image logged
// before documents were bounded, with a field of more than
// schema.MaxValues values, is redacted for a reader (a change stream's
// and /api/changes' redaction, /api/history's) without that field,
// which is not decoded, the way a read of its row leaves it out; the
// reader's other fields are kept and the hidden one removed. Before, the
// field was decoded whole (a value each) and sent back.
func TestRedactedImagesLeaveOutFieldsOfTooManyValues(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(`type W { xs: [Int!] n: Int secret: String @private }`)
	if err != nil {
		t.Fatal(err)
	}
	image := []byte(`{"@id":"W/old","@type":"W","xs":[` + strings.Repeat("0,", schema.MaxValues) + `0],"n":7,"secret":"S-1"}`)
	const want = `{"@id":"W/old","@type":"W","n":7}`
	got, err := redactFor(sluice.RoleWrite, s, image)
	if err != nil || string(got) != want {
		t.Errorf("redactFor: %.200s %v, want %s", got, err, want)
	}
	got, err = redactHistory(sluice.RoleWrite, s, s, image)
	if err != nil || string(got) != want {
		t.Errorf("redactHistory: %.200s %v, want %s", got, err, want)
	}
}
