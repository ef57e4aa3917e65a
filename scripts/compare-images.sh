#!/usr/bin/env bash
# An ImageNet-style JPEG workload, infeed beside tf.data and beside libjpeg-turbo alone, same files, same run:
#   bash scripts/compare-images.sh            # 4 000 pictures (~400x300, q90) in 4 shards, 3 rounds
#   bash scripts/compare-images.sh --quick    # 400 pictures, 1 round: a smoke test of the script
# Options: --scale S (pictures as a fraction of 4 000), --rounds N (default 3), --epochs N (default 2),
#          --results FILE.
# Environment: PIPELINES (default "train eval"), CORES (default "2 1"), BENCH_DATA (default
#              bench-data/, git-ignored), PYTHON (for the venv).
#
# Writes the pictures with TensorFlow (benches/compare/gen_data.py --workloads jpeg: tf.train.Examples
# of image/encoded + image/class/label, as ImageNet's TFRecords; reused when already there), builds
# `infeed` and examples/jpeg_floor with the images feature, then on 2 cores and on `taskset -c 0`,
# round after round, runs for each pipeline tf.data (benches/compare/tfdata_bench.py jpeg STAGE:
# the Flax ImageNet example's input pipeline) then `infeed bench` with the same meaning:
#   train: shuffle 2 500 → random resized crop (area 0.08-1, aspect 3/4-4/3) to 224x224 → random
#          flip → normalize with ImageNet's mean and std to float32 → batch 128, drop remainder
#   eval:  the central 224/256 of the shorter side (infeed: shorter side resized to 256, center
#          224x224) → normalize → batch 128, drop remainder
# both over EPOCHS epochs of the shards, interleaving the 4 files; then the floor: examples/jpeg_floor
# decoding every picture whole, nothing else, with libjpeg-turbo (TensorFlow's settings), one thread per
# core on the same cores. benches/compare/report_images.py prints medians over the rounds and the
# median of each round's ratio, and exits 1 if the sides disagree on images emitted or batch shapes.
# Every run is kept as a JSON line in the results file.
# Needs: a Rust toolchain, cmake and nasm (scripts/build-deps.sh), python3 with tensorflow-cpu 2.21
# (made as scripts/compare-tfdata.sh makes it), taskset (util-linux). ~200 MB of disk at scale 1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

# shellcheck source=scripts/tf-venv.sh
source scripts/tf-venv.sh
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
SCALE=1
ROUNDS=3
EPOCHS=2
RESULTS=""
PIPELINES="${PIPELINES:-train eval}"
CORES="${CORES:-2 1}"
SEED=1
# ImageNet's mean and standard deviation of each channel, in pixel values (the Flax example's
# MEAN_RGB and STDDEV_RGB).
MEAN="123.675,116.28,103.53"
STD="58.395,57.12,57.375"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) SCALE=0.1 ROUNDS=1 ;;
        --scale) SCALE="$2"; shift ;;
        --rounds) ROUNDS="$2"; shift ;;
        --epochs) EPOCHS="$2"; shift ;;
        --results) RESULTS="$2"; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "compare-images.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
DATA="${BENCH_DATA:-bench-data}/scale-$SCALE"
RESULTS="${RESULTS:-$DATA/images-$(date +%Y%m%d-%H%M%S).jsonl}"
GLOB="$DATA/jpeg/*.tfrecord"
log() { echo "compare-images.sh: $*" >&2; }

# 1. tensorflow-cpu in .venv (scripts/tf-venv.sh).
ensure_tf_venv compare-images.sh

# 2. infeed and the floor, with the images feature.
cargo build --release --quiet --features images --bin infeed --example jpeg_floor
INFEED="$ROOT/target/release/infeed"
FLOOR="$ROOT/target/release/examples/jpeg_floor"

# 3. The pictures (skipped when already there).
"$VPY" benches/compare/gen_data.py "$DATA" --scale "$SCALE" --workloads jpeg
mkdir -p "$(dirname "$RESULTS")"
: >"$RESULTS"

infeed_flags() { # pipeline
    local mode
    case "$1" in
        train) mode="train+flip" ;;
        eval) mode="eval=256" ;;
    esac
    # --mmap: the benchmark's shards are not rewritten while read.
    echo --json --no-digest --mmap --interleave 4 --batch 128 --drop-remainder --seed "$SEED" \
        --epochs "$EPOCHS" --spec "image/encoded:image[224,224,3]:$mode,image/class/label:fixed_len[]:int64" \
        --normalize "image/encoded:$MEAN:$STD"
    [[ "$1" == train ]] && echo --shuffle 2500
    return 0
}

pin_of() { if [[ "$1" == 1 ]]; then echo 0; else echo "0-$(($1 - 1))"; fi; }

record() { # pipeline cores side round json
    local load
    read -r load _ </proc/loadavg
    printf '{"pipeline":"%s","cores":%s,"side":"%s","round":%s,"result":%s,"load":%s}\n' \
        "$@" "$load" >>"$RESULTS"
}

run_side() { # side pipeline cores round
    local side="$1" p="$2" c="$3" r="$4" out rate
    # shellcheck disable=SC2086 # the glob must expand: every run starts from a warm page cache
    cat $GLOB >/dev/null
    case "$side" in
        tf.data) out="$(taskset -c "$(pin_of "$c")" "$VPY" benches/compare/tfdata_bench.py \
            jpeg "$p" "$GLOB" --epochs "$EPOCHS" --seed "$SEED" 2>/dev/null | tail -n 1)" ;;
        infeed) # shellcheck disable=SC2046 # the flags are words
            out="$(taskset -c "$(pin_of "$c")" "$INFEED" bench "$GLOB" $(infeed_flags "$p"))" ;;
        floor) out="$(taskset -c "$(pin_of "$c")" "$FLOOR" "$GLOB" "$c" 1)" ;;
    esac
    [[ "$out" == "{"* ]] || { log "$side $p $c core(s) printed no result"; exit 1; }
    record "$p" "$c" "$side" "$r" "$out"
    rate="$(sed -E 's/.*"(records_per_sec|images_per_sec)": ?([0-9]+).*/\2/' <<<"$out")"
    log "$(printf '%-8s %-5s %s core(s) round %s: %s images/s' "$side" "$p" "$c" "$r" "$rate")"
}

# 4. Side by side: per round, each pipeline's tf.data then infeed, then the floor.
log "uptime before: $(uptime)"
for c in $CORES; do
    for ((r = 1; r <= ROUNDS; r++)); do
        for p in $PIPELINES; do
            run_side tf.data "$p" "$c" "$r"
            run_side infeed "$p" "$c" "$r"
        done
        run_side floor decode "$c" "$r"
    done
done
log "uptime after: $(uptime)"

# 5. The table, and the check that both sides did the same work.
"$VPY" benches/compare/report_images.py "$RESULTS"
log "raw results: $RESULTS"
