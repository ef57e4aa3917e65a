#!/usr/bin/env bash
# infeed beside a machine floor: a single-threaded C program doing only the irreducible work of the
# lm and img reference pipelines (framing, both masked CRC32Cs, the Example walk, the varints, and the
# batch bytes `infeed bench` emits), on the same files, in the same run:
#   FLOOR_SRC=path/to/floor.c bash scripts/floor.sh            # 11 rounds
#   FLOOR_SRC=path/to/floor.c bash scripts/floor.sh --quick    # 3 rounds
# Options: --rounds N, --results FILE (every run as a JSON line). Environment: WORKLOADS (default
# "lm img"), BENCH_DATA (default bench-data/, git-ignored), PYTHON (for the TensorFlow venv).
#
# FLOOR_SRC is the floor's C source (it takes `lm|img --read FILES...` and prints one JSON line with
# records_per_sec; it needs AVX-512 VBMI). The script builds it with gcc -O3 -march=native, builds
# infeed --release, writes the workloads with TensorFlow (benches/compare/gen_data.py, 4 shards of
# ~100 MB, reused when there), reads every file once (warm page cache), then round after round,
# alternating floor and infeed:
#   pinned: both on `taskset -c 0`;
#   2 cores: infeed on both cores; the floor as two processes, one per core, each on half the
#            shards (it so pays the shared memory traffic), their records/s summed.
# Each round also runs, beside the same floor (which reads, with no index): `infeed bench --mmap`
# (files mapped, not read: no kernel copy; opt-in, see ReadOptions::mmap), and `infeed bench
# --index-dir` (the shards framed by the indexes `infeed index` writes once into a temporary
# folder first, not by a walk of their headers; the workers read the records either way), and
# both (`--index-dir --mmap`: each worker takes its records as views of its own map).
# Prints per workload and side the median records/s, and infeed / floor as the median of each
# round's own ratio (the host's speed drifts between rounds). Needs gcc, taskset, and
# what scripts/compare-tfdata.sh needs to write the data.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/tf-venv.sh
source scripts/tf-venv.sh
ROUNDS=11
RESULTS=""
WORKLOADS="${WORKLOADS:-lm img}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) ROUNDS=3 ;;
        --rounds) ROUNDS="$2"; shift ;;
        --results) RESULTS="$2"; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "floor.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[[ -n "${FLOOR_SRC:-}" && -f "$FLOOR_SRC" ]] || {
    echo "floor.sh: set FLOOR_SRC to the floor's C source" >&2; exit 2; }
DATA="${BENCH_DATA:-bench-data}/scale-1"
RESULTS="${RESULTS:-$DATA/floor-results.jsonl}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

gcc -O3 -march=native -o "$WORK/floor" "$FLOOR_SRC"
cargo build --quiet --release --bin infeed
INFEED=target/release/infeed
for w in $WORKLOADS; do
    if ! compgen -G "$DATA/$w/*.tfrecord" >/dev/null; then
        ensure_tf_venv floor.sh
        TF_CPP_MIN_LOG_LEVEL=2 "$VPY" benches/compare/gen_data.py "$DATA" --workloads "$w" >&2
    fi
done
mkdir -p "$(dirname "$RESULTS")"
: >"$RESULTS"

flags() { # workload: infeed bench's flags for the reference pipeline
    case "$1" in
        lm) echo --spec input_ids:var_len:int64,attention_mask:var_len:int64 --pad-to-multiple-of 64 \
            --max-length 512 --cast int32 --batch 256 --drop-remainder ;;
        img) echo --spec image:fixed_len[]:bytes,label:fixed_len[]:int64 --decode-raw image:32x32x3 \
            --batch 256 --drop-remainder ;;
    esac
}
rate() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["records_per_sec"])'; }
# Runs a side to a file and only then reads its rate: a `| rate` started Python beside the run, and
# its start-up took a core for much of an img run on 2 cores (~0.1 s), a third off its rate.
timed() { "$@" >"$WORK/out"; rate <"$WORK/out"; }
record() { # workload side cores round rate
    printf '{"workload":"%s","side":"%s","cores":%s,"round":%s,"records_per_sec":%s}\n' "$@" >>"$RESULTS"
}

