#!/usr/bin/env bash
# What `--shard i/n` costs a host: records/s of host 0 of 2 beside one host running the same
# pipeline (the lm reference pipeline of compare-tfdata.sh), alternating single, sharded,
# sharded with twice the epochs, single... on 2 cores and pinned to one (`taskset -c 0`).
# Prints each round, the medians and sharded / single (the goal: >= 0.90), and checks that
# every round of a setting gave the same batches (the digest of `infeed bench`).
# Two ratios: at the same epochs (4) host 0 of 2 reads half the records, so its fixed
# costs (start: the schedule's length sample, the shuffle buffer's fill; the end) weigh
# twice as much in a run of a fraction of a second; with twice the epochs (8) it handles
# as many records as the single host: the steady state a long training job sees.
#
#   bash scripts/shard-cost.sh                              # bench-data/scale-1/lm/*.tfrecord
#   bash scripts/shard-cost.sh '/tmp/benchdata/lm/*.tfrecord' 5
# Arguments: the shards (a glob, quoted; default: compare-tfdata.sh's lm shards), rounds
# (default 3). Environment: INFEED (a built binary; default: builds target/release/infeed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SHARDS="${1:-${BENCH_DATA:-bench-data}/scale-1/lm/*.tfrecord}"
ROUNDS="${2:-3}"
if [[ -z "${INFEED:-}" ]]; then
    cargo build --quiet --release --bin infeed
    INFEED=target/release/infeed
fi
ARGS=(--spec input_ids:var_len:int64,attention_mask:var_len:int64 --pad-to-multiple-of 64
      --max-length 512 --cast int32 --batch 256 --shuffle 10000 --shuffle-files --interleave 4
      --seed 1 --mmap --threads 2)

for cores in 2 1; do
    pin=()
    [[ $cores == 1 ]] && pin=(taskset -c 0)
    : >"${TMPDIR:-/tmp}/shard-cost.$$"
    for round in $(seq "$ROUNDS"); do
        for shard in single 0/2 0/2x2; do
            case $shard in
                single) extra=(--epochs 4) ;;
                0/2) extra=(--epochs 4 --shard 0/2) ;;
                0/2x2) extra=(--epochs 8 --shard 0/2) ;;
            esac
            out="$("${pin[@]}" "$INFEED" bench "$SHARDS" "${ARGS[@]}" "${extra[@]}" 2>&1)"
            rps="$(awk '/records\/s/ {gsub(",", "", $2); print $2}' <<<"$out")"
            digest="$(awk '/digest/ {print $2}' <<<"$out")"
            echo "$shard $rps $digest" >>"${TMPDIR:-/tmp}/shard-cost.$$"
            echo "cores $cores round $round $shard: $rps records/s, digest $digest"
        done
    done
    python3 - "${TMPDIR:-/tmp}/shard-cost.$$" "$cores" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    setting, rps, digest = line.split()
    runs.setdefault(setting, []).append((float(rps), digest))
for setting, got in runs.items():
    if len({d for _, d in got}) != 1:
        sys.exit(f"shard-cost: the {setting} runs gave different batches: {got}")
single = statistics.median(r for r, _ in runs["single"])
sharded = statistics.median(r for r, _ in runs["0/2"])
same_records = statistics.median(r for r, _ in runs["0/2x2"])
print(f"cores {sys.argv[2]}: single {single:,.0f} records/s; host 0 of 2, same epochs "
      f"{sharded:,.0f} ({sharded / single:.2f} of single), same records {same_records:,.0f} "
      f"({same_records / single:.2f} of single) (medians of {len(runs['single'])})")
PY
    rm -f "${TMPDIR:-/tmp}/shard-cost.$$"
done
