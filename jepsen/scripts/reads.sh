#!/usr/bin/env bash
# Follower reads against hello-world, measured with wrk (an independent generator) in one run:
# hello-world, gate checks, status reads of waiting visitors and of admitted ones (whose answers
# carry an admission token), on a 3-node release cluster over loopback (fsync on, visitor rate
# limits raised), each right after the other.
#
# Usage: jepsen/scripts/reads.sh [SECS] [REUSE]
#   SECS   seconds per step (default 8)
#   REUSE  the nodes' `[tokens] admission_token_reuse` (default true; false signs a token on
#          every admitted status read)
# Needs `cargo build --release --workspace` and wrk. Prints one line per step and the ratios.
set -euo pipefail
secs=${1:-8}
reuse=${2:-true}
here=$(cd "$(dirname "$0")" && pwd)
bin=${CARGO_TARGET_DIR:-$here/../../target}/release
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
token=bench-operator-token-0123456789abcdef

base=$((20000 + RANDOM % 5000))
peers=""
for i in 1 2 3; do
  peers+="[[peers]]
id = $i
raft = \"127.0.0.1:$((base + 30 + i))\"
http = \"127.0.0.1:$((base + 10 + i))\"
grpc = \"127.0.0.1:$((base + 20 + i))\"
"
done
for i in 1 2 3; do
  cat > "$dir/n$i.toml" <<TOML
node_id = $i
data_dir = "$dir/n$i"
http_addr = "127.0.0.1:$((base + 10 + i))"
grpc_addr = "127.0.0.1:$((base + 20 + i))"
raft_addr = "127.0.0.1:$((base + 30 + i))"
bootstrap = $([ "$i" = 1 ] && echo true || echo false)
admin_token = "$token"
$peers
[tokens]
ticket_keys = [{ id = "b", secret = "YmVuY2gtdGlja2V0LXNlY3JldC1vZi0zMi1ieXRlcyE=" }]
jwt_seed = "YmVuY2gtand0LXNlZWQtb2YtZXhhY3RseS0zMmJ5dGU="
admission_token_reuse = $reuse
[limits]
visitor_requests_per_second = 1000000
visitor_burst = 1000000
concurrent_requests_max = 100000
requests_per_address_max = 1000000
TOML
  RUST_LOG=warn "$bin/sluice" serve --config "$dir/n$i.toml" 2> "$dir/n$i.log" &
  pids+=($!)
done
"$bin/sluice-hello" "127.0.0.1:$base" > /dev/null &
pids+=($!)

node() { echo "http://127.0.0.1:$((base + 10 + $1))"; }
for i in 1 2 3; do
  for _ in $(seq 600); do
    curl -sf "$(node "$i")/readyz" > /dev/null && break
    sleep 0.1
  done
done
leader=""
for _ in $(seq 100); do
  leader=$(curl -sf -H "Authorization: Bearer $token" "$(node 1)/v1/cluster" | sed -n 's/.*"leader":\([0-9]*\).*/\1/p')
  [ -n "$leader" ] && break
  sleep 0.1
done
follower=$(( leader % 3 + 1 ))
put_room() {
  curl -sf -X PUT -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d "$2" "$(node "$leader")/v1/rooms/$1" > /dev/null
}
put_room gate '{"capacity": 10000000, "admit_per_minute": 60000000, "admit_burst": 1000000, "session_ttl_secs": 3600}'
put_room line '{"paused": true, "max_waiting": 10000000, "waiter_ttl_secs": 86400}'
for room in gate line; do
  for _ in $(seq 200); do
    curl -sf -X POST "$(node "$leader")/v1/rooms/$room/join" | sed -n 's/.*"ticket":"\([^"]*\)".*/\1/p'
    echo
  done > "$dir/$room.tickets"
done
# Followers serve from applied state: wait until the one measured has every admission.
last=$(tail -1 "$dir/gate.tickets")
for _ in $(seq 200); do
  curl -sf -H "Cookie: sluice_ticket_gate=$last" "$(node "$follower")/gate/gate/check" > /dev/null && break
  sleep 0.05
done

run() { # name, wrk arguments…
  local rate
  rate=$(wrk -t2 -c64 -d"${secs}s" "${@:2}" | sed -n 's/^Requests\/sec: *\([0-9.]*\)/\1/p')
  printf '%-34s %10.0f/s\n' "$1" "$rate" >&2
  echo "$rate"
}
echo "follower $follower of 3, ${secs} s per step, admission_token_reuse = $reuse" >&2
hello=$(run "hello-world GET /" "http://127.0.0.1:$base/")
gate=$(run "gate check (follower)" -s "$here/ticket.lua" "$(node "$follower")" -- /gate/gate/check "$dir/gate.tickets" cookie gate)
waiting=$(run "status read, waiting (follower)" -s "$here/ticket.lua" "$(node "$follower")" -- /v1/rooms/line/status "$dir/line.tickets")
admitted=$(run "status read, admitted (follower)" -s "$here/ticket.lua" "$(node "$follower")" -- /v1/rooms/gate/status "$dir/gate.tickets")
awk -v h="$hello" -v g="$gate" -v w="$waiting" -v a="$admitted" 'BEGIN {
  printf "ratios: gate/hello %.2f; status/hello %.2f (waiting), %.2f (admitted)\n", g/h, w/h, a/h }'
