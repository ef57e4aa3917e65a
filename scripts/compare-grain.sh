#!/usr/bin/env bash
# Random access and the Grain faces beside ArrayRecord, Grain and tf.data, in one run:
#   bash scripts/compare-grain.sh            # the lm reference data at scale 1 (first 2 shards)
#   bash scripts/compare-grain.sh --quick    # lm at scale 0.05, 1 round: a smoke test
# Options: --scale S, --rounds N (default 3).
#
# Sets up .venv (tensorflow-cpu, grain, array-record and maturin at their pins, as
# compare-python.sh does), builds the infeed package in release into it, writes the lm data
# (benches/compare/gen_data.py) and an MNIST-sized TFRecord (benches/compare/tfdata_mnist.py,
# TensorFlow's writer), then runs, on 2 cores and pinned to one (`taskset -c 0`):
#   python/benches/grain_source.py  random reads (one at a time, __getitems__ of 256) on
#       infeed.grain.TFRecordSource and ArrayRecordDataSource (the same records, group_size:1),
#       Grain's MapDataset.source(X).shuffle(seed=1).batch(256) over each and over a list,
#       infeed.grain.IterDataset against the pipeline's own iterator, and grain#1164's MNIST
#       case (batch 128) through infeed and ArrayRecord;
#   benches/compare/tfdata_mnist.py  the MNIST case on tf.data.
# docs/random-access.md has the table this prints.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
# shellcheck source=scripts/tf-venv.sh
source scripts/tf-venv.sh

PINS=(tensorflow-cpu==2.21.0 grain==0.2.18 array-record==0.8.6 maturin==1.16.0)
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
SCALE=1
ROUNDS=3
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) SCALE=0.05 ROUNDS=1 ;;
        --scale) SCALE="$2"; shift ;;
        --rounds) ROUNDS="$2"; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "compare-grain.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
DATA="${BENCH_DATA:-bench-data}/scale-$SCALE"
SCRATCH="$DATA/grain-bench"
log() { echo "compare-grain.sh: $*" >&2; }

# 1. The venv and the package, in release.
ensure_venv_pins compare-grain.sh "${PINS[@]}"
(cd python && VIRTUAL_ENV="$ROOT/$VENV" CARGO_TARGET_DIR="$ROOT/target" \
    "$ROOT/$VENV/bin/maturin" develop --release --quiet)

# 2. The data.
"$VPY" benches/compare/gen_data.py "$DATA" --scale "$SCALE" --workloads lm
mkdir -p "$SCRATCH"
"$VPY" benches/compare/tfdata_mnist.py "$SCRATCH/mnist.tfrecord" --rounds 1 >/dev/null

# 3. The runs, 2 cores then one.
for pin in "" "taskset -c 0"; do
    cores=2; [[ -n "$pin" ]] && cores=1
    log "== $cores core(s)"
    $pin "$VPY" python/benches/grain_source.py --glob "$DATA/lm/*.tfrecord" --shards 2 \
        --scratch "$SCRATCH" --rounds "$ROUNDS" --mnist "$SCRATCH/mnist.tfrecord" \
        --json "$SCRATCH/results-$cores.jsonl"
    $pin "$VPY" benches/compare/tfdata_mnist.py "$SCRATCH/mnist.tfrecord" --rounds "$ROUNDS"
done
