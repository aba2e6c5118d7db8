#!/usr/bin/env bash
# The first table of BENCHMARKS.md, measured with wrk (an independent generator), for one or
# more builds side by side in one run: for each build a fresh 3-node release cluster on loopback
# (fsync on, visitor rate limits and per-address limits lifted), and in this order, each step
# right after the other:
#   hello-world GET / (the anchor, measured again before each build's steps),
#   gate checks, status reads of waiting and of admitted visitors (on a follower, 64 connections),
#   joins to one hot room on the leader at 64 connections, through a follower at 64, on the
#   leader at 256 (the three into the same room, whose admitted sessions accumulate),
# then the etcd anchors (joins with a room per client at 64 clients, plain puts at 256; by our
# generator, `sluice-jepsen bench --only etcd`). The join steps also give the CPU time (user and
# system) of all processes — the three nodes and wrk — per successful join.
# Every run repeats all of it; the end prints each figure's median over the runs.
#
# Usage: jepsen/scripts/speed.sh [-s SECS] [-r RUNS] [-l true|false] [-o STEPS] [-j SLUICE_JEPSEN] [LABEL=]BIN_DIR[@noledger]...
#   BIN_DIR  a directory holding a release `sluice` (e.g. "$CARGO_TARGET_DIR/release"); builds
#            that do not know a setting (per-address limits, token reuse, the ledger) run without
#            it; `@noledger` runs that build with `[ledger] enabled = false` (the same build may be
#            named twice, with and without, to measure what the ledger costs in one run)
#   -s       seconds per step (default 10)
#   -r       runs (default 3)
#   -l       the nodes' `[ledger] enabled` (default true)
#   -t       the nodes' `[tokens] admission_token_reuse` (default true; false signs a token on
#            every admitted status read)
#   -o       only these steps: reads or joins (default: all), or challenges: the issue rate of
#            proof-of-work challenges on a follower (wrk, 64 connections, from 1,000 addresses;
#            a rule of the largest cost, 20,000, and one counter)
#            and `attack.py flood` on the leader (honest visitors who solve, joining without and
#            during such a flood); or proofs: joins on the leader (wrk, 32 connections) into a
#            room without a proof-of-work and into one asking {work: 1, cost: 2000}, each join
#            with its own challenge solved beforehand (`attack.py presolve`), so that the step
#            measures the node's checking; neither is part of the default
#   -j       the sluice-jepsen binary for the etcd anchors (default: this workspace's release
#            build, "$CARGO_TARGET_DIR/release"; "none" skips them)
# With SPEED_PERF=PREFIX set, `perf record -a -g` samples the whole machine for half of each
# join step (files PREFIX.LABEL.RUN.CONNECTIONS.NODE).
# Needs wrk, curl, python3 and, for the anchors, etcd. Results (one line per figure) go to
# speed-results.tsv in the working directory.
set -euo pipefail
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
secs=10
runs=3
ledger=true
jepsen=""
only=all
reuse=true
while getopts "s:r:l:j:o:t:" o; do
  case $o in
    s) secs=$OPTARG ;;
    r) runs=$OPTARG ;;
    l) ledger=$OPTARG ;;
    j) jepsen=$OPTARG ;;
    o) only=$OPTARG ;;
    t) reuse=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
