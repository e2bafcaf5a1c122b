#!/usr/bin/env bash
# Compares `interlock check` output between a base revision and the work
# tree: the bundled examples and a generated cluster (default 10,000
# objects), every output format. A restructure must leave them identical.
#
# Usage: scripts/compare-check.sh [BASE_REV] [OBJECTS]
# Needs: cargo. Builds both binaries (debug) one after the other in one target
# dir (${CARGO_TARGET_DIR}, else under ${COMPARE_DIR:-/tmp/interlock-compare}),
# so the dependencies are built once; the base binary is copied aside.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}
objects=${2:-10000}
work=${COMPARE_DIR:-/tmp/interlock-compare}
mkdir -p "$work"
rm -rf "$work/base-src"
git worktree add -f --detach "$work/base-src" "$base" >/dev/null
trap 'git worktree remove --force "$work/base-src" >/dev/null 2>&1 || true' EXIT

echo "==> building $base and the work tree"
target=${CARGO_TARGET_DIR:-$work/target}
(cd "$work/base-src" && CARGO_TARGET_DIR="$target" cargo build -q --bin interlock)
cp "$target/debug/interlock" "$work/interlock-base"
CARGO_TARGET_DIR="$target" cargo build -q --bin interlock
old="$work/interlock-base"
new="$target/debug/interlock"

echo "==> generating a cluster of $objects objects"
rm -rf "$work/cluster"
# The check bench under `cargo test` runs the debug binary and keeps its
# generated cluster with --keep.
CARGO_TARGET_DIR="$target" cargo test -q --bench check -- --sizes "$objects" --runs 1 --keep "$work/cluster" >/dev/null
cluster="$work/cluster/cluster-$objects"

status=0
for input in examples "$cluster"; do
    for format in human json sarif junit; do
        "$old" check -o "$format" "$input" >"$work/old.out" 2>"$work/old.err" || true
        "$new" check -o "$format" "$input" >"$work/new.out" 2>"$work/new.err" || true
        if cmp -s "$work/old.out" "$work/new.out"; then
            echo "same: $input ($format, $(wc -c <"$work/new.out") bytes)"
        else
            echo "DIFFERENT: $input ($format)"; diff "$work/old.out" "$work/new.out" | head -20
            status=1
        fi
    done
done
exit "$status"
