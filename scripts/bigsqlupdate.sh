#!/usr/bin/env bash
# Measures what one large SQL statement costs a replica that streams it
# (docs/benchmarks.md "Large SQL writes"): daemon A (embedded Postgres)
# loads N documents with one NDJSON insert; daemon B, on the same Postgres,
# serves 4 REST change streams, 2 stalled REST streams (connected, never
# reading) and 4 distinct GraphQL Person_updated subscriptions; then another
# Postgres role runs one UPDATE of all N rows with psql, which the capture
# triggers make one commit of N changes. Prints the statement's time, B's
# idle and peak RSS, and whether every live subscriber got all N events.
#
#   scripts/bigsqlupdate.sh [documents]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
work=$(mktemp -d /tmp/bigsql.XXXXXX)
chmod 755 "$work"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -trimpath -o "$work/sluice" ./cmd/sluice
mkdir -p "$work/a"; chmod 777 "$work/a"
auth=admin:root
wait_ready() { for _ in $(seq 1 600); do curl -sf -o /dev/null "$1/readyz" && return 0; sleep 0.1; done; echo "no answer from $1" >&2; exit 1; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
delivered() { curl -s -u $auth "$1/metrics" | awk '/^sluice_stream_events_delivered_total/ {s+=$2} END {print s+0}'; }

SLUICE_ADMIN_PASSWORD=root SLUICE_DATA_DIR=$work/a SLUICE_LISTEN=127.0.0.1:6411 SLUICE_LOG_LEVEL=warn "$work/sluice" serve &
wait_ready http://127.0.0.1:6411
url="host=$work/a/pg port=5432 user=postgres dbname=sluice sslmode=disable"
curl -sf -u $auth -X POST http://127.0.0.1:6411/api/db/admin/big \
  -d '{"schema":"type Person { name: String! email: String! age: Int }"}' >/dev/null
python3 - "$n" >"$work/body.ndjson" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print('{"@type":"Person","@id":"p%d","name":"Person number %d","email":"person%d@example.com","age":%d}' % (i, i, i, i % 90))
PY
curl -sf -u $auth -X POST -H 'Content-Type: application/x-ndjson' --data-binary @"$work/body.ndjson" \
  http://127.0.0.1:6411/api/document/admin/big >/dev/null
schema=$(curl -sf -u $auth http://127.0.0.1:6411/api/db/admin/big | python3 -c 'import json,sys; print(json.load(sys.stdin)["postgres_schema"])')
psql "$url" -q -v ON_ERROR_STOP=1 -c "CREATE ROLE bulk_writer LOGIN" \
  -c "GRANT USAGE ON SCHEMA $schema TO bulk_writer" -c "GRANT SELECT, UPDATE ON ALL TABLES IN SCHEMA $schema TO bulk_writer"

SLUICE_ADMIN_PASSWORD=root SLUICE_DATABASE_URL=$url SLUICE_LISTEN=127.0.0.1:6412 SLUICE_LOG_LEVEL=warn "$work/sluice" serve &
b=$!
B=http://127.0.0.1:6412
wait_ready $B
for i in 1 2 3 4; do
  curl -sN -u $auth "$B/api/subscribe/admin/big/Person?ops=update" | grep -c '^event: entity.update' >"$work/rest$i" &
done
for i in 1 2; do # stalled: connect, never read
  python3 - <<PY &
import socket, base64, time
s = socket.create_connection(("127.0.0.1", 6412))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.sendall(b"GET /api/subscribe/admin/big/Person HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + base64.b64encode(b"$auth") + b"\r\n\r\n")
time.sleep(3600)
PY
done
i=0
for sel in '_id' '_id name' '_id age' 'name age'; do
  i=$((i + 1))
  curl -sN -u $auth -H 'Accept: text/event-stream' -H 'Content-Type: application/json' "$B/api/graphql/admin/big" \
    -d "{\"query\":\"subscription { Person_updated { $sel } }\"}" | grep -c '^event: next' >"$work/gql$i" &
done
sleep 2
idle=$(rss $b)
start=$(date +%s.%N)
psql "host=$work/a/pg port=5432 user=bulk_writer dbname=sluice sslmode=disable" -q -v ON_ERROR_STOP=1 \
  -c "UPDATE $schema.\"Person\" SET age = coalesce(age, 0) + 1"
echo "UPDATE of $n rows (one SQL commit): $(echo "$(date +%s.%N) - $start" | bc) s"
want=$((n * 8))
for _ in $(seq 1 2400); do
  got=$(delivered $B)
  [ "${got%.*}" -ge "$want" ] && break
  sleep 0.5
done
echo "delivered on B: $got of $want (4 REST + 4 GraphQL live subscribers), $(echo "$(date +%s.%N) - $start" | bc) s after the UPDATE started"
echo "B: idle RSS $((idle / 1024)) MB, peak RSS $(($(hwm $b) / 1024)) MB"
kill $b; wait $b 2>/dev/null || true
sleep 1
for f in "$work"/rest* "$work"/gql*; do echo "$(basename "$f"): $(cat "$f") events"; done
