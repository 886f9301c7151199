// Package bench holds Sluice's end-to-end benchmarks (make bench). They run
// against a Postgres cluster with production durability (fsync and
// synchronous_commit on), started from the installed binaries, and compare
// each Sluice path with the same work done by raw pgx in the same run, since
// this machine is shared and noisy: only ratios within one run mean much.
// docs/benchmarks.md records the figures.
package bench
