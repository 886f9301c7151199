#!/usr/bin/env bash
# Runs the peer benchmark (make bench-peer): Sluice against PostGraphile 4
# on one Postgres cluster and one table's rows, five cells alternating
# (internal/bench/peer_test.go, BenchmarkPeer; figures in
# docs/benchmarks.md). Installs what it needs when it is missing: wrk from
# Debian's packages, and postgraphile@4 with npm into a scratch directory
# (PostGraphile 5 needs Node 22; this uses Node 20).
#
#   scripts/peerbench.sh [pairs] [seconds]
#
# pairs: alternating rounds of every cell (default 3); seconds: the length
# of each read and batch cell (default 10; single inserts run twice as
# long). PEERBENCH_CELLS, a regular expression, runs only the cells whose
# names match (e.g. PEERBENCH_CELLS=documents). PEERBENCH_DIR keeps the
# npm install between runs (default ${TMPDIR:-/tmp}/sluice-peer).
# PEERBENCH_BASELINE, a list of sluice binaries separated by colons, runs
# those builds too, in turns (to compare builds); PEERBENCH_PERF, a
# directory, records perf profiles of each Sluice in the first pair.
set -euo pipefail
cd "$(dirname "$0")/.."

pairs=${1:-3}
seconds=${2:-10}
dir=${PEERBENCH_DIR:-${TMPDIR:-/tmp}/sluice-peer}

if ! command -v wrk >/dev/null 2>&1; then
  echo "peerbench: installing wrk"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk >/dev/null
fi
if [ ! -x "$dir/node_modules/.bin/postgraphile" ]; then
  echo "peerbench: installing postgraphile@4 into $dir"
  mkdir -p "$dir"
  (cd "$dir" && { [ -f package.json ] || npm init -y >/dev/null; } &&
    npm install --no-audit --no-fund --loglevel=error postgraphile@4)
fi
echo "peerbench: $(node --version), postgraphile $(node -p "require('$dir/node_modules/postgraphile/package.json').version"), $(wrk --version 2>&1 | head -1)"

PEERBENCH_POSTGRAPHILE="$dir/node_modules/.bin/postgraphile" \
PEERBENCH_PAIRS=$pairs PEERBENCH_SECONDS=$seconds \
  go test -run '^$' -bench '^BenchmarkPeer$' -benchtime 1x -timeout 60m ./internal/bench/
