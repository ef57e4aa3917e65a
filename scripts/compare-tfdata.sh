#!/usr/bin/env bash
# infeed beside tf.data on the same files, in the same run:
#   bash scripts/compare-tfdata.sh            # the workloads lm and img (4 shards of ~100 MB)
#                                             # and ctr (64 shards of ~6 MB, ~250-byte records)
#   bash scripts/compare-tfdata.sh --quick    # 4 shards of ~5 MB, 1 round: a smoke test of the script
# Options: --scale S (shard size as a fraction of 100 MB), --rounds N (default 2),
#          --no-gcs (skip the fake-gcs-server runs), --results FILE.
# Environment: WORKLOADS (default "lm img ctr"), STAGES (default "raw parse full"),
#              BENCH_DATA (default bench-data/, git-ignored), PYTHON (for the venv),
#              INFEED_GCS_PORT / INFEED_S3_PORT / INFEED_AZ_PORT (scripts/emulators.sh).
#
# Floors: after each infeed full run, examples/copy_bandwidth copies a buffer of that run's
# batch size (output bytes / batches), and one of 256 MiB (DRAM, past the caches), on the
# same cores (1 thread per core), and report.py
# prints infeed's records/s as a fraction of what that bandwidth allows for the bytes a
# record must read (serialized) and write (output tensors as emitted). Cloud: beside each
# infeed-gcs raw run, examples/range_read reads the same objects with plain parallel
# object_store get_range calls (16 in flight, 8 MiB each), so the emulator's own limit shows.
#
# Creates .venv with tensorflow-cpu (as scripts/test.sh does), builds infeed --release,
# writes the workloads with TensorFlow's TFRecordWriter (plain and GZIP, reused when already
# there), then for each workload × {plain, gzip} × {2 cores, `taskset -c 0`} × stage
# {raw: read + CRC, parse: read + parse, full: the reference pipeline} runs tf.data's
# fastest idiomatic pipeline (benches/compare/tfdata_bench.py) and `infeed bench` with the
# same meaning, alternating tf.data, infeed, tf.data, infeed... It then reads the lm shards
# from fake-gcs-server (infeed only; tf.data's GCS filesystem has no endpoint setting),
# prints a table (benches/compare/report.py: best round per side) and writes every run
# as a JSON line to the results file. Exits non-zero if the two sides disagree on records
# per epoch, records emitted or batch shapes.
# Needs: a Rust toolchain, python3 (3.10 to 3.13), bash 5, taskset (util-linux); for the GCS
# runs, what scripts/emulators.sh needs (node/npm 18+). ~1.6 GB of disk at the default scale.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

# shellcheck source=scripts/tf-venv.sh
source scripts/tf-venv.sh
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
SCALE=1
ROUNDS=2
GCS=1
RESULTS=""
WORKLOADS="${WORKLOADS:-lm img ctr}"
STAGES="${STAGES:-raw parse full}"
EPOCHS=2
SEED=1

while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) SCALE=0.05 ROUNDS=1 ;;
        --scale) SCALE="$2"; shift ;;
        --rounds) ROUNDS="$2"; shift ;;
        --no-gcs) GCS=0 ;;
        --results) RESULTS="$2"; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "compare-tfdata.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
DATA="${BENCH_DATA:-bench-data}/scale-$SCALE"
RESULTS="${RESULTS:-$DATA/results-$(date +%Y%m%d-%H%M%S).jsonl}"
log() { echo "compare-tfdata.sh: $*" >&2; }

# 1. tensorflow-cpu in .venv (scripts/tf-venv.sh).
ensure_tf_venv compare-tfdata.sh

# 2. infeed.
cargo build --release --quiet --bin infeed --example copy_bandwidth --example range_read
INFEED="$ROOT/target/release/infeed"
COPY_BW="$ROOT/target/release/examples/copy_bandwidth"
RANGE_READ="$ROOT/target/release/examples/range_read"

# 3. The workloads, written by TensorFlow (skipped when already there).
"$VPY" benches/compare/gen_data.py "$DATA" --scale "$SCALE"
mkdir -p "$(dirname "$RESULTS")"
: >"$RESULTS"

