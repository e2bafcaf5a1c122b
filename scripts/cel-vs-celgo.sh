#!/usr/bin/env bash
# Interlock's CEL engine beside cel-go (the engine of kube-apiserver, at the
# version kube-apiserver 1.36 builds with: benches/celgo/go.mod) on the same
# expressions (the CASES of benches/cel.rs) over the same Pods
# (benches/data): compile and evaluation time per expression, side by side,
# with the ratio cel-go / Interlock.
#
# Usage:
#   scripts/cel-vs-celgo.sh
#
# Environment:
#   CEL_REPORT_SAMPLES   batches per figure, both benches (default 31)
#   CEL_REPORT_BATCH_MS  milliseconds per batch, both benches (default 5)
#
# Runs `cargo bench --bench cel -- --report` (Interlock's side, the bench
# profile) and then the Go bench, one after the other, both under nice -n 19.
# Needs cargo and the Go toolchain (the module proxy for the first build).
set -Eeuo pipefail

log() { echo "cel-vs-celgo.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
samples="${CEL_REPORT_SAMPLES:-31}"
batch="${CEL_REPORT_BATCH_MS:-5}"
command -v go >/dev/null 2>&1 || fail "the Go toolchain is not on PATH; install it to build benches/celgo"
command -v cargo >/dev/null 2>&1 || fail "cargo is not on PATH"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

log "building benches/celgo ($(awk '$1 == "github.com/google/cel-go" { print $1, $2 }' "${ROOT}/benches/celgo/go.mod"))"
(cd "${ROOT}/benches/celgo" && nice -n 19 go build -trimpath -o "${work}/celgo" .) ||
    fail "go build of benches/celgo failed"

log "cargo bench --bench cel -- --report"
(cd "${ROOT}" && CEL_REPORT_SAMPLES="${samples}" CEL_REPORT_BATCH_MS="${batch}" \
    nice -n 19 cargo bench --quiet --bench cel -- --report) >"${work}/interlock.md" ||
    fail "cargo bench --bench cel -- --report failed"
load_rust="$(cut -d' ' -f1-3 /proc/loadavg)"

log "cel-go bench"
(cd "${ROOT}/benches" && nice -n 19 "${work}/celgo" -cases cel.rs -data data \
    -samples "${samples}" -batch-ms "${batch}") >"${work}/celgo.tsv" ||
    fail "the cel-go bench failed: $(tail -n 5 "${work}/celgo.tsv")"
load_go="$(cut -d' ' -f1-3 /proc/loadavg)"

echo "Interlock: cargo bench --bench cel -- --report (load average after: ${load_rust})"
echo "cel-go: $(awk '$1 == "github.com/google/cel-go" { print $2 }' "${ROOT}/benches/celgo/go.mod"), kube-apiserver's options (load average after: ${load_go})"
echo "medians of ${samples} batches of ~${batch} ms; ratio = cel-go / Interlock"
echo
# Rows of the Rust report: | `name` | pod | compile (ours) | compile (yardstick) | eval (ours) | ...
# Rows of the Go bench: name pod compile_ns eval_ns result (tab-separated).
awk -F'\t' -v OFS='' '
function ns(s,   n) {
    gsub(/^ +| +$/, "", s)
    n = s + 0
    if (s ~ /ms$/) return n * 1000000
    if (s ~ /µs$/) return n * 1000
    return n
}
function fmt(x) {
    if (x >= 1000000) return sprintf("%.2f ms", x / 1000000)
    if (x >= 1000) return sprintf("%.2f µs", x / 1000)
    return sprintf("%.0f ns", x)
}
FNR == 1 { file++ }
file == 1 && /^\| `/ {
    split($0, c, "|")
    name = c[2]; gsub(/[` ]/, "", name)
    comp[name] = ns(c[4]); ev[name] = ns(c[6]); pod[name] = c[3]; gsub(/ /, "", pod[name])
    order[++n] = name
}
file == 2 && FNR > 2 { gc[$1] = $3; ge[$1] = $4; gres[$1] = $5 }
END {
    print "| expression | pod | compile (Interlock) | compile (cel-go) | ratio | eval (Interlock) | eval (cel-go) | ratio |"
    print "|---|---|---:|---:|---:|---:|---:|---:|"
    met = 0; total = 0
    for (i = 1; i <= n; i++) {
        k = order[i]
        if (!(k in ge) || ge[k] == "-") {
            print "| `", k, "` | ", pod[k], " | ", fmt(comp[k]), " | ", gres[k], " | - | ", fmt(ev[k]), " | - | - |"
            continue
        }
        rc = gc[k] / comp[k]; re = ge[k] / ev[k]
        total++; if (re >= 3) met++
        ratios[total] = re
        print "| `", k, "` | ", pod[k], " | ", fmt(comp[k]), " | ", fmt(gc[k]), " | ", sprintf("%.1fx", rc), " | ", fmt(ev[k]), " | ", fmt(ge[k]), " | ", sprintf("%.1fx", re), " |"
    }
    # median of the eval ratios
    for (i = 1; i <= total; i++) for (j = i + 1; j <= total; j++) if (ratios[j] < ratios[i]) { t = ratios[i]; ratios[i] = ratios[j]; ratios[j] = t }
    if (total > 0) {
        med = (total % 2) ? ratios[(total + 1) / 2] : (ratios[total / 2] + ratios[total / 2 + 1]) / 2
        print ""
        print "eval: median ratio ", sprintf("%.1fx", med), ", lowest ", sprintf("%.1fx", ratios[1]), "; Interlock at least 3x faster on ", met, " of ", total, " expressions"
    }
}' "${work}/interlock.md" "${work}/celgo.tsv"
echo
echo "cel-go's results (each expression evaluated once before timing):"
awk -F'\t' 'FNR > 2 { print "  " $1 ": " $5 }' "${work}/celgo.tsv"
