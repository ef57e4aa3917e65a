#!/usr/bin/env bash
# infeed from Python beside `infeed bench`, tf.data's numpy iterator and Grain, same files, same run:
#   bash scripts/compare-python.sh            # lm and img, 4 shards of ~100 MB (as compare-tfdata.sh)
#   bash scripts/compare-python.sh --quick    # 4 shards of ~5 MB, 1 round: a smoke test of the script
# Options: --scale S, --rounds N (default 2), --results FILE, --grain-workers N (default: the cores).
# Environment: WORKLOADS (default "lm img"), FILES (default "plain gzip"), SIDES (default
#              "infeed infeed-py tf.data-numpy grain"; Grain takes minutes a run at scale 1),
#              BENCH_DATA, PYTHON.
#
# Each side runs the full pipeline of docs/architecture.md (benches/compare/python_bench.py says what each
# does) and is consumed into numpy arrays: `infeed bench` (Rust, no Python), the infeed
# package in a Python loop (infeed-py), tf.data through `as_numpy_iterator()`
# (benches/compare/tfdata_bench.py --numpy) and Grain (plain files only: its TFRecord
# reader has no GZIP). Sides alternate within a round, on 2 cores and on `taskset -c 0`.
# Sets up .venv as compare-tfdata.sh does, plus the pins below; builds `infeed` and the
# package's wheel in release. Prints a table (benches/compare/report_python.py: best round
# per side); exits non-zero if the sides disagree on records or shapes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
# shellcheck source=scripts/tf-venv.sh
source scripts/tf-venv.sh

PINS=(tensorflow-cpu==2.21.0 grain==0.2.18 maturin==1.16.0)
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
SCALE=1
ROUNDS=2
RESULTS=""
GRAIN_WORKERS=""
WORKLOADS="${WORKLOADS:-lm img}"
FILES="${FILES:-plain gzip}"
SIDES="${SIDES:-infeed infeed-py tf.data-numpy grain}"
EPOCHS=2
SEED=1

while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) SCALE=0.05 ROUNDS=1 ;;
        --scale) SCALE="$2"; shift ;;
        --rounds) ROUNDS="$2"; shift ;;
        --results) RESULTS="$2"; shift ;;
        --grain-workers) GRAIN_WORKERS="$2"; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "compare-python.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
DATA="${BENCH_DATA:-bench-data}/scale-$SCALE"
RESULTS="${RESULTS:-$DATA/python-$(date +%Y%m%d-%H%M%S).jsonl}"
log() { echo "compare-python.sh: $*" >&2; }

# 1. The venv: TensorFlow, Grain, maturin at their pins.
ensure_venv_pins compare-python.sh "${PINS[@]}"

# 2. infeed, and the package (release) into the same venv.
cargo build --release --quiet --bin infeed
INFEED="$ROOT/target/release/infeed"
rm -rf target/wheels-bench
(cd python && CARGO_TARGET_DIR="$ROOT/target" "../$VENV/bin/maturin" build --release --quiet \
    --interpreter "../$VPY" --out ../target/wheels-bench)
"$VPY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps target/wheels-bench/*.whl

# 3. The workloads, written by TensorFlow (shared with compare-tfdata.sh).
"$VPY" benches/compare/gen_data.py "$DATA" --scale "$SCALE"
mkdir -p "$(dirname "$RESULTS")"
: >"$RESULTS"

glob_of() { if [[ "$2" == gzip ]]; then echo "$DATA/$1-gzip/*.tfrecord.gz"; else echo "$DATA/$1/*.tfrecord"; fi; }

# `infeed bench` flags with the meaning of python_bench.py's full pipelines.
bench_flags() {
    local common=(--json --interleave 4 --batch 256 --seed "$SEED" --no-digest --shuffle 10000 --epochs "$EPOCHS"
        --drop-remainder --mmap)
    case "$1" in
        lm) echo "${common[@]} --spec input_ids:var_len:int64,attention_mask:var_len:int64 --shuffle-files" \
            "--pad-to-multiple-of 64 --max-length 512 --truncation keep-start --cast int32 --masks none" ;;
        img) echo "${common[@]} --spec image:fixed_len[]:bytes,label:fixed_len[]:int64 --decode-raw image:32x32x3" ;;
    esac
}

pin_of() { if [[ "$1" == 1 ]]; then echo 0; else echo 0,1; fi; }

run_side() { # side workload files cores round glob
    local side="$1" w="$2" f="$3" c="$4" r="$5" glob="$6" out load
    local pin
    pin="$(pin_of "$c")"
    # From a warm page cache, whichever side runs first (see compare-tfdata.sh: warm).
    # shellcheck disable=SC2086 # the glob must expand
    cat $glob >/dev/null
    case "$side" in
        infeed) # shellcheck disable=SC2046 # the flags are words
            out="$(taskset -c "$pin" "$INFEED" bench "$glob" $(bench_flags "$w"))" ;;
        tf.data-numpy) out="$(taskset -c "$pin" "$VPY" benches/compare/tfdata_bench.py "$w" full "$glob" \
            --numpy --epochs "$EPOCHS" --seed "$SEED" 2>/dev/null | tail -n 1)" ;;
        grain) out="$(taskset -c "$pin" "$VPY" benches/compare/python_bench.py grain "$w" "$glob" \
            --epochs "$EPOCHS" --seed "$SEED" --workers "${GRAIN_WORKERS:-$c}" 2>/dev/null | tail -n 1)" ;;
        infeed-py) out="$(taskset -c "$pin" "$VPY" benches/compare/python_bench.py infeed-py "$w" "$glob" \
            --epochs "$EPOCHS" --seed "$SEED" | tail -n 1)" ;;
    esac
    [[ "$out" == "{"* ]] || { log "$side $w/$f/$c cores printed no result"; exit 1; }
    read -r load _ </proc/loadavg
    printf '{"workload":"%s","files":"%s","cores":%s,"side":"%s","round":%s,"result":%s,"load":%s}\n' \
        "$w" "$f" "$c" "$side" "$r" "$out" "$load" >>"$RESULTS"
    log "$(printf '%-13s %-3s %-5s %s core(s) round %s: %s records/s' "$side" "$w" "$f" "$c" "$r" \
        "$(sed -E 's/.*"records_per_sec": ?([0-9]+).*/\1/' <<<"$out")")"
}

log "uptime before: $(uptime)"
for w in $WORKLOADS; do
    for f in $FILES; do
        glob="$(glob_of "$w" "$f")"
        for c in 2 1; do
            for ((r = 1; r <= ROUNDS; r++)); do
                for side in $SIDES; do
                    [[ "$side" == grain && "$f" == gzip ]] && continue
                    run_side "$side" "$w" "$f" "$c" "$r" "$glob"
                done
            done
        done
    done
done
log "uptime after: $(uptime)"

"$VPY" benches/compare/report_python.py "$RESULTS" "$DATA/meta.json"
log "raw results: $RESULTS"
