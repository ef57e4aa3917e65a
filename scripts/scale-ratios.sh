#!/usr/bin/env bash
# The ratios of issue 55's speed goals that are not against a floor (scripts/floor.sh has those),
# each side measured in the same round, on the lm reference shards (4 × ~100 MB, written by
# TensorFlow; benches/compare/gen_data.py, as scripts/floor.sh writes them):
#   bash scripts/scale-ratios.sh               # 3 rounds
#   bash scripts/scale-ratios.sh --rounds N
# Each round, on both cores, default flags otherwise (`infeed bench --json --no-digest`):
#   plain, `--shuffle 10000 --seed 1`, `--global-shuffle --seed 1` (indexes built in memory) and a
#   2-source mixture of the shards two and two, 2 epochs, batch 256;
#   `testdata/lm-sample.tfrecord` (256 records) × 2 000 epochs beside one epoch of the shards,
#   batch 32;
#   the GZIP shards (no index) through the pipeline beside `taskset -c 0 infeed count` of the same
#   shards (inflate, framing, CRCs on one core; twice that is the 2-core inflate reader), for the
#   four shards (1 epoch) and one shard (3 epochs).
# With SERIAL_SHARE=path/to/serial_share.py (the busiest thread that is not a worker, as a share of
# the run's CPU), it also measures that for the plain lm and img pipelines, 6 epochs.
# Prints one line per run: name, thousands of records/s, CPU seconds, peak RSS MiB; then the
# ratios of each round.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ROUNDS=3
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) ROUNDS="$2"; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "scale-ratios.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
DATA="${BENCH_DATA:-bench-data}/scale-1"
for w in lm lm-gzip; do
    compgen -G "$DATA/$w/*.tfrecord*" >/dev/null || {
        echo "scale-ratios.sh: no shards in $DATA/$w: run scripts/floor.sh or" \
            "scripts/compare-tfdata.sh once to write them" >&2
        exit 2
    }
done
cargo build --quiet --release --bin infeed
INFEED=target/release/infeed
LM="$DATA/lm/*.tfrecord"
GZ="$DATA/lm-gzip/*.tfrecord.gz"
GZ1="$(compgen -G "$GZ" | head -1)"
SPEC="--spec input_ids:var_len:int64,attention_mask:var_len:int64 --pad-to-multiple-of 64"
SPEC+=" --max-length 512 --cast int32 --json --no-digest"
FULL="$SPEC --batch 256 --drop-remainder"
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT

# bench NAME ARGS...: one run, its line; the records/s (thousands) kept in R[NAME].
declare -A R
bench() {
    local name="$1"; shift
    "$INFEED" bench "$@" 2>/dev/null > "$OUT"
    local line
    line="$(python3 -c "import json; d=json.loads(open('$OUT').read().splitlines()[-1]);
print(round(d['records_per_sec']/1e3), round(d['cpu_seconds'], 2), d['peak_rss_bytes'] >> 20)")"
    R[$name]="${line%% *}"
    echo "$name $line"
}
# count NAME FILES: `infeed count` pinned, its thousands of records/s in R[NAME].
count() {
    local name="$1" start end records
    start="$(date +%s.%N)"
    records="$(taskset -c 0 "$INFEED" count "$2" | awk '/^total/ {print $2}')"
    end="$(date +%s.%N)"
    R[$name]="$(python3 -c "print(round($records / ($end - $start) / 1e3))")"
    echo "$name ${R[$name]}"
}
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }

for round in $(seq "$ROUNDS"); do
    echo "== round $round"
    bench plain "$LM" $FULL --epochs 2
    bench shuffle "$LM" $FULL --epochs 2 --shuffle 10000 --seed 1
    bench global "$LM" $FULL --epochs 2 --global-shuffle --seed 1
    bench mixture $FULL --epochs 2 --mix "a:1:$DATA/lm/*-0000[01]-*.tfrecord" \
        --mix "b:1:$DATA/lm/*-0000[23]-*.tfrecord"
    bench small testdata/lm-sample.tfrecord $SPEC --batch 32 --epochs 2000
    bench large "$LM" $SPEC --batch 32 --epochs 1
    count count4 "$GZ"
    bench gzip4 "$GZ" $FULL --epochs 1
    count count1 "$GZ1"
    bench gzip1 "$GZ1" $FULL --epochs 3
    echo "ratios: shuffle $(ratio "${R[shuffle]}" "${R[plain]}")," \
        "global $(ratio "${R[global]}" "${R[plain]}")," \
        "mixture $(ratio "${R[mixture]}" "${R[plain]}") of plain;" \
        "small $(ratio "${R[small]}" "${R[large]}") of large;" \
        "GZIP four $(ratio "${R[gzip4]}" "(2 * ${R[count4]})")," \
        "one $(ratio "${R[gzip1]}" "(2 * ${R[count1]})") of two inflate readers"
done
if [[ -n "${SERIAL_SHARE:-}" ]]; then
    IMG="$DATA/img/*.tfrecord"
    IMGF="--spec image:fixed_len[]:bytes,label:fixed_len[]:int64 --decode-raw image:32x32x3"
    IMGF+=" --batch 256 --drop-remainder --json --no-digest"
    for w in lm img; do
        if [[ $w == lm ]]; then set -- "$LM" $FULL; else set -- "$IMG" $IMGF; fi
        compgen -G "${1}" >/dev/null || continue
        python3 "$SERIAL_SHARE" -- "$INFEED" bench "$@" --epochs 6 2>/dev/null | tail -1 |
            python3 -c "import json, sys; d = json.loads(sys.stdin.read());
print('serial share $w', d['serial_share'], d['serial_thread'])"
    done
fi
