#!/usr/bin/env bash
# The peer benchmark: builds gator (Gatekeeper's CLI) and the Kyverno CLI from
# their Go modules at the versions pinned below, caches them outside the
# repository keyed by version, and runs the same rules over the same generated
# objects through `interlock check`, `gator test` and `kyverno apply`, checking
# that the three report the same findings and printing wall time, CPU
# (user+sys) and peak RSS side by side with the ratios.
#
# Usage:
#   scripts/peers.sh build [PEER]     build the peers (or one: gator, kyverno) when
#                                     missing; print their bin dirs
#   scripts/peers.sh path             print the bin dirs, build nothing
#   scripts/peers.sh run [SIZE...]    build what is missing, then bench at each
#                                     SIZE objects (default: 1000 10000 100000)
#
# Environment:
#   INTERLOCK_PEERS_DIR   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/interlock/peers);
#                         the binaries go to <root>/<peer>-<version>/bin
#   INTERLOCK_BIN         the interlock binary to bench (default: built with
#                         `cargo build --release` into CARGO_TARGET_DIR)
#   PEERS_REPEAT          runs per tool and size; the median is reported
#                         (default: 3 when the first run takes under 20 s, else 1)
#   PEERS_KYVERNO_LIMIT   seconds: skip kyverno at sizes where its time, scaled
#                         linearly from the largest size it ran, would pass
#                         this (default 600)
#   PEERS_GATOR_LIMIT     the same for gator (default 0: always run)
#   PEERS_KYVERNO_TIMEOUT, PEERS_GATOR_TIMEOUT
#                         stop a run after this long (a Go duration: 900s; default
#                         0: never); the output says so, with the CPU spent by then
#   PEERS_TOOLS           the tools to run, comma-separated (default interlock,gator,kyverno);
#                         the others are listed as not run
#   PEERS_WORK            where manifests and outputs go (default: a temp dir)
#
# The build needs the Go toolchain and the Go module proxy; nothing else.
# Each peer is built inside its own module (its go.mod, go.sum and replace
# lines apply), under nice -n 19. The bench glue is hack/peers (Go, standard
# library only): it writes the objects (Deployments, 3 Pods each, Ingresses;
# about 1.4 KB of YAML an object), runs the three tools one at a time under
# nice -n 19, reads wall time, user+sys CPU and peak RSS from each child's
# rusage and the load average at its start, and compares the findings rule
# by rule (namespace/kind/name of every object reported). The rules are in
# hack/peers/policies; Interlock's unique-ingress-host is the bundled
# policies/unique-ingress-host. Exit 1 when a tool fails or findings differ.
set -Eeuo pipefail

GATEKEEPER_MODULE=github.com/open-policy-agent/gatekeeper/v3
GATEKEEPER_VERSION=v3.23.1
KYVERNO_MODULE=github.com/kyverno/kyverno
KYVERNO_VERSION=v1.19.1
# Bump when the build commands below change in a way that changes the binaries.
RECIPE=1

STEP="start"
log() { echo "peers.sh: $*" >&2; }
fail() {
    log "error in step '${STEP}': $*"
    exit 1
}
on_err() {
    local rc=$?
    log "step '${STEP}' failed (exit ${rc})"
    exit "${rc}"
}
trap on_err ERR

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${INTERLOCK_PEERS_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/interlock/peers}"
GATOR_DIR="${CACHE}/gator-${GATEKEEPER_VERSION}/bin"
KYVERNO_DIR="${CACHE}/kyverno-${KYVERNO_VERSION}/bin"

require_go() {
    STEP="find go"
    command -v go >/dev/null 2>&1 ||
        fail "the Go toolchain (go 1.26 or newer) is not on PATH; install it to build the peers"
}

# build_one NAME MODULE VERSION PACKAGE LDFLAGS BIN_DIR VERSION_ARGS...
# Downloads MODULE@VERSION, builds PACKAGE inside it (so its own go.mod, go.sum
# and replace lines apply), checks that the binary reports VERSION, caches it.
build_one() {
    local name="$1" module="$2" version="$3" pkg="$4" ldflags="$5" bin="$6"
    shift 6
    local stamp="${module}@${version} recipe ${RECIPE}"
    if [[ -x "${bin}/${name}" && -f "${bin}/.stamp" && "$(cat "${bin}/.stamp")" == "${stamp}" ]]; then
        return 0
    fi
    require_go
    mkdir -p "$(dirname "${bin}")"
    local lock="${bin%/}.lock"
    exec 9>"${lock}"
    if ! flock -n 9; then
        log "another build holds ${lock}; waiting for it"
        flock 9
    fi
    if [[ -x "${bin}/${name}" && -f "${bin}/.stamp" && "$(cat "${bin}/.stamp")" == "${stamp}" ]]; then
        exec 9>&-
        return 0
    fi
    local started=${SECONDS}
    log "building ${name} from ${module}@${version} into ${bin} (the first build takes several minutes)"

    STEP="download ${module}@${version}"
    local json dir
    json="$(cd / && GOFLAGS=-mod=mod go mod download -json "${module}@${version}")" ||
        fail "cannot download ${module}@${version} from the Go module proxy: ${json:-}"
    dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"${json}")"
    [[ -d "${dir}" ]] || fail "go mod download did not name a directory for ${module}@${version}"

    STEP="download the modules ${pkg} imports"
    (cd "${dir}" && nice -n 19 go list -deps "${pkg}" >/dev/null) ||
        fail "cannot download the dependencies of ${module}/${pkg#./} at ${version}"

    STEP="build ${name}"
    local out="${bin%/}.partial"
    rm -rf "${out}"
    mkdir -p "${out}"
    (cd "${dir}" && CGO_ENABLED=0 nice -n 19 go build -trimpath -ldflags="${ldflags}" \
        -o "${out}/${name}" "${pkg}") || fail "go build of ${module}/${pkg#./} failed"

    STEP="check the built ${name} version"
    local v
    v="$("${out}/${name}" "$@" 2>&1)" || fail "'${name} $*' failed: ${v}"
    grep -qF "${version#v}" <<<"${v}" || fail "'${name} $*' reports '${v}', expected ${version}"

    STEP="install ${name} into ${bin}"
    echo "${stamp}" >"${out}/.stamp"
    {
        echo "${module} ${version}"
        echo "go $(go env GOVERSION)"
        echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - started))s"
    } >"${out}/VERSIONS"
    rm -rf "${bin}"
    mv "${out}" "${bin}"
    exec 9>&-
    log "built ${name} in $((SECONDS - started))s"
}

