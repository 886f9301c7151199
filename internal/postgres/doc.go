// Package postgres is Sluice's storage: every SQL statement lives here. It
// applies migrations, keeps users, tokens, roles and databases, creates one
// Postgres schema per database with one table per document class, and writes
// commits: the documents, one change row per changed document and the commit
// row, in one transaction, with the commit's sequence number allocated last.
//
// Every connection runs with JIT off and a statement timeout, and a
// statement whose context ends is cancelled on the server (see Open).
// Untrusted text is checked before it reaches SQL (checkText). History is
// read in pages bounded in bytes (Changes, Log), never a whole commit at
// once for a client.
//
// pgx types never leave this package; errors are mapped to *sluice.Error by
// mapError.
package postgres
