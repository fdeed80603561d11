#!/usr/bin/env bash
# Benchmark: `cargo check -p pve-sdk` from a state where only its dependencies are built.
# Prints wall time and peak memory (from /usr/bin/time -v) for each of N runs (default 3), twice:
# as a workspace member (incremental, as `cargo test` here builds it) and as a dependency
# (CARGO_INCREMENTAL=0, as a user's build and CI build it, and as proxmox-api is built below).
#
# With --against-proxmox-api, each run also checks proxmox-api 0.2.0 (the other full-coverage
# Rust PVE SDK, from crates.io, in a scratch crate under target/), alternating with pve-sdk so
# that drift in the machine's speed falls on both alike, and prints the ratio of the medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=3
against=0
for arg in "$@"; do
  case "$arg" in
    --against-proxmox-api) against=1 ;;
    *) runs=$arg ;;
  esac
done

measure() {
  /usr/bin/time -v "$@" 2>&1 | awk '/Elapsed \(wall clock\)/ {wall=$NF} /Maximum resident set size/ {rss=$NF}
    END {n=split(wall, p, ":"); s=p[n]+60*p[n-1]; printf "%.2f %.0f\n", s, rss/1024}'
}

other=target/proxmox-api-check
if [ "$against" = 1 ]; then
  mkdir -p "$other/src"
  cat > "$other/Cargo.toml" <<'EOF'
[package]
name = "proxmox-api-check"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
proxmox-api = "=0.2.0"

[workspace]
EOF
  echo 'fn main() {}' > "$other/src/main.rs"
  (cd "$other" && cargo check -q -p proxmox-api)
fi

cargo check -q -p pve-sdk --locked
ours=()
ours_dep=()
theirs=()
for i in $(seq "$runs"); do
  cargo clean -q -p pve-sdk
  read -r wall rss < <(measure cargo check -q -p pve-sdk --locked)
  ours+=("$wall")
  echo "run $i: pve-sdk (incremental) wall ${wall} s, peak RSS ${rss} MB"
  cargo clean -q -p pve-sdk
  read -r wall rss < <(CARGO_INCREMENTAL=0 measure cargo check -q -p pve-sdk --locked)
  ours_dep+=("$wall")
  echo "run $i: pve-sdk (as a dependency) wall ${wall} s, peak RSS ${rss} MB"
  if [ "$against" = 1 ]; then
    (cd "$other" && cargo clean -q -p proxmox-api)
    read -r wall rss < <(cd "$other" && measure cargo check -q -p proxmox-api)
    theirs+=("$wall")
    echo "run $i: proxmox-api 0.2.0 wall ${wall} s, peak RSS ${rss} MB"
  fi
done

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
m_ours=$(median "${ours[@]}")
m_dep=$(median "${ours_dep[@]}")
echo "median pve-sdk: ${m_ours} s incremental, ${m_dep} s as a dependency"
if [ "$against" = 1 ]; then
  m_theirs=$(median "${theirs[@]}")
  echo "median proxmox-api 0.2.0: ${m_theirs} s"
  awk -v a="$m_ours" -v d="$m_dep" -v b="$m_theirs" \
    'BEGIN {printf "ratio pve-sdk / proxmox-api: %.3f incremental, %.3f as a dependency\n", a/b, d/b}'
fi
