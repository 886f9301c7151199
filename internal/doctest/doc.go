// Package doctest runs the documentation's examples against real daemons,
// so that they cannot drift from what Sluice does. Its tests:
//
//   - TestExamples runs every ```sh block that calls curl, in README.md and
//     each docs/*.md file, in document order against a fresh daemon per
//     file, as a reader pasting them top to bottom would (see
//     docs/development.md for the conventions a block follows);
//   - TestClientExamples runs the Node examples the docs show
//     (test/clients/examples), including across a restart of the daemon.
package doctest
