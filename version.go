package sluice

import (
	"fmt"
	"strconv"
	"strings"
)

// A document's version names the commit that last wrote it: every write
// of a document, by the API or in SQL, stamps its row with the uid of the
// commit it makes (a number drawn from one Postgres sequence, never
// reused), so the version is the same on every replica, changes with
// every committed change of the document, and costs nothing to keep.
// Every document a commit writes gets the commit's version. Clients treat
// it as opaque and compare it for equality only.

// VersionOf returns the version of the documents written by the commit
// with uid uid (Commit.UID).
func VersionOf(uid int64) string { return strconv.FormatInt(uid, 36) }

// ParseVersion returns the commit uid a version names, and false when v
// is not a version (it then matches no document).
func ParseVersion(v string) (int64, bool) {
	if v == "" || len(v) > 13 || v[0] == '0' {
		return 0, false
	}
	uid, err := strconv.ParseInt(v, 36, 64)
	if err != nil || uid <= 0 || VersionOf(uid) != v {
		return 0, false
	}
	return uid, true
}

// A document's entity tag (REST's ETag) names one representation of it:
// the document at its version, as a role reads it. A role that reads
// every field of the schema reads the whole document, whose tag is the
// version alone ("3f"); a role that does not reads a view of it, whose
// tag adds the view's name, the role and the schema version whose field
// protections it applies ("3f-read-7"). A schema change that drops
// stored values keeps the versions of the documents it rewrites, so once
// one could take values from a class's documents, the whole document's
// tag names the last that did as the admin's view ("3f-admin-9"). A read
// compares tags whole, so a cache filled under one view never answers for
// another; a write takes the tag of any view of the version it expects
// (VersionOfTag).

// ViewName returns the name of the view of documents that role reads
// under schema version schemaVersion when it hides some of its fields,
// and, with RoleAdmin, of the whole documents of a class as of the last
// schema version schemaVersion that dropped stored values of theirs.
func ViewName(role Role, schemaVersion int) string {
	return role.String() + "-" + strconv.Itoa(schemaVersion)
}

// VersionOfTag returns the version that opaque, the text between an
// entity tag's quotes, names: opaque itself, or the version before a
// ViewName. Anything else is returned whole: a string no version equals.
func VersionOfTag(opaque string) string {
	version, view, ok := strings.Cut(opaque, "-")
	if !ok {
		return opaque
	}
	role, schemaVersion, ok := strings.Cut(view, "-")
	r, known := ParseRole(role)
	n, err := strconv.Atoi(schemaVersion)
	if !ok || !known || err != nil || n <= 0 || ViewName(r, n) != view || version == "" {
		return opaque
	}
	return version
}

// Precondition is what a conditional write expects of a document before
// it writes it: If-Match, If-None-Match: *, "@version" or _version. The
// zero Precondition expects nothing.
type Precondition struct {
	// Version, when not empty, is the version the document must have,
	// compared whole: a string that is no version (such as "*", which
	// If-Match: "*" names) matches no document.
	Version string
	// Exists requires that the document exists, whatever its version
	// (If-Match: *, the unquoted wildcard, which no version string
	// gives).
	Exists bool
	// Absent requires that the document does not exist.
	Absent bool
}

// None reports whether p expects nothing.
func (p Precondition) None() bool { return p.Version == "" && !p.Exists && !p.Absent }

// Holds reports whether a document whose current version is current
// ("" when it does not exist) meets p.
func (p Precondition) Holds(current string) bool {
	switch {
	case p.Absent:
		return current == ""
	case p.Exists:
		return current != ""
	case p.Version != "":
		return current != "" && current == p.Version
	}
	return true
}

// StaleDocument names a document that did not meet the precondition of a
// write, with its current version ("" when it does not exist).
type StaleDocument struct {
	ID      string
	Version string
}

// StaleError is the error of a conditional write whose preconditions did
// not hold: a PreconditionFailed *Error (Unwrap) whose message names every
// stale document with its current version. Nothing of the write is
// written.
type StaleError struct {
	Docs []StaleDocument
	// OfOne is set when the write named one document: the current
	// version of Docs[0] is then the current version of what the request
	// targeted (a 412's ETag), which it is not for a request of several.
	OfOne bool
	err   *Error
}

// NewStaleError returns the error of a write whose documents docs did not
// meet its preconditions.
func NewStaleError(docs []StaleDocument) *StaleError {
	state := func(d StaleDocument) string {
		if d.Version == "" {
			return "it does not exist"
		}
		return "its version is " + d.Version
	}
	var msg string
	if len(docs) == 1 {
		msg = fmt.Sprintf("document %s is not as the request expected (%s); nothing was written; read it again and retry", docs[0].ID, state(docs[0]))
	} else {
		parts := make([]string, len(docs))
		for i, d := range docs {
			parts[i] = fmt.Sprintf("%s (%s)", d.ID, state(d))
		}
		msg = fmt.Sprintf("%d documents are not as the request expected: %s; nothing was written; read them again and retry", len(docs), strings.Join(parts, ", "))
	}
	return &StaleError{Docs: docs, err: Errorf(CodePrecondition, "%s", msg)}
}

func (e *StaleError) Error() string { return e.err.Message }

// Unwrap returns the PreconditionFailed *Error.
func (e *StaleError) Unwrap() error { return e.err }
