#!/usr/bin/env bash
# Precision of `interlock check` on real-world repositories nobody tuned
# against. See tests/realworld/README.md.
#
#   scripts/realworld.sh CORPUS_DIR HALF [INTERLOCK_BIN]
#       Runs `BIN check -o json PATHS` in CORPUS_DIR/OWNER+NAME for every
#       repository of HALF (dev or holdout) in tests/realworld/repos.tsv.
#       Writes every finding to $REALWORLD_OUT (default
#       ./realworld-HALF-findings.tsv) and one row per repository to
#       ${REALWORLD_OUT%.tsv}-repos.tsv; prints a line per repository and
#       totals. With REALWORLD_SUMMARY_ONLY=1 only the per-repository
#       lines are printed and no findings file is written (for the
#       holdout half, so its findings are not read while tuning).
#
#   scripts/realworld.sh --judge JUDGED_TSV FINDINGS_TSV
#       Joins FINDINGS_TSV (from a run) with the judgements in JUDGED_TSV
#       (tests/realworld/judged-*.tsv: the finding columns plus verdict,
#       why) and prints per-policy TP / FP / unjudged, overall precision
#       and Deny-only precision. Key: repo, policy, kind, namespace, name,
#       the source file (without its line) and the first 60 characters of
#       the message, lower-cased with runs of whitespace made one space.
#
# Needs bash, python3 and the binary. CORPUS_DIR/OWNER+NAME holds the
# extracted tree of the commit repos.tsv names (see the README).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
repos_tsv=${REALWORLD_REPOS:-$here/tests/realworld/repos.tsv}

command -v python3 >/dev/null || { echo "realworld.sh: needs python3" >&2; exit 2; }

