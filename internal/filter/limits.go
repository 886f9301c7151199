package filter

// The bounds Parse enforces on a filter. A filter arrives after GraphQL
// variables are substituted, so a limit on the query text alone would not see
// it; Parse sees every filter on every path (queries, subscriptions,
// _ChangeSet). Each one is far above what a hand-written or generated filter
// needs and far below what hurts the server: a huge _or kept a Postgres backend
// busy for minutes, and an _and of 100,000 overflowed the 65,535 parameters of
// a statement (docs/benchmarks.md, "Measured choices in the code"). They are
// constants rather than configuration: no sane client meets them, and raising
// them only reopens the hole.
const (
	// MaxTerms bounds the terms of a filter: every key given a value, at
	// any depth ({name: {eq: "x"}} is two), and every element of an _and
	// or _or list.
	MaxTerms = 1000
	// MaxDepth bounds the nesting of filter objects ({_not: {name: {eq:
	// "x"}}} is three deep), so that a hostile input cannot make a deep
	// recursion or a deeply nested SQL statement.
	MaxDepth = 32
	// MaxIDs bounds the list of _ids.
	MaxIDs = 1000
	// MaxRegexBytes bounds one regex pattern.
	MaxRegexBytes = 1000
	// MaxRegexes bounds the different regex patterns of one filter.
	// Postgres keeps the 32 regexes it compiled last per connection; a
	// statement with more than that recompiles them for every row.
	MaxRegexes = 16
	// MaxNumberBytes bounds the text of a number (a JSON number or a BigInt
	// string) and the magnitude of its exponent: exact conversion of a huge one
	// costs tens of milliseconds or more (docs/benchmarks.md, "Measured choices
	// in the code").
	MaxNumberBytes = 1000
)

// MaxMatchSteps bounds the steps of one evaluation of a filter in Go
// (Match, MatchContext: subscriptions and _ChangeSet) beneath references,
// where no statement_timeout stops it: each step is a filter node
// evaluated on one object or one list element of a document a reference
// reached. Evaluation remembers the result of each filter through a
// reference on each referenced document, so it costs at most the
// filter's nodes times the distinct documents it reaches times their
// lists' lengths; the bound is far above that for any filter and data a
// request can sensibly read, and about a second of one core. The
// evaluation on the matched document itself is not counted: it costs at
// most the filter's nodes times the document's size (a filter without
// references never reaches the bound, whatever that size).
const MaxMatchSteps = 10_000_000
