// Package migrations embeds the numbered SQL files that create and evolve
// Sluice's own tables (schema "sluice"). internal/postgres applies them in
// order, each in one transaction with its version row, under a lock that
// only Sluice's role can take (a row of sluice.locks).
// File names are NNNN_name.sql; numbers start at 1 and have no gaps.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
