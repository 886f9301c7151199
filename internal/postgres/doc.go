// Package postgres is Sluice's storage: every SQL statement lives here. It
// applies migrations, keeps users, tokens, roles and databases, creates one
// Postgres schema per database with one table per document class, and owns
// the commit path: DB.Write is the one entry point of every write. A commit
// writes, in one transaction, the documents, their changes (one
// sluice.changes row per batch of changes, holding their ids, operations
// and before and after images as arrays: migrations 3 and 4) and the
// commit row, with the commit's sequence number allocated last and COMMIT
// sent in the same round trip. Concurrent small writes to one database
// share a transaction (group commit, group.go), and the function set with
// OnCommit is told of every commit once it is durable.
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
