#!/usr/bin/env bash
# Measures what one large commit costs a replica that streams it (issue 14,
# docs/benchmarks.md "Large commits"): daemon A (embedded Postgres) takes
# one commit of N documents; daemon B, on the same Postgres, serves 4 REST
# change streams, 2 stalled REST streams (connected, never reading) and 4
# distinct GraphQL subscriptions. Prints B's idle and peak RSS, whether
# every live subscriber got all N events, and the peak RSS of a fresh
# daemon answering /api/changes?after=0&limit=1 on that commit.
#
#   scripts/bigcommit.sh [documents]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
work=$(mktemp -d /tmp/bigcommit.XXXXXX)
chmod 755 "$work"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -trimpath -o "$work/sluice" ./cmd/sluice
mkdir -p "$work/a"; chmod 777 "$work/a"
auth=admin:root
wait_ready() { for _ in $(seq 1 600); do curl -sf -o /dev/null "$1/readyz" && return 0; sleep 0.1; done; echo "no answer from $1" >&2; exit 1; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

SLUICE_ADMIN_PASSWORD=root SLUICE_DATA_DIR=$work/a SLUICE_LISTEN=127.0.0.1:6401 SLUICE_LOG_LEVEL=warn "$work/sluice" serve &
a=$!
wait_ready http://127.0.0.1:6401
url="host=$work/a/pg port=5432 user=postgres dbname=sluice sslmode=disable"
SLUICE_ADMIN_PASSWORD=root SLUICE_DATABASE_URL=$url SLUICE_LISTEN=127.0.0.1:6402 SLUICE_LOG_LEVEL=warn "$work/sluice" serve &
b=$!
wait_ready http://127.0.0.1:6402
curl -sf -u $auth -X POST http://127.0.0.1:6401/api/db/admin/big \
  -d '{"schema":"type Person { name: String! email: String! age: Int }"}' >/dev/null
python3 - "$n" >"$work/body.ndjson" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print('{"@type":"Person","@id":"p%d","name":"Person number %d","email":"person%d@example.com","age":%d}' % (i, i, i, i % 90))
PY

B=http://127.0.0.1:6402
for i in 1 2 3 4; do
  curl -sN -u $auth "$B/api/subscribe/admin/big/Person" | grep -c '^event: entity.create' >"$work/rest$i" &
done
for i in 1 2; do # stalled: connect, never read
  python3 - <<PY &
import socket, base64, time
s = socket.create_connection(("127.0.0.1", 6402))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.sendall(b"GET /api/subscribe/admin/big/Person HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + base64.b64encode(b"$auth") + b"\r\n\r\n")
time.sleep(3600)
PY
done
i=0
for sel in '_id' '_id name' '_id email' 'name age'; do
  i=$((i + 1))
  curl -sN -u $auth -H 'Accept: text/event-stream' -H 'Content-Type: application/json' "$B/api/graphql/admin/big" \
    -d "{\"query\":\"subscription { Person_added { $sel } }\"}" | grep -c '^event: next' >"$work/gql$i" &
done
sleep 2
idle=$(rss $b)
start=$(date +%s.%N)
curl -sf -u $auth -X POST -H 'Content-Type: application/x-ndjson' --data-binary @"$work/body.ndjson" \
  http://127.0.0.1:6401/api/document/admin/big >/dev/null
echo "commit of $n documents: $(echo "$(date +%s.%N) - $start" | bc) s"
# Wait until every live subscriber's stream has delivered all events: the
# counts are read once their curl ends, so end them after the log shows
# all delivered (sluice_stream_events_delivered_total on B).
want=$((n * 8))
for _ in $(seq 1 1200); do
  got=$(curl -s -u $auth $B/metrics | awk '/^sluice_stream_events_delivered_total/ {s+=$2} END {print s+0}')
  [ "${got%.*}" -ge "$want" ] && break
  sleep 0.5
done
echo "delivered on B: $got of $want (4 REST + 4 GraphQL live subscribers)"
echo "B: idle RSS $((idle / 1024)) MB, peak RSS $(($(hwm $b) / 1024)) MB"
kill $b; wait $b 2>/dev/null || true
sleep 1
for f in "$work"/rest* "$work"/gql*; do echo "$(basename "$f"): $(cat "$f") events"; done

SLUICE_ADMIN_PASSWORD=root SLUICE_DATABASE_URL=$url SLUICE_LISTEN=127.0.0.1:6403 SLUICE_LOG_LEVEL=warn "$work/sluice" serve &
c=$!
wait_ready http://127.0.0.1:6403
before=$(rss $c)
bytes=$(curl -sf -u $auth 'http://127.0.0.1:6403/api/changes/admin/big?after=0&limit=1' | wc -c)
echo "/api/changes?after=0&limit=1: $bytes bytes; fresh daemon RSS $((before / 1024)) MB, peak $(($(hwm $c) / 1024)) MB"