glob_of() { # workload files -> the shard glob
    if [[ "$2" == gzip ]]; then echo "$DATA/$1-gzip/*.tfrecord.gz"; else echo "$DATA/$1/*.tfrecord"; fi
}

# infeed bench flags with the meaning of tfdata_bench.py's pipelines.
infeed_flags() { # workload stage
    # --mmap: the benchmark's shards are not rewritten while read.
    local common=(--json --interleave 4 --batch 256 --seed "$SEED" --no-digest --mmap)
    # ctr: many small records, 16 shards interleaved, batches of 4096.
    [[ "$1" == ctr ]] && common=(--json --interleave 16 --batch 4096 --seed "$SEED" --no-digest --mmap)
    local lm_spec="input_ids:var_len:int64,attention_mask:var_len:int64"
    local img_spec="image:fixed_len[]:bytes,label:fixed_len[]:int64"
    local ctr_spec="label:fixed_len[]:int64,dense:fixed_len[16]:float,ids:fixed_len[16]:int64"
    case "$1/$2" in
        */raw) echo "${common[@]}" ;;
        lm/parse) echo "${common[@]} --spec $lm_spec" ;;
        img/parse) echo "${common[@]} --spec $img_spec" ;;
        ctr/parse) echo "${common[@]} --spec $ctr_spec" ;;
        lm/full) echo "${common[@]} --spec $lm_spec --shuffle-files --shuffle 10000 --epochs $EPOCHS" \
            "--drop-remainder --pad-to-multiple-of 64 --max-length 512 --truncation keep-start --cast int32 --masks none" ;;
        img/full) echo "${common[@]} --spec $img_spec --decode-raw image:32x32x3 --shuffle 10000" \
            "--epochs $EPOCHS --drop-remainder" ;;
        ctr/full) echo "${common[@]} --spec $ctr_spec --shuffle 10000 --epochs $EPOCHS --drop-remainder" ;;
    esac
}

pin_of() { if [[ "$1" == 1 ]]; then echo 0; else echo 0,1; fi; }

record() { # workload files cores stage side round json
    local load
    read -r load _ </proc/loadavg
    printf '{"workload":"%s","files":"%s","cores":%s,"stage":"%s","side":"%s","round":%s,"result":%s,"load":%s}\n' \
        "$@" "$load" >>"$RESULTS"
}

run_cat() { # workload files cores round glob
    local t0 t1 bytes
    # shellcheck disable=SC2086 # the glob must expand
    bytes=$(stat -c %s $5 | awk '{ s += $1 } END { print s }')
    t0=$EPOCHREALTIME
    # shellcheck disable=SC2086
    taskset -c "$(pin_of "$3")" cat $5 >/dev/null
    t1=$EPOCHREALTIME
    record "$1" "$2" "$3" raw cat "$4" "{\"bytes\":$bytes,\"seconds\":$(awk "BEGIN { print $t1 - $t0 }")}"
}

