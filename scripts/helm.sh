#!/usr/bin/env bash
# Builds helm from its Go module (the version hack/helm/go.mod pins), for the
# tests of `interlock check` over Helm charts and of the chart in manifests/,
# and caches the binary outside the repository, keyed by version.
#
# Usage:
#   scripts/helm.sh            build when missing; print the bin dir
#   scripts/helm.sh build      same
#   scripts/helm.sh path       print the bin dir, build nothing
#
# Environment:
#   INTERLOCK_HELM_DIR  where the binary goes (default
#       ${XDG_CACHE_HOME:-$HOME/.cache}/interlock/helm/<helm version>/bin)
#
# The last line on stdout is the bin dir; everything else goes to stderr.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WRAPPER="${ROOT}/hack/helm"
log() { echo "helm.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

command -v go >/dev/null 2>&1 || fail "the Go toolchain is not on PATH; install it to build helm"
version="$(sed -n 's/^[[:space:]]*helm\.sh\/helm\/v3 \(v[0-9.]*\).*/\1/p' "${WRAPPER}/go.mod" | head -n 1)"
[[ -n "${version}" ]] || fail "hack/helm/go.mod names no helm.sh/helm/v3 version"
dir="${INTERLOCK_HELM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/interlock/helm/${version}/bin}"

case "${1:-build}" in
    path) echo "${dir}"; exit 0 ;;
    build) ;;
    *) fail "unknown command '${1}' (build or path)" ;;
esac

if [[ -x "${dir}/helm" ]]; then
    echo "${dir}"
    exit 0
fi
log "building helm ${version} into ${dir} (the first build takes a few minutes)"
mkdir -p "${dir}"
tmp="${dir}/helm.partial"
start=$(date +%s)
(cd "${WRAPPER}" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w \
    -X helm.sh/helm/v3/internal/version.version=${version}" \
    -o "${tmp}" helm.sh/helm/v3/cmd/helm) || fail "go build of helm failed"
mv "${tmp}" "${dir}/helm"
log "built in $(( $(date +%s) - start ))s"
echo "${dir}"
