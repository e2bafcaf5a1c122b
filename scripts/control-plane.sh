#!/usr/bin/env bash
# Builds the control plane the integration tests run against (kube-apiserver,
# kube-controller-manager, kubectl, etcd, etcdctl) from their Go modules, and
# caches the binaries outside the repository, keyed by version.
#
# Usage:
#   scripts/control-plane.sh            build when missing; print the bin dir
#   scripts/control-plane.sh build      same
#   scripts/control-plane.sh path       print the bin dir, build nothing
#   scripts/control-plane.sh prep [V]   regenerate hack/control-plane/go.mod and
#                                       go.sum for Kubernetes V (default: the
#                                       newest v1.36.x the module proxy serves)
#
# Environment:
#   INTERLOCK_CONTROL_PLANE_DIR  where the binaries go (default
#       ${XDG_CACHE_HOME:-$HOME/.cache}/interlock/control-plane/<k8s version>/bin)
#   INTERLOCK_K8S_MINOR          minor line `prep` picks from (default v1.36)
#
# The build goes through the wrapper module in hack/control-plane: it requires
# k8s.io/kubernetes and replaces every staging module (which the kubernetes
# go.mod points at ./staging/src/...) with its published v0.X.Y tag. `prep`
# generates that replace list from the kubernetes go.mod; the committed go.mod
# and go.sum are its result, so the build itself is reproducible.
#
# The last line on stdout is the bin dir; everything else goes to stderr.
set -Eeuo pipefail