run_copy() { # workload files cores round infeed's-json: copy bandwidth for its batch size
    local size out
    size=$("$VPY" -c 'import json, sys; r = json.loads(sys.argv[1])
print(r["output_bytes"] // r["batches"] if r.get("output_bytes") and r["batches"] else "")' "$5")
    [[ -n "$size" && "$size" -gt 0 ]] || { log "$1/$2/$3: no output_bytes in infeed's result"; exit 1; }
    out="$(taskset -c "$(pin_of "$3")" "$COPY_BW" "$size" "$3")"
    record "$1" "$2" "$3" full copy "$4" "$out"
    # The same copy from and to DRAM (256 MiB buffers: far past the caches).
    out="$(taskset -c "$(pin_of "$3")" "$COPY_BW" $((256 << 20)) "$3")"
    record "$1" "$2" "$3" full copy-dram "$4" "$out"
}

# Every timed run starts from a warm page cache: this VM's kernel (DAMON reclaim) evicts
# file pages that sit unread for a while even with memory free, and whichever side ran
# first after that read its files from disk (tf.data, as it runs first in each pair:
# several of its cells were I/O-bound at ~40% CPU before this).
warm() { # glob (a gs:// one is the emulator's to serve)
    [[ "$1" == *://* ]] && return
    # shellcheck disable=SC2086 # the glob must expand
    cat $1 >/dev/null
}

run_side() { # side workload files cores stage round glob
    local side="$1" w="$2" f="$3" c="$4" s="$5" r="$6" glob="$7" out
    warm "$glob"
    case "$side" in
        tf.data) out="$(taskset -c "$(pin_of "$c")" "$VPY" benches/compare/tfdata_bench.py \
            "$w" "$s" "$glob" --epochs "$EPOCHS" --seed "$SEED" 2>/dev/null | tail -n 1)" ;;
        *) # shellcheck disable=SC2046 # the flags are words
            out="$(taskset -c "$(pin_of "$c")" "$INFEED" bench "$glob" $(infeed_flags "$w" "$s"))" ;;
    esac
    [[ "$out" == "{"* ]] || { log "$side $w/$f/$c cores/$s printed no result"; exit 1; }
    record "$w" "$f" "$c" "$s" "$side" "$r" "$out"
    if [[ "$side" == infeed && "$s" == full ]]; then run_copy "$w" "$f" "$c" "$r" "$out"; fi
    log "$(printf '%-10s %-3s %-5s %s core(s) %-5s round %s: %s records/s' "$side" "$w" "$f" "$c" "$s" "$r" \
        "$(sed -E 's/.*"records_per_sec": ?([0-9]+).*/\1/' <<<"$out")")"
}

# 4. Side by side, tf.data and infeed in turn.
log "uptime before: $(uptime)"
for w in $WORKLOADS; do
    for f in plain gzip; do
        glob="$(glob_of "$w" "$f")"
        for c in 2 1; do
            for s in $STAGES; do
                for ((r = 1; r <= ROUNDS; r++)); do
                    run_side tf.data "$w" "$f" "$c" "$s" "$r" "$glob"
                    run_side infeed "$w" "$f" "$c" "$s" "$r" "$glob"
                    # The page cache floor of the raw stage: the same files through cat.
                    if [[ "$s" == raw && "$f" == plain ]]; then run_cat "$w" "$f" "$c" "$r" "$glob"; fi
                done
            done
        done
    done
done

# 5. lm from the GCS emulator beside local disk (infeed only).
if [[ "$GCS" == 1 && " $WORKLOADS " == *" lm "* ]]; then
    bash scripts/emulators.sh install
    trap 'bash scripts/emulators.sh stop' EXIT
    bash scripts/emulators.sh start
    eval "$(bash scripts/emulators.sh env)"
    "$VPY" - "$INFEED_GCS_ENDPOINT" "$INFEED_TEST_BUCKET" "$DATA" <<'PY'
import glob, os, sys, urllib.parse, urllib.request
endpoint, bucket, data = sys.argv[1:]
for path in sorted(glob.glob(f"{data}/lm/*.tfrecord") + glob.glob(f"{data}/lm-gzip/*.tfrecord.gz")):
    name = urllib.parse.quote("compare/" + os.path.relpath(path, data), safe="")
    with open(path, "rb") as f:
        req = urllib.request.Request(f"{endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}",
                                     data=f.read(), method="POST",
                                     headers={"Content-Type": "application/octet-stream"})
    urllib.request.urlopen(req, timeout=600).read()
PY
    for f in plain gzip; do
        if [[ "$f" == gzip ]]; then remote="gs://$INFEED_TEST_BUCKET/compare/lm-gzip/*.tfrecord.gz"
        else remote="gs://$INFEED_TEST_BUCKET/compare/lm/*.tfrecord"; fi
        for c in 2 1; do
            for s in $STAGES; do
                [[ "$s" == parse ]] && continue
                for ((r = 1; r <= ROUNDS; r++)); do
                    run_side infeed-gcs lm "$f" "$c" "$s" "$r" "$remote"
                    run_side infeed-local lm "$f" "$c" "$s" "$r" "$(glob_of lm "$f")"
                    if [[ "$s" == raw ]]; then # the emulator alone, same objects
                        out="$(taskset -c "$(pin_of "$c")" "$RANGE_READ" "${remote%/\**}/")"
                        record lm "$f" "$c" raw client "$r" "$out"
                    fi
                done
            done
        done
    done
fi
log "uptime after: $(uptime)"

# 6. The table, and the check that both sides did the same work.
"$VPY" benches/compare/report.py "$RESULTS" "$DATA/meta.json"
log "raw results: $RESULTS"
