#!/usr/bin/env bash
# The whole test suite, as CI runs it. Works on a fresh machine: it builds the
# Kubernetes control plane the integration tests use when it is not cached
# (first build: see README), then runs every test.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "test.sh: cargo is required (install Rust from rustup.rs)" >&2; exit 1; }
command -v go >/dev/null || { echo "test.sh: go is required to build the test control plane" >&2; exit 1; }

echo "==> control plane (kube-apiserver, etcd, kubectl) for the integration tests"
bin_dir=$(scripts/control-plane.sh build | tail -n 1)
echo "==> helm, for the tests of Helm charts"
helm_dir=$(scripts/helm.sh build | tail -n 1)
# Its kubectl renders kustomizations, and helm charts, for `interlock check`
# in the tests.
export PATH="$bin_dir:$helm_dir:$PATH"
export INTERLOCK_HELM_DIR="$helm_dir"
export INTERLOCK_CONTROL_PLANE_DIR="$bin_dir"
echo "    $bin_dir"

# The image test packs this binary (scripts/image.sh); building it here, not
# in the middle of the parallel integration tests, keeps them off a busy CPU.
echo "==> the image's static binary (cached in ~/.cache/interlock/image-target)"
scripts/image.sh binary >/dev/null

echo "==> CEL conformance (pass rate per file)"
cargo test --test cel_conformance -- --nocapture

echo "==> the whole test suite"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --all-targets 2>&1 | tee "$log" || status=$?
# One closing line for the whole suite (benchmarks print after the tests).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;?$/) p += $i; if ($(i+1) ~ /^failed;?$/) f += $i } }
     END { printf "suite: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