for w in $WORKLOADS; do
    mapfile -t files < <(ls "$DATA/$w"/*.tfrecord)
    cat "${files[@]}" >/dev/null
    half=$(( (${#files[@]} + 1) / 2 ))
    glob="$DATA/$w/*.tfrecord"
    "$INFEED" index "${files[@]}" -o "$WORK/index-$w" >/dev/null
    by_index=(--index-dir "$WORK/index-$w")
    # shellcheck disable=SC2046 # the flags are words
    for round in $(seq 1 "$ROUNDS"); do
        record "$w" floor 1 "$round" "$(timed taskset -c 0 "$WORK/floor" "$w" --read "${files[@]}")"
        record "$w" infeed 1 "$round" "$(timed taskset -c 0 "$INFEED" bench "$glob" $(flags "$w") \
            --epochs 1 --no-digest --json)"
        record "$w" infeed-mmap 1 "$round" "$(timed taskset -c 0 "$INFEED" bench "$glob" $(flags "$w") \
            --epochs 1 --no-digest --json --mmap)"
        record "$w" infeed-indexed 1 "$round" "$(timed taskset -c 0 "$INFEED" bench "$glob" $(flags "$w") \
            --epochs 1 --no-digest --json "${by_index[@]}")"
        record "$w" infeed-indexed-mmap 1 "$round" "$(timed taskset -c 0 "$INFEED" bench "$glob" \
            $(flags "$w") --epochs 1 --no-digest --json "${by_index[@]}" --mmap)"
        taskset -c 0 "$WORK/floor" "$w" --read "${files[@]:0:$half}" >"$WORK/a" &
        a=$!
        taskset -c 1 "$WORK/floor" "$w" --read "${files[@]:$half}" >"$WORK/b" &
        b=$!
        wait "$a" "$b"
        record "$w" floor 2 "$round" "$(python3 -c 'import json,sys
print(sum(json.loads(open(f).read().strip().splitlines()[-1])["records_per_sec"] for f in sys.argv[1:]))' "$WORK/a" "$WORK/b")"
        record "$w" infeed 2 "$round" "$(timed "$INFEED" bench "$glob" $(flags "$w") --epochs 1 --no-digest \
            --json)"
        record "$w" infeed-mmap 2 "$round" "$(timed "$INFEED" bench "$glob" $(flags "$w") --epochs 1 \
            --no-digest --json --mmap)"
        record "$w" infeed-indexed 2 "$round" "$(timed "$INFEED" bench "$glob" $(flags "$w") --epochs 1 \
            --no-digest --json "${by_index[@]}")"
        record "$w" infeed-indexed-mmap 2 "$round" "$(timed "$INFEED" bench "$glob" $(flags "$w") \
            --epochs 1 --no-digest --json "${by_index[@]}" --mmap)"
    done
done

python3 - "$RESULTS" <<'PY'
import json, statistics, sys
from collections import defaultdict

# Rates: medians over the rounds. Ratios: the median of each round's own ratio (infeed against the
# floor run seconds before it), since a shared host's speed drifts between rounds more than
# between two runs of one round.
rates = defaultdict(list)
rounds = defaultdict(dict)
for line in open(sys.argv[1]):
    r = json.loads(line)
    rates[(r["workload"], r["cores"], r["side"])].append(r["records_per_sec"])
    rounds[(r["workload"], r["cores"], r["round"])][r["side"]] = r["records_per_sec"]


def ratio(w, c, side):
    return statistics.median(s[side] / s["floor"] for (rw, rc, _), s in rounds.items()
                             if (rw, rc) == (w, c))


print(f"{'workload':8} {'cores':>5} {'floor rec/s':>14} {'infeed rec/s':>14} {'infeed/floor':>12}"
      f" {'--mmap rec/s':>14} {'--mmap/floor':>12} {'--index-dir':>14} {'/floor':>6}"
      f" {'+ --mmap':>12} {'/floor':>6}")
for w, c in sorted({(w, c) for w, c, _ in rates}):
    m = {side: statistics.median(rates[(w, c, side)])
         for side in ("floor", "infeed", "infeed-mmap", "infeed-indexed", "infeed-indexed-mmap")}
    print(f"{w:8} {c:>5} {m['floor']:>14,.0f} {m['infeed']:>14,.0f} {ratio(w, c, 'infeed'):>12.2f}"
          f" {m['infeed-mmap']:>14,.0f} {ratio(w, c, 'infeed-mmap'):>12.2f}"
          f" {m['infeed-indexed']:>14,.0f} {ratio(w, c, 'infeed-indexed'):>6.2f}"
          f" {m['infeed-indexed-mmap']:>12,.0f} {ratio(w, c, 'infeed-indexed-mmap'):>6.2f}")
PY