build_peers() {
    if [[ -z "${1:-}" || "$1" == gator ]]; then build_gator; fi
    if [[ -z "${1:-}" || "$1" == kyverno ]]; then build_kyverno; fi
}

build_gator() {
    build_one gator "${GATEKEEPER_MODULE}" "${GATEKEEPER_VERSION}" ./cmd/gator \
        "-s -w -X ${GATEKEEPER_MODULE}/pkg/version.Version=${GATEKEEPER_VERSION}" \
        "${GATOR_DIR}" --version
}

build_kyverno() {
    build_one kyverno "${KYVERNO_MODULE}" "${KYVERNO_VERSION}" ./cmd/cli/kubectl-kyverno \
        "-s -w -X ${KYVERNO_MODULE}/pkg/version.BuildVersion=${KYVERNO_VERSION}" \
        "${KYVERNO_DIR}" version
}

run_bench() {
    local sizes="${*:-1000 10000 100000}"
    sizes="${sizes// /,}"
    STEP="find the interlock binary"
    local il="${INTERLOCK_BIN:-}"
    if [[ -z "${il}" ]]; then
        command -v cargo >/dev/null 2>&1 || fail "cargo is not on PATH; set INTERLOCK_BIN to a release build of interlock"
        local target="${CARGO_TARGET_DIR:-${ROOT}/target}"
        log "building interlock (cargo build --release) into ${target}"
        (cd "${ROOT}" && nice -n 19 cargo build --release --quiet --bin interlock) ||
            fail "cargo build --release failed"
        il="${target}/release/interlock"
    fi
    [[ -x "${il}" ]] || fail "${il} is not an executable"

    STEP="build the bench glue (hack/peers)"
    local work="${PEERS_WORK:-}"
    if [[ -z "${work}" ]]; then
        work="$(mktemp -d)"
        # shellcheck disable=SC2064
        trap "rm -rf '${work}'" EXIT
    fi
    mkdir -p "${work}"
    (cd "${ROOT}/hack/peers" && nice -n 19 go build -o "${work}/peers-bench" .) ||
        fail "go build of hack/peers failed"

    STEP="bench"
    echo "interlock: $("${il}" --version 2>&1 | head -n1) (${il})"
    echo "gator: $("${GATOR_DIR}/gator" --version 2>&1 | head -n1)"
    echo "kyverno: $("${KYVERNO_DIR}/kyverno" version 2>&1 | grep -i version | head -n1)"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
    local -a repeat=()
    [[ -n "${PEERS_REPEAT:-}" ]] && repeat=(-repeat "${PEERS_REPEAT}")
    "${work}/peers-bench" bench -interlock "${il}" -gator "${GATOR_DIR}/gator" \
        -kyverno "${KYVERNO_DIR}/kyverno" -policies "${ROOT}/hack/peers/policies" \
        -unique-host "${ROOT}/policies/unique-ingress-host/policy.yaml" \
        -work "${work}" -sizes "${sizes}" -kyverno-limit "${PEERS_KYVERNO_LIMIT:-600}" \
        -gator-limit "${PEERS_GATOR_LIMIT:-0}" -kyverno-timeout "${PEERS_KYVERNO_TIMEOUT:-0}" \
        -gator-timeout "${PEERS_GATOR_TIMEOUT:-0}" -tools "${PEERS_TOOLS:-interlock,gator,kyverno}" "${repeat[@]}"
}

case "${1:-build}" in
build)
    case "${2:-}" in
    "" | gator | kyverno) build_peers "${2:-}" ;;
    *) fail "unknown peer '$2' (gator or kyverno)" ;;
    esac
    echo "${GATOR_DIR}"
    echo "${KYVERNO_DIR}"
    ;;
path)
    echo "${GATOR_DIR}"
    echo "${KYVERNO_DIR}"
    ;;
run)
    shift
    build_peers
    run_bench "$@"
    ;;
-h | --help | help) sed -n '2,/^set -E/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' ;;
*) fail "unknown command '$1' (build, path, run, help)" ;;
esac
