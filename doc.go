// Package sluice holds the nouns every other Sluice package shares: database
// names, schema classes and fields, documents, commits and their changes,
// stream positions and the error type. It imports only the standard library so
// that every layer (storage, engine, HTTP, GraphQL, change feed) can depend on
// it without depending on each other.
package sluice
