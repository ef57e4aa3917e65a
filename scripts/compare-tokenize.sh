#!/usr/bin/env bash
# Tokenization in the pipeline beside the reference libraries alone, Grain and the
# pretokenized pipeline, in one run:
#   bash scripts/compare-tokenize.sh            # 60 000 lines, 3 rounds
#   bash scripts/compare-tokenize.sh --quick    # 10 000 lines, 1 round: a smoke test
# Options: --lines N, --rounds N.
#
# Sets up .venv (tokenizers, sentencepiece, grain and maturin at their pins), builds the
# infeed package in release into it, then runs python/benches/tokenize_speed.py on 2 cores
# and pinned to one (`taskset -c 0`): per tokenizer of testdata/tokenizer/, tokens per
# second of the reference library alone, of parse → tokenize → pack(1024) → batch(64) in
# infeed, of the same pipeline over the ids written ahead of time, and of a Grain loop
# (MapDataset.map calling the library, packing in Python). docs/pipeline.md ("Tokenize")
# has the table this prints.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
# shellcheck source=scripts/tf-venv.sh
source scripts/tf-venv.sh

PINS=(tokenizers==0.23.3 sentencepiece==0.2.1 grain==0.2.18 maturin==1.16.0 numpy==2.4.6)
LINES=60000
ROUNDS=3
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) LINES=10000 ROUNDS=1 ;;
        --lines) LINES="$2"; shift ;;
        --rounds) ROUNDS="$2"; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "compare-tokenize.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
OUT="${BENCH_DATA:-bench-data}/tokenize"
mkdir -p "$OUT"

bash scripts/build-deps.sh
ensure_venv_pins compare-tokenize.sh "${PINS[@]}"
(cd python && VIRTUAL_ENV="$ROOT/$VENV" CARGO_TARGET_DIR="$ROOT/target" \
    "$ROOT/$VENV/bin/maturin" develop --release --quiet)

for pin in "" "taskset -c 0"; do
    cores=2; [[ -n "$pin" ]] && cores=1
    echo "compare-tokenize.sh: == $cores core(s)" >&2
    $pin "$VPY" python/benches/tokenize_speed.py --lines "$LINES" --rounds "$ROUNDS" \
        --json "$OUT/results-$cores.json"
done