if [ "${1:-}" = "--judge" ]; then
    [ $# -eq 3 ] || { echo "usage: $0 --judge JUDGED_TSV FINDINGS_TSV" >&2; exit 2; }
    exec python3 - "$2" "$3" <<'PY'
import sys, re, collections
def key(r):
    m = re.sub(r'\s+', ' ', r['message'].lower()).strip()[:60]
    f = r['source'].rsplit(':', 1)[0]   # file, not line: kubeflow has many 'default/deployment' in one repo
    return (r['repo'], r['policy'], r['kind'], r['namespace'], r['name'], f, m)
def read(p):
    lines = [l.rstrip('\n') for l in open(p, encoding='utf-8') if l.strip() and not l.startswith('#')]
    hdr = lines[0].split('\t')
    return [dict(zip(hdr, l.split('\t'))) for l in lines[1:]]
judged = {}
for r in read(sys.argv[1]):
    k = key(r)
    v = r['verdict'].strip()
    if k in judged and judged[k] != v:
        print(f"conflicting verdicts for {k}", file=sys.stderr)
    judged[k] = v
counts = collections.defaultdict(lambda: collections.Counter())
for r in read(sys.argv[2]):
    v = judged.get(key(r), 'unjudged')
    counts[(r['policy'], r['action'])][v] += 1
tot = collections.Counter(); deny = collections.Counter()
print(f"{'policy':32} {'action':6} {'TP':>5} {'FP':>5} {'unjdg':>5} {'precision':>9}")
for (p, a), c in sorted(counts.items()):
    j = c['TP'] + c['FP']
    prec = f"{c['TP']/j:.3f}" if j else '-'
    print(f"{p:32} {a:6} {c['TP']:5} {c['FP']:5} {c['unjudged']:5} {prec:>9}")
    tot.update(c)
    if a == 'Deny': deny.update(c)
def line(name, c):
    j = c['TP'] + c['FP']
    prec = f"{c['TP']/j:.3f}" if j else '-'
    print(f"{name:39} {c['TP']:5} {c['FP']:5} {c['unjudged']:5} {prec:>9}")
line('ALL', tot); line('Deny only', deny)
PY
fi

[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: $0 CORPUS_DIR HALF [INTERLOCK_BIN] | $0 --judge JUDGED_TSV FINDINGS_TSV" >&2; exit 2; }
corpus=$(cd "$1" && pwd)
half=$2
bin=${3:-interlock}
if [[ "$bin" == */* ]]; then bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin"); fi
command -v "$bin" >/dev/null || { echo "realworld.sh: no binary $bin" >&2; exit 2; }
out=${REALWORLD_OUT:-$PWD/realworld-$half-findings.tsv}
summary_only=${REALWORLD_SUMMARY_ONLY:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$repos_tsv" "$half" > "$tmp/list" <<'PY'
import sys
lines = [l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if l.strip() and not l.startswith('#')]
hdr = lines[0]
for l in lines[1:]:
    r = dict(zip(hdr, l))
    if r['half'] == sys.argv[2]:
        print(r['repo'] + '\t' + r['paths'].replace(',', ' '))
PY

[ -s "$tmp/list" ] || { echo "realworld.sh: no repository of half '$half' in $repos_tsv" >&2; exit 2; }
: > "$tmp/findings"; : > "$tmp/repos"
while IFS=$'\t' read -r repo paths; do
    dir=$corpus/${repo/\//+}
    if [ ! -d "$dir" ]; then
        echo "realworld.sh: $dir missing (extract $repo first)" >&2
        printf '%s\t-\t-\t-\tmissing\n' "$repo" >> "$tmp/repos"
        continue
    fi
    rc=0
    # shellcheck disable=SC2086
    (cd "$dir" && "$bin" check -o json $paths) > "$tmp/out.json" 2> "$tmp/err" || rc=$?
    python3 - "$repo" "$rc" "$tmp/out.json" "$tmp/err" >> "$tmp/findings" 2>> "$tmp/repos" <<'PY'
import sys, json
repo, rc, path, errp = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
clean = lambda s: ' '.join(str(s if s is not None else '').split())
try:
    d = json.load(open(path))
except Exception:
    err = clean(open(errp, errors='replace').read())[:200]
    print(f"{repo}\t-\t-\t-\t{rc}\t{err}", file=sys.stderr)
    sys.exit(0)
s = d.get('summary', {})
res = d.get('results') or []
for r in res:
    o = r.get('object') or {}
    src = r.get('source') or {}
    print('\t'.join([repo, clean(r.get('policy')), clean(r.get('action')), clean(o.get('apiVersion')),
                     clean(o.get('kind')), clean(o.get('namespace')), clean(o.get('name')),
                     f"{clean(src.get('file'))}:{src.get('line', '')}", clean(r.get('message'))]))
first_err = ''
if d.get('errors'):
    e = d['errors'][0]
    first_err = clean(f"{e.get('file','')}:{e.get('line','')}: {e.get('message', e)}")[:200]
print(f"{repo}\t{s.get('objects', '-')}\t{len(res)}\t{len(d.get('errors') or [])}\t{rc}\t{first_err}", file=sys.stderr)
PY
done < "$tmp/list"

python3 - "$tmp/repos" "$summary_only" <<'PY'
import sys
hide = sys.argv[2] == '1'   # holdout: objects and exit codes only
tot_o = tot_f = 0
print(f"{'repo':45} {'objects':>7} {'findings':>8} {'errors':>6} {'exit':>4}")
for l in open(sys.argv[1]):
    repo, o, f, e, rc, err = (l.rstrip('\n').split('\t') + [''] * 6)[:6]
    if hide:
        f = '-'; err = ('input errors: ' + e) if rc == '2' else ''
    print(f"{repo:45} {o:>7} {f:>8} {e:>6} {rc:>4}  {err}")
    tot_o += int(o) if o.isdigit() else 0
    tot_f += int(f) if f.isdigit() else 0
print(f"{'TOTAL':45} {tot_o:>7} {tot_f:>8}")
PY
if [ "$summary_only" != 1 ]; then
    {
        printf 'repo\tpolicy\taction\tapiVersion\tkind\tnamespace\tname\tsource\tmessage\n'
        cat "$tmp/findings"
    } > "$out"
    {
        printf 'repo\tobjects\tfindings\terrors\texit\tfirst_error\n'
        cat "$tmp/repos"
    } > "${out%.tsv}-repos.tsv"
    python3 - "$tmp/findings" <<'PY'
import sys, collections
c = collections.Counter()
for l in open(sys.argv[1]):
    f = l.split('\t'); c[(f[1], f[2])] += 1
for (p, a), n in sorted(c.items()): print(f"  {p:32} {a:6} {n:6}")
PY
    echo "findings: $out"
fi
