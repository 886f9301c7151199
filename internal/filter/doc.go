// Package filter is the typed form of a GraphQL document filter (the
// <Class>_Filter input of queries and subscriptions). Parse checks a filter
// input once; the result is evaluated in Go against a document (Match, used
// for subscription events) and compiled to SQL by internal/postgres (used
// for queries), with the same semantics:
//
//   - A comparison on an absent field is false, whatever the operator
//     (ne included), so _not of it is true.
//   - All keys of one input object, and all operators of one field filter,
//     must hold together ({age: {ge: 30, le: 40}} is a range).
//   - someHave on an absent or empty list is false; allHave is true.
//   - A filter through a reference holds when the referenced document exists
//     and matches.
//   - Strings compare byte-wise (SQL COLLATE "C"); numbers by value; DateTime
//     by instant.
//   - regex has one dialect, run by Go's regexp and by Postgres's ~ with the
//     same answers (CompileRegex): RE2 syntax, parsed here, keeping only
//     what both engines can mean the same way. The Postgres pattern is
//     generated from the parsed pattern, not copied from the client's text.
//     . matches any character, newline included (Postgres's default); \d \w
//     \s and [[:alpha:]]-style classes are ASCII, as in RE2, and are written
//     out as ranges for Postgres, whose own classes depend on the locale;
//     (?i) folds case as Go does (simple Unicode folding), written out as
//     classes; greediness (x*?, (?U)) changes nothing in a yes/no match.
//     Refused: \b and \B (a backspace and a class shorthand in Postgres),
//     \pN-style Unicode classes (different Unicode tables), (?m) line
//     anchors, repetition counts above 255 (Postgres's limit) and patterns
//     that Postgres compiles too slowly (see CompileRegex).
//
// Parse bounds the size of what it accepts (limits.go): a filter comes from
// untrusted input after GraphQL variables are substituted, and its cost in
// Postgres grows with its terms, its nesting and its regexes.
//
// Match has no statement_timeout: it remembers the result of each filter
// through a reference on each referenced document, so that its cost is the
// filter's nodes times the distinct documents it reaches rather than the
// paths through them, and stops past MaxMatchSteps or when MatchContext's
// context is done.
//
// The package depends only on the domain package, so both the GraphQL layer
// and the storage layer (internal/postgres, below it) can use it.
package filter
