#!/usr/bin/env bash
# Builds the Interlock container image (image/Containerfile): a static
# `interlock` binary on an empty (`scratch`) root, tagged with the version
# the manifests and the chart use (Cargo.toml's version).
#
# Usage:
#   scripts/image.sh                 build the binary and the image
#   scripts/image.sh --oci DIR       also write the image as an OCI layout
#                                    directory (DIR is replaced)
#   scripts/image.sh --oci-archive F also write it as an OCI archive (tar)
#   scripts/image.sh binary          build and check the static binary only
#
# Steps:
#   1. cargo builds the binary statically (glibc, mimalloc and ring linked
#      in: RUSTFLAGS=-C target-feature=+crt-static, --target
#      x86_64-unknown-linux-gnu) into a target directory OUTSIDE the
#      repository, so a fresh clone on the same machine (CI) rebuilds
#      incrementally; the script refuses a binary that is dynamically linked.
#   2. The image is built from a context holding only that binary, by the
#      first tool that works: buildah, podman, or docker (with a running
#      daemon). buildah and podman keep their images in a storage of their
#      own under the cache (vfs driver: no overlay mount, no daemon, no
#      privileges beyond writing files); with none of the three, and running
#      as root with apt-get, buildah is installed (`apt-get install buildah`);
#      otherwise the script fails naming what to install.
#
# Environment:
#   INTERLOCK_IMAGE_TARGET_DIR  cargo's target dir for the static build
#       (default ${XDG_CACHE_HOME:-$HOME/.cache}/interlock/image-target)
#   INTERLOCK_IMAGE_STORAGE     buildah/podman storage root (default
#       ${XDG_CACHE_HOME:-$HOME/.cache}/interlock/image-storage)
#   INTERLOCK_IMAGE_TOOL        buildah, podman or docker (default: the first
#       that works)
#   INTERLOCK_IMAGE_NAME        repository name (default interlock); the tag
#       is always the version
#   INTERLOCK_IMAGE_SOURCE      org.opencontainers.image.source (default: the
#       git remote `origin`, else "unknown")
#
# The last line on stdout is the image reference (NAME:VERSION); everything
# else goes to stderr. Exit status 3: no image tool, and none could be
# installed (tests/integration/image.rs skips then, saying so); 1: any other
# failure.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/interlock"
TARGET_DIR="${INTERLOCK_IMAGE_TARGET_DIR:-${CACHE}/image-target}"
STORAGE="${INTERLOCK_IMAGE_STORAGE:-${CACHE}/image-storage}"
NAME="${INTERLOCK_IMAGE_NAME:-interlock}"
TRIPLE=x86_64-unknown-linux-gnu
log() { echo "image.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

oci_dir=""
oci_archive=""
binary_only=0
while (($#)); do
    case "$1" in
        --oci) oci_dir="${2:?--oci needs a directory}"; shift 2 ;;
        --oci-archive) oci_archive="${2:?--oci-archive needs a file}"; shift 2 ;;
        binary) binary_only=1; shift ;;
        -h|--help) sed -n '2,/^set -E/p' "$0" | sed 's/^# \{0,1\}//;$d' >&2; exit 0 ;;
        *) fail "unknown argument '$1' (see --help)" ;;
    esac
done

# 1. The static binary.
command -v cargo >/dev/null 2>&1 || fail "cargo is not on PATH"
log "building the static binary into ${TARGET_DIR} (the first build takes several minutes)"
start=$(date +%s)
(cd "${ROOT}" && RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    CARGO_TARGET_DIR="${TARGET_DIR}" \
    cargo build --release --locked --target "${TRIPLE}" --bin interlock >&2) \
    || fail "cargo build of the static binary failed"
log "binary built in $(( $(date +%s) - start ))s"
bin="${TARGET_DIR}/${TRIPLE}/release/interlock"
[[ -x "${bin}" ]] || fail "no binary at ${bin}"
if command -v ldd >/dev/null 2>&1; then
    linked="$(ldd "${bin}" 2>&1 || true)"
    case "${linked}" in
        *"not a dynamic executable"*|*"statically linked"*) ;;
        *) fail "${bin} is dynamically linked: ${linked}" ;;
    esac