STEP="start"
fail() {
    echo "control-plane.sh: error in step '${STEP}': $*" >&2
    exit 1
}
on_err() {
    local rc=$?
    echo "control-plane.sh: step '${STEP}' failed (exit ${rc})" >&2
    exit "${rc}"
}
trap on_err ERR
log() { echo "control-plane.sh: $*" >&2; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WRAPPER="${ROOT}/hack/control-plane"
COMMANDS=(
    k8s.io/kubernetes/cmd/kube-apiserver
    k8s.io/kubernetes/cmd/kube-controller-manager
    k8s.io/kubernetes/cmd/kubectl
    go.etcd.io/etcd/server/v3
    go.etcd.io/etcd/etcdctl/v3
)
BINARIES=(kube-apiserver kube-controller-manager kubectl etcd etcdctl)

require_go() {
    STEP="find go"
    command -v go >/dev/null 2>&1 ||
        fail "the Go toolchain (go 1.26 or newer) is not on PATH; install it to build the control plane"
    local v
    v="$(go env GOVERSION)" || fail "'go env GOVERSION' failed"
    log "using ${v} ($(command -v go))"
}

# Version of a module in the wrapper's build list, read from go.mod alone.
wrapper_version() {
    awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "${WRAPPER}/go.mod"
}

default_bin_dir() {
    local k8s="$1"
    echo "${XDG_CACHE_HOME:-${HOME}/.cache}/interlock/control-plane/${k8s}/bin"
}

# ---------------------------------------------------------------------------
# prep: regenerate the wrapper module
# ---------------------------------------------------------------------------
prep() {
    require_go
    local minor="${INTERLOCK_K8S_MINOR:-v1.36}"
    local k8s="${1:-}"
    local tmp
    tmp="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '${tmp}'" EXIT
    if [[ -z "${k8s}" ]]; then
        STEP="pick newest ${minor}.x from the module proxy"
        k8s="$(cd "${tmp}" && go list -m -versions k8s.io/kubernetes | tr ' ' '\n' |
            grep -E "^${minor//./\\.}\.[0-9]+$" | sort -V | tail -n1)" || true
        [[ -n "${k8s}" ]] || fail "no ${minor}.x of k8s.io/kubernetes on the module proxy"
    fi
    local staging="v0.${k8s#v1.}"
    log "preparing wrapper for k8s.io/kubernetes ${k8s} (staging modules ${staging})"

    STEP="download k8s.io/kubernetes@${k8s}"
    local json gomod
    json="$(cd "${tmp}" && go mod download -json "k8s.io/kubernetes@${k8s}")" ||
        fail "cannot download k8s.io/kubernetes@${k8s}"
    gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"${json}")"
    [[ -f "${gomod}" ]] || fail "go mod download did not name a go.mod for k8s.io/kubernetes@${k8s}"

    STEP="read the staging replace list from the kubernetes go.mod"
    # Every `k8s.io/X => ./staging/src/k8s.io/X` that kubernetes also requires
    # (the replace block names a few sample modules that it does not require
    # and that are not published at every tag).
    local -a replaces=()
    local mod
    while read -r mod; do
        if awk -v m="${mod}" '$1 == m && $2 == "v0.0.0" { found = 1 } END { exit !found }' "${gomod}"; then
            replaces+=("-replace=${mod}=${mod}@${staging}")
        else
            log "skipping ${mod}: replaced but not required by k8s.io/kubernetes"
        fi
    done < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { print $1 }' "${gomod}")
    [[ ${#replaces[@]} -gt 0 ]] || fail "no staging replace lines found in ${gomod}"
    log "${#replaces[@]} staging modules replaced by their ${staging} tags"

    STEP="read the etcd version from the kubernetes go.mod"
    local etcd
    etcd="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "${gomod}")"
    [[ "${etcd}" == v3.* ]] || fail "k8s.io/kubernetes@${k8s} does not name go.etcd.io/etcd/server/v3"
    log "etcd ${etcd} (the version k8s.io/kubernetes ${k8s} requires)"

    STEP="write the wrapper go.mod"
    local godirective
    godirective="$(awk '$1 == "go" { print $2; exit }' "${gomod}")"
    (
        cd "${tmp}"
        go mod init interlock.dev/hack/control-plane >/dev/null 2>&1
        go mod edit -go="${godirective}" -godebug="default=go${godirective%.*}" \
            -require="k8s.io/kubernetes@${k8s}" \
            -require="go.etcd.io/etcd/server/v3@${etcd}" \
            -require="go.etcd.io/etcd/etcdctl/v3@${etcd}" \
            "${replaces[@]}"
        for c in "${COMMANDS[@]}"; do go mod edit -tool="${c}"; done
    )

    STEP="go mod tidy in the wrapper"
    (cd "${tmp}" && go mod tidy) || fail "go mod tidy failed in the wrapper module"

    STEP="compare the wrapper's build list with the kubernetes go.mod"
    # Adding etcdctl must not move any dependency kubernetes pins.
    local drift=0 path want got
    local -A built=()
    while read -r path got; do built["${path}"]="${got}"; done < <(cd "${tmp}" && go list -m -f '{{.Path}} {{.Version}}' all)
    while read -r path want; do
        got="${built[${path}]:-}"
        if [[ "${got}" != "${want}" ]]; then
            log "drift: ${path} ${want} in k8s.io/kubernetes, '${got}' in the wrapper"
            drift=1
        fi
    done < <(awk '/^require \(/ { r = 1; next } r && /^\)/ { r = 0 } r && $2 != "v0.0.0" { print $1, $2 }' "${gomod}")
    [[ ${drift} -eq 0 ]] || fail "the wrapper's dependency versions differ from k8s.io/kubernetes ${k8s}"

    STEP="copy go.mod and go.sum into hack/control-plane"
    mkdir -p "${WRAPPER}"
    cp "${tmp}/go.mod" "${tmp}/go.sum" "${WRAPPER}/"
    log "wrote ${WRAPPER}/go.mod and go.sum"
}

# ---------------------------------------------------------------------------
# build: the binaries into the cache
# ---------------------------------------------------------------------------
# Bump when the build commands below change in a way that changes the binaries.
RECIPE=1

stamp_of() {
    # What the binaries in the cache were built from.
    { cat "${WRAPPER}/go.mod" "${WRAPPER}/go.sum"; echo "recipe ${RECIPE}"; } | sha256sum | cut -d' ' -f1
}

is_built() {
    local dir="$1" stamp="$2" b
    [[ -f "${dir}/.stamp" && "$(cat "${dir}/.stamp")" == "${stamp}" ]] || return 1
    for b in "${BINARIES[@]}"; do [[ -x "${dir}/${b}" ]] || return 1; done
}

build() {
    STEP="read hack/control-plane/go.mod"
    [[ -f "${WRAPPER}/go.mod" && -f "${WRAPPER}/go.sum" ]] ||
        fail "${WRAPPER}/go.mod or go.sum is missing; run 'scripts/control-plane.sh prep'"
    local k8s etcd
    k8s="$(wrapper_version k8s.io/kubernetes)"
    etcd="$(wrapper_version go.etcd.io/etcd/server/v3)"
    [[ -n "${k8s}" && -n "${etcd}" ]] || fail "hack/control-plane/go.mod does not require k8s.io/kubernetes and etcd"

    local bin="${INTERLOCK_CONTROL_PLANE_DIR:-$(default_bin_dir "${k8s}")}"
    local stamp
    stamp="$(stamp_of)"
    if is_built "${bin}" "${stamp}"; then
        echo "${bin}"
        return 0
    fi

    STEP="take the build lock"
    mkdir -p "$(dirname "${bin}")"
    local lock="${bin%/}.lock"
    exec 9>"${lock}"
    if ! flock -n 9; then
        log "another build holds ${lock}; waiting for it"
        flock 9
    fi
    if is_built "${bin}" "${stamp}"; then
        # Built by whoever held the lock.
        echo "${bin}"
        return 0
    fi

    require_go
    local started=${SECONDS}
    log "building Kubernetes ${k8s} and etcd ${etcd} into ${bin} (the first build takes a long time)"

    STEP="download modules"
    (cd "${WRAPPER}" && go mod download) || fail "go mod download failed in ${WRAPPER}"

    STEP="read the release date of k8s.io/kubernetes@${k8s}"
    local date
    date="$(cd "${WRAPPER}" && go list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)" || date=""
    [[ -n "${date}" ]] || date="1970-01-01T00:00:00Z"

    local minor="${k8s#v1.}"
    minor="${minor%%.*}"
    local -a xs=()
    local pkg
    for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
        xs+=("-X '${pkg}.gitVersion=${k8s}'" "-X '${pkg}.gitMajor=1'" "-X '${pkg}.gitMinor=${minor}'"
            "-X '${pkg}.gitTreeState=archive'" "-X '${pkg}.buildDate=${date}'")
    done
    local ldflags="-s -w ${xs[*]}"

    local out="${bin%/}.partial"
    rm -rf "${out}"
    mkdir -p "${out}"

    STEP="build kube-apiserver, kube-controller-manager, kubectl"
    log "${STEP}"
    (cd "${WRAPPER}" && CGO_ENABLED=0 go build -trimpath -tags=selinux,notest,grpcnotrace \
        -ldflags="${ldflags}" -o "${out}/" "${COMMANDS[@]:0:3}") ||
        fail "go build of the Kubernetes commands failed"

    STEP="build etcd"
    log "${STEP}"
    (cd "${WRAPPER}" && CGO_ENABLED=0 go build -trimpath -tags=grpcnotrace -ldflags="-s -w" \
        -o "${out}/etcd" go.etcd.io/etcd/server/v3) || fail "go build of etcd failed"

    STEP="build etcdctl"
    log "${STEP}"
    (cd "${WRAPPER}" && CGO_ENABLED=0 go build -trimpath -tags=grpcnotrace -ldflags="-s -w" \
        -o "${out}/etcdctl" go.etcd.io/etcd/etcdctl/v3) || fail "go build of etcdctl failed"

    STEP="check the built versions"
    local v
    v="$("${out}/kubectl" version --client 2>&1)" || fail "kubectl version --client failed: ${v}"
    grep -q "Client Version: ${k8s}\$" <<<"${v}" || fail "kubectl reports '${v}', expected ${k8s}"
    v="$("${out}/etcd" --version 2>&1)" || fail "etcd --version failed: ${v}"
    grep -q "etcd Version: ${etcd#v}\$" <<<"${v}" || fail "etcd reports '${v}', expected ${etcd}"

    STEP="install into ${bin}"
    echo "${stamp}" >"${out}/.stamp"
    {
        echo "kubernetes ${k8s}"
        echo "etcd ${etcd}"
        echo "go $(go env GOVERSION)"
        echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - started))s"
    } >"${out}/VERSIONS"
    rm -rf "${bin}"
    mv "${out}" "${bin}"
    log "built in $((SECONDS - started))s"
    echo "${bin}"
}

path_only() {
    local k8s
    k8s="$(wrapper_version k8s.io/kubernetes)"
    [[ -n "${k8s}" ]] || fail "hack/control-plane/go.mod does not require k8s.io/kubernetes"
    echo "${INTERLOCK_CONTROL_PLANE_DIR:-$(default_bin_dir "${k8s}")}"
}

case "${1:-build}" in
build) build ;;
path) path_only ;;
prep)
    shift
    prep "$@"
    ;;
-h | --help | help) sed -n '2,/^set -E/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' ;;
*) fail "unknown command '$1' (build, path, prep, help)" ;;
esac
