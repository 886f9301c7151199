// Package doctest keeps the documentation true: it runs the docs' examples
// against real daemons and checks their links. Its tests:
//
//   - TestExamples runs every ```sh block that calls curl, in README.md and
//     each docs/*.md file, in document order against a fresh daemon per
//     file, as a reader pasting them top to bottom would (see
//     docs/development.md for the conventions a block follows);
//   - TestClientExamples and TestBrowserExample run the JavaScript examples
//     that docs/subscriptions.md shows whole (test/clients/examples,
//     test/browser/examples) across a restart of the daemon, and
//     TestDocsShowExamples keeps the docs' copies equal to those files;
//   - TestDocLinks checks that every relative link names a file, and every
//     fragment a heading;
//   - TestDocRoutes checks that every route the prose names (`GET /api/db`)
//     is one the router serves with that method.
package doctest
