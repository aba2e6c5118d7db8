#!/usr/bin/env bash
# Follower reads against hello-world, measured with wrk (an independent generator) in one run:
# hello-world, gate checks, status reads of waiting visitors and of admitted ones (whose answers
# carry an admission token), on a 3-node release cluster over loopback (fsync on, visitor rate
# limits raised), each right after the other: `speed.sh -o reads`, once, for this workspace's
# release build.
#
# Usage: jepsen/scripts/reads.sh [SECS] [REUSE]
#   SECS   seconds per step (default 8)
#   REUSE  the nodes' `[tokens] admission_token_reuse` (default true; false signs a token on
#          every admitted status read)
# Needs `cargo build --release --workspace` and wrk. Prints one line per step and the ratios.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/speed.sh" -s "${1:-8}" -r 1 -o reads -t "${2:-true}" -j none \
  "now=${CARGO_TARGET_DIR:-$here/../../target}/release"
