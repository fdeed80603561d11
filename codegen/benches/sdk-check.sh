#!/usr/bin/env bash
# Benchmark: `cargo check -p pve-sdk` from a state where only its dependencies are built.
# Prints wall time and peak memory (from /usr/bin/time -v) for each of N runs (default 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
cargo check -q -p pve-sdk --locked
for i in $(seq "$runs"); do
  cargo clean -q -p pve-sdk
  /usr/bin/time -v cargo check -q -p pve-sdk --locked 2>&1 \
    | awk -v run="$i" '/Elapsed \(wall clock\)/ {wall=$NF} /Maximum resident set size/ {rss=$NF}
        END {printf "run %s: wall %s, peak RSS %.0f MB\n", run, wall, rss/1024}'
done
