package sluice

import _ "embed"

// SystemSchemaSDL is the schema of the _system database (schema.graphqls).
//
//go:embed schema.graphqls
var SystemSchemaSDL string
