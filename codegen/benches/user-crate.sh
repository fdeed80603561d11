#!/usr/bin/env bash
# Benchmark: `cargo check` of a small user crate (QEMU guests, node network and tasks; pve-sdk
# with only the features `nodes-qemu`, `nodes-network` and `nodes-tasks`) with its dependencies
# built but pve-sdk not yet: what a user pays on first build after adding or upgrading pve-sdk.
# Prints wall time and peak memory for each of N runs (default 3) and the median. The scratch
# crate lives under target/. FEATURES="nodes" measures it with other features.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
dir=target/user-crate
mkdir -p "$dir/src"
sed "s|@SDK@|$PWD/sdk|" codegen/benches/user-crate/Cargo.toml.in > "$dir/Cargo.toml"
if [ -n "${FEATURES:-}" ]; then
  list=$(printf '"%s", ' ${FEATURES//,/ })
  sed -i "/^pve-sdk/ s|features = \[[^]]*\]|features = [${list%, }]|" "$dir/Cargo.toml"
fi
grep '^pve-sdk' "$dir/Cargo.toml"
cp codegen/benches/user-crate/src/main.rs "$dir/src/main.rs"
cp Cargo.lock "$dir/Cargo.lock"
cd "$dir"
CARGO_INCREMENTAL=0 cargo check -q
walls=()
for i in $(seq "$runs"); do
  cargo clean -q -p pve-sdk -p pve-user-crate
  /usr/bin/time -v env CARGO_INCREMENTAL=0 cargo check -q 2> time.txt
  wall=$(awk '/Elapsed \(wall clock\)/ {n=split($NF, p, ":"); print p[n]+60*p[n-1]}' time.txt)
  rss=$(awk '/Maximum resident set size/ {print int($NF/1024)}' time.txt)
  walls+=("$wall")
  echo "run $i: wall ${wall} s, peak RSS ${rss} MB"
done
printf '%s\n' "${walls[@]}" | sort -n | awk '{v[NR]=$1} END {print "median: " ((NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2) " s"}'
