#!/usr/bin/env bash
# A two-node Ray cluster on this machine, on 127.0.0.1 only, for infeed.ray's tests
# (python/tests/test_ray.py, test_ray_data.py):
#   bash scripts/ray-cluster.sh start        # a head (1 CPU: the trainer's) and a second node (4 logical CPUs
#                                            # and the custom resource infeed_streams: 4, where
#                                            # the tests place their actors), each `ray start --block`
#                                            # as a process of its own; waits until both joined
#   eval "$(bash scripts/ray-cluster.sh env)"  # INFEED_RAY_ADDRESS, which the tests read
#   bash scripts/ray-cluster.sh stop         # SIGTERM to the PIDs `start` wrote (each `ray start
#                                            # --block` stops its node's processes), then waits
# Ray comes from .venv-python (python/requirements-test.txt pins it), or RAY_VENV. Port: INFEED_RAY_PORT
# (default 29600, below Linux's ephemeral range, as scripts/emulators.sh's are).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
RUN="$ROOT/.ray-cluster"
# The venv whose Ray (and infeed) the nodes run: RAY_VENV, default .venv-python.
VENV="${RAY_VENV:-$ROOT/.venv-python}"
RAY="$VENV/bin/ray"
PY="$VENV/bin/python"
PORT="${INFEED_RAY_PORT:-29600}"
ADDRESS="127.0.0.1:$PORT"

log() { echo "ray-cluster.sh: $*" >&2; }

# node NAME ARGS...: one `ray start --block` in the background, its PID in $RUN/NAME.pid.
node() {
    local name="$1"; shift
    setsid "$RAY" start --block --node-ip-address=127.0.0.1 --disable-usage-stats \
        --object-store-memory=1000000000 "$@" >"$RUN/$name.log" 2>&1 </dev/null &
    echo $! >"$RUN/$name.pid"
}

# nodes_up N: waits (60 s at most) until the cluster has N live nodes, while our head runs (a
# head that could not bind the port leaves it to another cluster, which must not pass for ours).
nodes_up() {
    "$PY" - "$ADDRESS" "$1" "$(cat "$RUN/head.pid")" <<'PY'
import os, sys, time
import ray
address, want, head = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for _ in range(60):
    try:
        os.kill(head, 0)
    except OSError:
        sys.exit(f"ray-cluster.sh: the head exited (is port {address} taken?): see its log")
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        alive = sum(1 for n in ray.nodes() if n["Alive"])
        ray.shutdown()
        if alive >= want:
            sys.exit(0)
    except Exception:
        pass
    time.sleep(1)
sys.exit(f"ray-cluster.sh: {want} nodes did not join at {address} in 60 s")
PY
}

cmd_start() {
    [[ -x "$RAY" ]] || { log "no $RAY: scripts/test.sh installs Ray into .venv-python"; exit 2; }
    if [[ -f "$RUN/head.pid" ]] && kill -0 "$(cat "$RUN/head.pid")" 2>/dev/null; then
        log "already running (stop it first)"; exit 2
    fi
    rm -rf "$RUN"
    mkdir -p "$RUN"
    # Ray's sockets live in its temporary folder, and a Unix socket's path may not pass 107
    # bytes: a short folder in /tmp, not one under the checkout.
    mktemp -d /tmp/infeed-ray.XXXXXX >"$RUN/tmpdir"
    node head --head --port="$PORT" --num-cpus=1 --include-dashboard=false \
        --temp-dir="$(cat "$RUN/tmpdir")"
    nodes_up 1 || { cmd_stop; exit 1; }
    node streams --address="$ADDRESS" --num-cpus=4 --resources='{"infeed_streams": 4}'
    nodes_up 2 || { cmd_stop; exit 1; }
    log "up at $ADDRESS (head, and a node with infeed_streams: 4)"
}

cmd_stop() {
    local pid
    for name in streams head; do
        [[ -f "$RUN/$name.pid" ]] || continue
        pid="$(cat "$RUN/$name.pid")"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -KILL "$pid" 2>/dev/null || true
        rm -f "$RUN/$name.pid"
    done
    [[ -f "$RUN/tmpdir" ]] && rm -rf "$(cat "$RUN/tmpdir")" "$RUN/tmpdir"
    return 0
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    env) echo "export INFEED_RAY_ADDRESS=$ADDRESS" ;;
    *) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 2 ;;
esac
