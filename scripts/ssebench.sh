#!/usr/bin/env bash
# Runs the ssebench fan-out measurement (see docs/benchmarks.md): Sluice and
# the kit's limit server alternate, each on a fresh process, and one JSON
# summary line per run is printed, then the ratios Sluice / limit.
#
#   scripts/ssebench.sh <kit-dir> [streams] [rate] [duration] [pairs] [source-addresses]
#
# source-addresses spreads the streams over that many loopback source
# addresses (127.0.0.1, .2, …), which more than about 28,000 streams to one
# port need (ephemeral ports); default one per 25,000 streams.
#
# kit-dir is the ssebench kit's directory (its loadgen and limit-server;
# the kit is not part of this repository). Needs Postgres server binaries (Sluice runs its embedded
# Postgres in a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: scripts/ssebench.sh <kit-dir> [streams] [rate] [duration] [pairs] [source-addresses]" >&2
  exit 2
fi
kit=$(cd "$1" && pwd)
n=${2:-1000}
rate=${3:-10}
duration=${4:-8s}
pairs=${5:-2}
srcs=${6:-0}
work=$(mktemp -d /tmp/ssebench.XXXXXX)
out=$work/results.jsonl
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

for t in loadgen limit-server; do (cd "$kit/$t" && go build -o "$work/$t" .); done
CGO_ENABLED=0 go build -trimpath -o "$work/sluice" ./cmd/sluice
chmod 755 "$work"
ulimit -n "$(ulimit -Hn)"

wait_http() { for _ in $(seq 1 600); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }

run_sluice() {
  local data=$work/data-$1
  mkdir -p "$data"; chmod 777 "$data"
  SLUICE_ADMIN_PASSWORD=root SLUICE_DATA_DIR=$data SLUICE_LISTEN=127.0.0.1:6363 SLUICE_LOG_LEVEL=warn "$work/sluice" serve &
  local pid=$!
  wait_http http://127.0.0.1:6363/readyz
  curl -sf -u admin:root -X POST http://127.0.0.1:6363/api/db/admin/bench \
    -d '{"schema":"type Tick { ts: BigInt! seq: Int! }"}' >/dev/null
  "$work/loadgen" -n "$n" -pid "$pid" -label sluice -src-ips "$srcs" \
    -url http://127.0.0.1:6363/api/graphql/admin/bench \
    -query 'subscription { Tick_added { ts seq } }' -header "Authorization: Basic YWRtaW46cm9vdA==" \
    -await-first-frame -connect-timeout 30s -settle 1s \
    -publish-url http://127.0.0.1:6363/api/document/admin/bench \
    -publish-body '{"@type":"Tick","ts":{{ts}},"seq":{{seq}}}' -publish-header "Authorization: Basic YWRtaW46cm9vdA==" \
    -publish-seq-key= -rate "$rate" -duration "$duration" -drain-timeout 5s -drain-idle 2s \
    -ts-key ts -seq-key seq -ts-unit ns -latency payload >>"$out"
  kill -TERM "$pid"; wait "$pid" || true
}

run_limit() {
  "$work/limit-server" -addr 127.0.0.1:7700 -queue 256 &
  local pid=$!
  sleep 0.5
  "$work/loadgen" -n "$n" -pid "$pid" -label limit -src-ips "$srcs" \
    -url http://127.0.0.1:7700/graphql \
    -query 'subscription { Tick_added { ts seq } }' \
    -await-first-frame -connect-timeout 30s -settle 1s \
    -publish-url http://127.0.0.1:7700/publish \
    -publish-body '{"@type":"Tick","ts":{{ts}},"seq":{{seq}}}' \
    -publish-seq-key= -rate "$rate" -duration "$duration" -drain-timeout 5s -drain-idle 2s \
    -ts-key ts -seq-key seq -ts-unit ns -latency payload >>"$out"
  kill -TERM "$pid"; wait "$pid" || true
}

for i in $(seq 1 "$pairs"); do run_sluice "$i"; run_limit; done
cat "$out"
python3 - "$out" <<'PY'
import json, math, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def gm(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
fields = {
    "cpu_us_per_event": lambda r: (r.get("cpu") or {}).get("server_us_per_event"),
    "rss_bytes_per_sub": lambda r: (r.get("rss") or {}).get("bytes_per_sub"),
    "delivered_eps": lambda r: r.get("delivered_eps"),
}
s = [r for r in runs if r.get("label") == "sluice"]
l = [r for r in runs if r.get("label") == "limit"]
for name, f in fields.items():
    a, b = [f(r) for r in s], [f(r) for r in l]
    ratios = [x / y for x, y in zip(a, b) if x and y]
    print(f"{name}: sluice {[round(x, 1) if x else x for x in a]} limit {[round(x, 1) if x else x for x in b]} ratio {gm(ratios):.3f}")
for r in s + l:
    lat, ev, con = r.get("latency_ms") or {}, r.get("events") or {}, r.get("connect") or {}
    print(f"{r['label']}: p50 {lat.get('p50')} p99 {lat.get('p99')} max {lat.get('max')} ms; lost {ev.get('lost')} of {ev.get('expected')}; {con.get('opened')} opened in {con.get('open_s')} s")
PY