fi
# The version and commit are the binary's own (build.rs), so the labels
# always name what is inside.
version_line="$("${bin}" --version)"          # interlock 0.1.0 (1a2b3c4d5e6f)
version="$(sed -n 's/^interlock \([^ ]*\) (\(.*\))$/\1/p' <<<"${version_line}")"
revision="$(sed -n 's/^interlock \([^ ]*\) (\(.*\))$/\2/p' <<<"${version_line}")"
[[ -n "${version}" && -n "${revision}" ]] || fail "unexpected --version output: ${version_line}"
if ((binary_only)); then
    echo "${bin}"
    exit 0
fi
source_url="${INTERLOCK_IMAGE_SOURCE:-$(git -C "${ROOT}" remote get-url origin 2>/dev/null || echo unknown)}"
ref="${NAME}:${version}"

# 2. The image.
works() {
    case "$1" in
        buildah|podman) command -v "$1" >/dev/null 2>&1 ;;
        docker) command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 ;;
    esac
}
tool="${INTERLOCK_IMAGE_TOOL:-}"
if [[ -z "${tool}" ]]; then
    for t in buildah podman docker; do
        if works "$t"; then tool="$t"; break; fi
    done
fi
if [[ -z "${tool}" ]]; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        log "no buildah, podman or docker daemon: installing buildah with apt-get"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah) >&2 \
            || fail "apt-get install buildah failed"
        tool=buildah
    else
        log "error: no image tool: install buildah (or podman, or run a docker daemon), e.g. 'apt-get install buildah'"
        exit 3
    fi
fi
works "${tool}" || fail "${tool} is not usable here"

context="$(mktemp -d)"
trap 'rm -rf "${context}"' EXIT
cp "${bin}" "${context}/interlock"
# The release profile keeps line tables (backtraces in the cache's binary);
# the image gets the binary without debug sections (its symbols stay).
if command -v strip >/dev/null 2>&1; then
    strip --strip-debug "${context}/interlock"
fi
log "binary in the image: $(( $(stat -c %s "${context}/interlock") / 1048576 )) MiB"
build_args=(
    --file "${ROOT}/image/Containerfile"
    --build-arg "VERSION=${version}"
    --build-arg "REVISION=${revision}"
    --build-arg "SOURCE=${source_url}"
    --tag "${ref}"
)
# The commit's time as the image's (and its files') time: the same commit
# builds the same image.
if epoch="$(git -C "${ROOT}" log -1 --format=%ct 2>/dev/null)" && [[ -n "${epoch}" ]]; then
    [[ "${tool}" == docker ]] || build_args+=(--timestamp "${epoch}")
fi
log "building ${ref} with ${tool}"
case "${tool}" in
    buildah|podman)
        mkdir -p "${STORAGE}/root" "${STORAGE}/run"
        store=(--root "${STORAGE}/root" --runroot "${STORAGE}/run" --storage-driver vfs)
        if [[ "${tool}" == buildah ]]; then
            buildah "${store[@]}" build --isolation chroot --quiet "${build_args[@]}" "${context}" >&2
        else
            podman "${store[@]}" build --quiet "${build_args[@]}" "${context}" >&2
        fi
        push() { "${tool}" "${store[@]}" push --quiet "${ref}" "$1" >&2; }
        if [[ -n "${oci_dir}" ]]; then
            rm -rf "${oci_dir}"
            push "oci:${oci_dir}:${ref}"
            log "wrote the OCI layout ${oci_dir}"
        fi
        if [[ -n "${oci_archive}" ]]; then
            rm -f "${oci_archive}"
            push "oci-archive:${oci_archive}:${ref}"
            log "wrote the OCI archive ${oci_archive}"
        fi
        ;;
    docker)
        docker build "${build_args[@]}" "${context}" >&2
        [[ -z "${oci_dir}" ]] || fail "--oci needs buildah or podman (docker save writes an archive: use --oci-archive)"
        if [[ -n "${oci_archive}" ]]; then
            docker save --output "${oci_archive}" "${ref}"
            log "wrote ${oci_archive} (docker save)"
        fi
        ;;
    *) fail "unknown INTERLOCK_IMAGE_TOOL '${tool}' (buildah, podman or docker)" ;;
esac
log "built ${ref} (revision ${revision})"
echo "${ref}"
