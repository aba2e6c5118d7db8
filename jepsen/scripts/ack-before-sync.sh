#!/usr/bin/env bash
# Shows that `kill-lose-unsynced` catches a node that acknowledges log entries before its WAL is
# synced: builds `sluice` with sluice-raft's `ack-before-sync` feature (appends reported durable
# at once, never synced), keeps that binary aside, rebuilds the normal one, then runs the same
# test against both. The broken build must fail a checker; the normal build must pass.
#
# Usage (as root, from the workspace): jepsen/scripts/ack-before-sync.sh [SEED...]
# Default seeds: 1 2 3. Results go to jepsen-results/ack-before-sync/.
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-target}"
# adya, where .ci/run installs it, for the list-append checker.
export PATH="$HOME/.cache/sluice-tools/bin:$PATH"
out=jepsen-results/ack-before-sync
seeds=("$@")
[ "${#seeds[@]}" -gt 0 ] || seeds=(1 2 3)
mkdir -p "$out"

trap 'echo "a build failed: $target/debug/sluice may be the ack-before-sync one; rebuild it with cargo test --workspace --no-run" >&2' ERR
cargo build --workspace --features sluice-raft/ack-before-sync
# Without its debug information the copy is a tenth of the size.
strip -o "$out/sluice-ack-before-sync" "$target/debug/sluice" 2>/dev/null \
  || cp "$target/debug/sluice" "$out/sluice-ack-before-sync"
# The normal build again, so that nothing else runs the broken binary.
cargo test --workspace --no-run
trap - ERR

run() { # BINARY NAME SEED
  SLUICE_BIN="$1" "$target/debug/sluice-jepsen" run --workload queue-append \
    --faults kill-lose-unsynced --nodes 3 --time 40 --seed "$3" --out "$out/$2-seed$3"
}
status=0
for seed in "${seeds[@]}"; do
  # The broken build must complete its run and fail a checker (summary.json says which).
  run "$out/sluice-ack-before-sync" broken "$seed" || true
  if grep -q '"valid": false' "$out/broken-seed$seed/summary.json" 2>/dev/null; then
    echo "seed $seed: the ack-before-sync build failed a checker, as it must"
  else
    echo "seed $seed: the ack-before-sync build was not caught (or its run did not complete)" >&2
    status=1
  fi
  if ! run "$target/debug/sluice" normal "$seed"; then
    echo "seed $seed: the normal build failed" >&2
    status=1
  fi
done
exit "$status"