here=$(cd "$(dirname "$0")" && pwd)
labels=()
bins=()
ledgers=()
for a in "$@"; do
  if [[ $a == *=* ]]; then labels+=("${a%%=*}"); a=${a#*=}; else labels+=("$a"); fi
  if [[ $a == *@noledger ]]; then bins+=("${a%@noledger}"); ledgers+=(false); else bins+=("$a"); ledgers+=("$ledger"); fi
done
for b in "${bins[@]}"; do [ -x "$b/sluice" ] || { echo "no sluice in $b" >&2; exit 2; }; done
own=${CARGO_TARGET_DIR:-$here/../../target}/release
[ -n "$jepsen" ] || jepsen=$own/sluice-jepsen
hello_bin=$own/sluice-hello
[ -x "$hello_bin" ] || { echo "no sluice-hello in $own (cargo build --release --workspace)" >&2; exit 2; }
dir=$(mktemp -d)
out=$PWD/speed-results.tsv
: > "$out"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
token=bench-operator-token-0123456789abcdef
tck=$(getconf CLK_TCK)

base=$((20000 + RANDOM % 5000))
"$hello_bin" "127.0.0.1:$base" > /dev/null &
pids+=($!)
node() { echo "http://127.0.0.1:$((base + 10 + $1))"; }

# Starts a 3-node cluster of the build in $1, ledger kept or not as $2 says (fresh data); sets
# leader, follower, node_pids.
start_cluster() {
  local bin=$1 keep=$2 i peers="" extra_limits="" extra_tokens="" extra="" extra_proxies=""
  grep -qa requests_per_address_max "$bin/sluice" && extra_limits="requests_per_address_max = 1000000"
  grep -qa trusted_proxies "$bin/sluice" && extra_proxies='trusted_proxies = ["127.0.0.1"]'
  grep -qa admission_token_reuse "$bin/sluice" && extra_tokens="admission_token_reuse = $reuse"
  grep -qa draw_secret "$bin/sluice" && extra_tokens+="
draw_secret = \"YmVuY2gtZHJhdy1zZWNyZXQtb2YtZXhhY3RseS0zMmI=\""
  grep -qa retention_days "$bin/sluice" && extra="[ledger]
enabled = $keep"
  rm -rf "$dir/n1" "$dir/n2" "$dir/n3"
  for i in 1 2 3; do
    peers+="[[peers]]
id = $i
raft = \"127.0.0.1:$((base + 30 + i))\"
http = \"127.0.0.1:$((base + 10 + i))\"
grpc = \"127.0.0.1:$((base + 20 + i))\"
"
  done
  node_pids=()
  for i in 1 2 3; do
    cat > "$dir/n$i.toml" <<TOML
node_id = $i
data_dir = "$dir/n$i"
http_addr = "127.0.0.1:$((base + 10 + i))"
grpc_addr = "127.0.0.1:$((base + 20 + i))"
raft_addr = "127.0.0.1:$((base + 30 + i))"
bootstrap = $([ "$i" = 1 ] && echo true || echo false)
admin_token = "$token"
$extra_proxies
$peers
[tokens]
ticket_keys = [{ id = "b", secret = "YmVuY2gtdGlja2V0LXNlY3JldC1vZi0zMi1ieXRlcyE=" }]
jwt_seed = "YmVuY2gtand0LXNlZWQtb2YtZXhhY3RseS0zMmJ5dGU="
$extra_tokens
[limits]
visitor_requests_per_second = 1000000
visitor_burst = 1000000
concurrent_requests_max = 100000
$extra_limits
$extra
TOML
    RUST_LOG=warn "$bin/sluice" serve --config "$dir/n$i.toml" 2> "$dir/n$i.log" &
    node_pids+=($!)
    pids+=($!)
  done
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
  [ -n "$leader" ] || { echo "no leader" >&2; exit 1; }
  follower=$((leader % 3 + 1))
}

stop_cluster() {
  for p in "${node_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${node_pids[@]}"; do wait "$p" 2>/dev/null || true; done
}

put_room() {
  curl -sf -X PUT -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d "$2" "$(node "$leader")/v1/rooms/$1" > /dev/null
}

record() { # run, build, figure, value
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$out"
}

rate_of() { sed -n 's/^Requests\/sec: *\([0-9.]*\)/\1/p'; }

# CPU ticks (user + system) of the running nodes.
node_ticks() {
  local t=0 p
  for p in "${node_pids[@]}"; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$t"
}

# A join step: wrk on NODE with CONNS connections; records joins/s and CPU µs per join.
join_step() { # run, label, figure, node, conns
  local before after res wrk_cpu ok
  before=$(node_ticks)
  if [ -n "${SPEED_PERF:-}" ]; then
    perf record -a -g -F 499 -o "$SPEED_PERF.$2.$1.$5.$([ "$4" = "$leader" ] && echo leader || echo follower)" \
      -- sleep "$((secs / 2))" 2> /dev/null &
  fi
  res=$(/usr/bin/time -f 'cpu %U %S' -o "$dir/time" wrk -t2 -c"$5" -d"${secs}s" \
    -s "$here/join.lua" "$(node "$4")" -- hot)
  after=$(node_ticks)
  wrk_cpu=$(awk '{print $2 + $3}' "$dir/time")
  ok=$(echo "$res" | python3 -c 'import json,sys
for l in sys.stdin:
    if l.startswith("{"):
        j = json.loads(l); print(j["requests"] - j["non_2xx"])')
  local per_sec cpu
  per_sec=$(awk -v n="$ok" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')
  cpu=$(awk -v a="$after" -v b="$before" -v t="$tck" -v w="$wrk_cpu" -v n="$ok" \
    'BEGIN {printf "%.1f", ((a - b) / t + w) * 1e6 / (n > 0 ? n : 1)}')
  record "$1" "$2" "$3" "$per_sec"
  record "$1" "$2" "$3 cpu_us" "$cpu"
  printf '  %-40s %8s/s  %6s µs CPU/join\n' "$3" "$per_sec" "$cpu" >&2
}

read_step() { # run, label, figure, wrk arguments…
  local r
  r=$(wrk -t2 -c64 -d"${secs}s" "${@:4}" | rate_of)
  record "$1" "$2" "$3" "$r"
  printf '  %-40s %8.0f/s\n' "$3" "$r" >&2
}

echo "${secs} s per step, ${runs} runs, ledger $ledger; results in $out" >&2
for run in $(seq "$runs"); do
  for k in "${!bins[@]}"; do
    label=${labels[$k]}
    bin=${bins[$k]}
    start_cluster "$bin" "${ledgers[$k]}"
    echo "run $run, $label: leader $leader, follower $follower" >&2
    put_room gate '{"capacity": 10000000, "admit_per_minute": 60000000, "admit_burst": 1000000, "session_ttl_secs": 3600}'
    put_room line '{"paused": true, "max_waiting": 10000000, "waiter_ttl_secs": 86400}'
    put_room hot '{"capacity": 10000000, "admit_per_minute": 60000000, "admit_burst": 1000000, "max_waiting": 10000000, "session_ttl_secs": 3600}'
    for room in gate line; do
      for _ in $(seq 200); do
        curl -sf -X POST "$(node "$leader")/v1/rooms/$room/join" | sed -n 's/.*"ticket":"\([^"]*\)".*/\1/p'
        echo
      done > "$dir/$room.tickets"
    done
    # Followers serve from applied state: wait until the one measured has every admission.
    cookie=sluice_ticket
    grep -qa sluice_ticket_ "$bin/sluice" && cookie=sluice_ticket_gate
    last=$(tail -1 "$dir/gate.tickets")
    for _ in $(seq 200); do
      curl -sf -H "Cookie: $cookie=$last" "$(node "$follower")/gate/gate/check" > /dev/null && break
      sleep 0.05
    done
    if [ "$only" = all ] || [ "$only" = reads ]; then
      read_step "$run" "$label" "hello-world" "http://127.0.0.1:$base/"
      read_step "$run" "$label" "gate check (follower)" -s "$here/ticket.lua" "$(node "$follower")" \
        -- /gate/gate/check "$dir/gate.tickets" cookie-name "$cookie"
      read_step "$run" "$label" "status, waiting (follower)" -s "$here/ticket.lua" "$(node "$follower")" \
        -- /v1/rooms/line/status "$dir/line.tickets"
      read_step "$run" "$label" "status, admitted (follower)" -s "$here/ticket.lua" "$(node "$follower")" \
        -- /v1/rooms/gate/status "$dir/gate.tickets"
    fi
    if [ "$only" = challenges ]; then
      put_room pow '{"paused": true, "max_waiting": 10000000, "waiter_ttl_secs": 86400, "entry": {"proof_of_work": {"work": 2, "cost": 20000}}}'
      read_step "$run" "$label" "hello-world" "http://127.0.0.1:$base/"
      # Issued: answered 200 (a refusal, such as 503 busy, is no challenge).
      res=$(wrk -t2 -c64 -d"${secs}s" -s "$here/challenge_flood.lua" \
        "$(node "$follower")/v1/rooms/pow/challenge" -- 1000)
      issued=$(echo "$res" | awk -v s="$secs" '/requests in/ {n = $1} /Non-2xx/ {bad = $NF}
        END {printf "%.0f", (n - bad) / s}')
      record "$run" "$label" "challenges issued (follower)" "$issued"
      printf '  %-40s %8s/s\n' "challenges issued (follower)" "$issued" >&2
      python3 "$here/attack.py" "$(node "$leader")" "$token" --seconds "$secs" flood --room flood \
        > "$dir/flood.json"
      for f in quiet flooded; do
        record "$run" "$label" "honest joins, $f" \
          "$(python3 -c "import json,sys; print(json.load(sys.stdin)['honest_joins_per_s_$f'])" < "$dir/flood.json")"
      done
      record "$run" "$label" "flood answers" \
        "$(python3 -c "import json,sys; print(json.load(sys.stdin)['flood_answers_per_s'])" < "$dir/flood.json")"
      cat "$dir/flood.json" >&2
    fi
    if [ "$only" = proofs ]; then
      for room in thr0 thr; do
        bodies=()
        if [ "$room" = thr ]; then
          python3 "$here/attack.py" "$(node "$leader")" "$token" presolve --room thr --work 1 \
            --cost 2000 --count $((6000 * secs)) > "$dir/bodies.jsonl"
          bodies=("$dir/bodies.jsonl" 2)
        else
          python3 "$here/attack.py" "$(node "$leader")" "$token" presolve --room thr0 --work 0
        fi
        res=$(wrk -t2 -c32 -d"${secs}s" -s "$here/join.lua" "$(node "$leader")" -- "$room" "${bodies[@]}")
        ok=$(echo "$res" | awk -v s="$secs" '/requests in/ {n = $1} /Non-2xx/ {bad = $NF}
          END {printf "%.0f", (n - bad) / s}')
        record "$run" "$label" "joins, $room" "$ok"
        printf '  %-40s %8s/s\n' "joins, $room" "$ok" >&2
      done
    fi
    if [ "$only" = all ] || [ "$only" = joins ]; then
      join_step "$run" "$label" "joins, leader, 64" "$leader" 64
      join_step "$run" "$label" "joins, follower, 64" "$follower" 64
      join_step "$run" "$label" "joins, leader, 256" "$leader" 256
    fi
    stop_cluster
  done
  if [ "$jepsen" != none ] && [ "$only" = all ]; then
    "$jepsen" bench --only etcd --secs "$secs" --out "$dir/etcd-$run" > "$dir/etcd.out"
    own=$(sed -n 's/^summary: etcd joins (own room, 64 clients) \([0-9]*\)\/s.*/\1/p' "$dir/etcd.out")
    put=$(sed -n 's/.*etcd puts (256 clients) \([0-9]*\)\/s.*/\1/p' "$dir/etcd.out")
    record "$run" etcd "etcd join, own room, 64" "$own"
    record "$run" etcd "etcd put, 256" "$put"
    printf '  %-40s %8s/s\n  %-40s %8s/s\n' "etcd join, own room, 64" "$own" "etcd put, 256" "$put" >&2
    rm -rf "$dir/etcd-$run"
  fi
done

python3 - "$out" "${labels[@]}" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
labels = sys.argv[2:]
vals = {}
for run, build, fig, v in rows:
    if v:
        vals.setdefault((build, fig), []).append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
etcd_join = med.get(("etcd", "etcd join, own room, 64"))
etcd_put = med.get(("etcd", "etcd put, 256"))
figs = ["hello-world", "gate check (follower)", "status, waiting (follower)",
        "status, admitted (follower)", "joins, leader, 64", "joins, follower, 64",
        "joins, leader, 256", "joins, leader, 64 cpu_us", "joins, follower, 64 cpu_us",
        "joins, leader, 256 cpu_us", "challenges issued (follower)", "honest joins, quiet",
        "honest joins, flooded", "flood answers", "joins, thr0", "joins, thr"]
print("medians over %d runs" % max(len(v) for v in vals.values()))
print("| figure | " + " | ".join(labels) + " |")
print("|---|" + "---:|" * len(labels))
def cell(b, f):
    m = med.get((b, f))
    if m is None:
        return "—"
    h = med.get((b, "hello-world"))
    runs = "/".join("%.0f" % x for x in vals[(b, f)])
    ratio = ""
    if f in ("gate check (follower)", "status, waiting (follower)", "status, admitted (follower)") and h:
        ratio = " (%.2f× hello)" % (m / h)
    elif f in ("joins, leader, 64", "joins, follower, 64") and etcd_join:
        ratio = " (%.1f× etcd join)" % (m / etcd_join)
    elif f == "joins, leader, 256" and etcd_put:
        ratio = " (%.2f× etcd put)" % (m / etcd_put)
    elif f == "joins, thr" and med.get((b, "joins, thr0")):
        ratio = " (%.2f× without)" % (m / med[(b, "joins, thr0")])
    elif f == "honest joins, flooded" and med.get((b, "honest joins, quiet")):
        ratio = " (%.2f× quiet)" % (m / med[(b, "honest joins, quiet")])
    return "%.0f%s [%s]" % (m, ratio, runs)
for f in figs:
    if any((b, f) in med for b in labels):
        print("| %s | " % f + " | ".join(cell(b, f) for b in labels) + " |")
if etcd_join:
    print("| etcd join, own room, 64 | %.0f [%s] |" % (etcd_join, "/".join("%.0f" % x for x in vals[("etcd", "etcd join, own room, 64")])))
if etcd_put:
    print("| etcd put, 256 | %.0f [%s] |" % (etcd_put, "/".join("%.0f" % x for x in vals[("etcd", "etcd put, 256")])))
PY
