#!/usr/bin/env bash
# One prepared run of infeed on an accelerator: everything docs/xla.md reports of a GPU, in one call.
#   bash scripts/device-check.sh                # on a machine with an NVIDIA GPU; without one, the CPU plugin
#   bash scripts/device-check.sh --quick        # short runs on debug builds (what CI runs, on the CPU plugin)
#   bash scripts/device-check.sh --prepare DIR  # here: release binaries, the wheel and the data into DIR,
#                                               # for a GPU machine with no Rust toolchain and no network
# Runs, each under a time limit, and writes their JSON into the report folder (DEVICE_CHECK_OUT, else
# $OUT when set, else target/device-check):
#   1. examples/train_lm (Rust) on the device through its PJRT plugin: steps/s, first and last loss,
#      compiles in the loop, input-wait fraction, uploads read in place and uploads from pinned memory;
#   2. examples/upload_bandwidth: batch uploads from pooled (DMA-mapped where the plugin offers it) and
#      from pageable memory, a copying upload, and four pooled uploads in flight, GB/s;
#   3. python/benches/h2d.py: infeed's batches put on the device by JAX beside plain numpy (pageable)
#      and JAX's pinned_host memory, the same bytes, GB/s;
#   4. python/examples/train_jax.py and train_tfds.py through infeed.jax: steps/s, input wait;
#   5. python/benches/beside_step.py: the lm and JPEG pipelines' records/s on 1, 2 and all cores
#      (cpu_affinity), alone and with a device step running beside them, and the step's speed kept;
#   6. python/benches/core_scaling.py: the lm pipeline alone on 1, 2, 4, ... cores, one file and
#      40 copies, plain and with worker reads (where more workers stop paying);
# then report.json (all of it) and a summary on stdout. Without a GPU every step runs on the CPU
# plugin (.pjrt/, scripts/fetch-pjrt.sh) and JAX's CPU backend, and the report says so. Exits 1 if a
# step failed (after writing the report).
# The GPU side: a python3 with jax and its CUDA plugin (jax-cuda12-plugin or -cuda13-plugin; with
# network and none there, a venv with the pin below), optax and numpy. Env: DEVICE_PYTHON (that python),
# INFEED_PREBUILT (a --prepare folder: used instead of building), PJRT_PLUGIN_PATH (a plugin to use),
# TFDS_PYTHON (a python with tensorflow-datasets; default scripts/test.sh's .venv).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

JAX_CUDA_PIN="jax[cuda12]==0.10.2"
OPTAX_PIN="optax==0.2.8"
QUICK=0
PREPARE=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --prepare) PREPARE="$2"; shift ;;
        *) echo "device-check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
FEATURES="xla,images"
PREBUILT="${INFEED_PREBUILT:-}"
# A python with tensorflow-datasets, to make the TFDS dataset train_tfds.py reads.
TFDS_PY="${TFDS_PYTHON:-$ROOT/.venv/bin/python}"

if [[ -n "$PREPARE" ]]; then
    # Release builds (stripped), the release wheel and, where tensorflow-datasets is at hand (.venv
    # of scripts/test.sh), the TFDS "shapes" dataset: what the GPU side then needs (~25 MB; the JPEG
    # shards are written there, by jpeg_shards).
    mkdir -p "$PREPARE/bin"
    rm -f "$PREPARE"/bin/*.xz # a folder prepared before: xz refuses to overwrite (and set -e stops)
    cargo build --release --quiet --features "$FEATURES,cli" --bin infeed \
        --example train_lm --example upload_bandwidth --example jpeg_shards
    for b in infeed examples/train_lm examples/upload_bandwidth examples/jpeg_shards; do
        strip -o "$PREPARE/bin/$(basename "$b")" "target/release/$b"
    done
    # Compressed: what travels to a device machine is counted (unpacked there into a temp folder).
    xz -T0 -f "$PREPARE"/bin/*
    rm -f "$PREPARE"/infeed-*.whl
    CARGO_TARGET_DIR="$ROOT/target" .venv-python/bin/maturin build --release --quiet \
        -m python/Cargo.toml --out "$PREPARE" --interpreter .venv-python/bin/python
    if "$TFDS_PY" -c 'import tensorflow_datasets' 2>/dev/null; then
        rm -rf "$PREPARE/tfds"
        "$TFDS_PY" python/examples/make_tfds_shapes.py "$PREPARE/tfds" >/dev/null
    fi
    du -sh "$PREPARE"
    exit 0
fi

REPORT="${DEVICE_CHECK_OUT:-${OUT:-$ROOT/target/device-check}}"
mkdir -p "$REPORT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2

MODE=cpu
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    MODE=gpu
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$REPORT/gpu.txt"
fi
echo "device-check.sh: mode $MODE (quick=$QUICK)"

# --- Python with jax (and its CUDA plugin on a GPU)
has_jax() { "$1" -c "import jax, optax; jax.devices('$2')" >/dev/null 2>&1; }
PY=""
platform=$([[ $MODE == gpu ]] && echo gpu || echo cpu)
for candidate in "${DEVICE_PYTHON:-}" "$ROOT/.venv-python/bin/python" python3; do
    if [[ -n "$candidate" ]] && command -v "$candidate" >/dev/null && has_jax "$candidate" "$platform"; then
        PY="$(command -v "$candidate")"
        break
    fi
done
if [[ -z "$PY" ]]; then
    echo "device-check.sh: no python with jax for $platform; installing $JAX_CUDA_PIN into .venv-device"
    python3 -m venv .venv-device
    pin=$([[ $MODE == gpu ]] && echo "$JAX_CUDA_PIN" || echo "jax==${JAX_CUDA_PIN#*==}")
    .venv-device/bin/python -m pip install --quiet --disable-pip-version-check "$pin" "$OPTAX_PIN" numpy
    PY="$ROOT/.venv-device/bin/python"
fi

# --- the infeed package for that python
if ! "$PY" -c 'import infeed' 2>/dev/null; then
    wheel=$(ls "${PREBUILT:-/nonexistent}"/infeed-*.whl 2>/dev/null | head -1 || true)
    if [[ -z "$wheel" ]]; then
        CARGO_TARGET_DIR="$ROOT/target" .venv-python/bin/maturin build --release --quiet \
            -m python/Cargo.toml --out "$WORK/wheel" --interpreter "$PY"
        wheel=$(ls "$WORK"/wheel/infeed-*.whl)
    fi
    "$PY" -m pip install --quiet --no-deps --no-index --target "$WORK/site" "$wheel"
    export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
fi

# --- the Rust programs
if [[ -n "$PREBUILT" && -f "$PREBUILT/bin/train_lm.xz" ]]; then
    BIN="$WORK/bin"
    mkdir -p "$BIN"
    for f in "$PREBUILT"/bin/*.xz; do
        xz -dc "$f" >"$BIN/$(basename "$f" .xz)"
        chmod +x "$BIN/$(basename "$f" .xz)"
    done
else
    # Quick: the debug build `cargo test --all-features` made already (same features, nothing new).
    profile=$([[ $QUICK == 1 ]] && echo dev || echo release)
    dir=$([[ $QUICK == 1 ]] && echo debug || echo release)
    features=$([[ $QUICK == 1 ]] && echo --all-features || echo "--features=$FEATURES,cli")
    cargo build --quiet --profile "$profile" "$features" --bin infeed \
        --example train_lm --example upload_bandwidth --example jpeg_shards
    BIN="$WORK/bin"
    mkdir -p "$BIN"
    for b in infeed examples/train_lm examples/upload_bandwidth examples/jpeg_shards; do
        ln -s "$ROOT/target/$dir/$b" "$BIN/$(basename "$b")"
    done
fi
INFEED="$BIN/infeed" TRAIN_LM="$BIN/train_lm" UPLOAD="$BIN/upload_bandwidth"

# --- the PJRT plugin
if [[ -z "${PJRT_PLUGIN_PATH:-}" ]]; then
    if [[ $MODE == gpu ]]; then
        PJRT_PLUGIN_PATH=$("$PY" - <<'PY'
import glob, importlib, os
for name in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
    try:
        mod = importlib.import_module(name)
    except ImportError:
        continue
    here = os.path.dirname(mod.__file__)
    found = glob.glob(os.path.join(here, "xla_cuda_plugin.so")) or glob.glob(os.path.join(here, "*.so"))
    if found:
        print(found[0])
        break
PY
)
    else
        bash scripts/fetch-pjrt.sh >/dev/null
        PJRT_PLUGIN_PATH="$ROOT/.pjrt/xla_cpu_pjrt.so"
    fi
fi
export PJRT_PLUGIN_PATH
echo "device-check.sh: python $PY, plugin ${PJRT_PLUGIN_PATH:-none}"

# --- the data
LM="$ROOT/testdata/lm-sample.tfrecord"
JPEG_DIR="$WORK/jpeg"
"$BIN/jpeg_shards" "$JPEG_DIR" --count "$([[ $QUICK == 1 ]] && echo 64 || echo 1000)" --shards 4 >/dev/null
TFDS=""
if [[ -n "$PREBUILT" && -d "$PREBUILT/tfds/shapes/1.0.0" ]]; then
    TFDS="$PREBUILT/tfds/shapes/1.0.0"
elif "$TFDS_PY" -c 'import tensorflow_datasets' 2>/dev/null; then
    TFDS=$("$TFDS_PY" python/examples/make_tfds_shapes.py "$WORK/tfds" | tail -1)
fi

# --- the runs
if [[ $QUICK == 1 ]]; then
    STEPS=40 MIB=8 ROUNDS=3 SECONDS_EACH=1
else
    STEPS=300 MIB=64 ROUNDS=15 SECONDS_EACH=4
fi
FAILED=()
rm -f "$REPORT"/*.json
run() { # name limit_s command...: its stdout's last line to name.json (unless it wrote that itself)
    local name="$1" limit="$2"
    shift 2
    echo "== $name"
    if timeout "$limit" "$@" >"$REPORT/$name.out" 2>"$REPORT/$name.log"; then
        [[ -s "$REPORT/$name.json" ]] || tail -1 "$REPORT/$name.out" >"$REPORT/$name.json"
    else
        echo "device-check.sh: $name failed (exit $?); the end of its output:" >&2
        tail -5 "$REPORT/$name.out" >&2
        tail -20 "$REPORT/$name.log" >&2
        FAILED+=("$name")
    fi
}
run train_lm 180 "$TRAIN_LM" --steps "$STEPS" "$LM"
run upload_bandwidth 120 "$UPLOAD" --mib "$MIB" --rounds "$ROUNDS"
run h2d 180 "$PY" python/benches/h2d.py --mib "$MIB" --rounds "$ROUNDS"
run train_jax 240 "$PY" python/examples/train_jax.py --steps "$STEPS" --json "$REPORT/train_jax.json"
if [[ -n "$TFDS" ]]; then
    run train_tfds 240 "$PY" python/examples/train_tfds.py "$TFDS" --steps "$STEPS" \
        --json "$REPORT/train_tfds.json"
else
    echo '{"skipped": "no TFDS dataset: give INFEED_PREBUILT from --prepare, or a .venv with tensorflow-datasets"}' \
        >"$REPORT/train_tfds.json"
fi
run beside_step 300 "$PY" python/benches/beside_step.py --infeed "$INFEED" --lm "$LM" \
    --jpeg "$JPEG_DIR/*.tfrecord" --seconds "$SECONDS_EACH"
run core_scaling 240 "$PY" python/benches/core_scaling.py --infeed "$INFEED" --lm "$LM" \
    --seconds "$((SECONDS_EACH > 1 ? 3 : 1))" --copies "$([[ $QUICK == 1 ]] && echo 4 || echo 40)"

"$PY" scripts/device-report.py "$REPORT" "$MODE" "$QUICK" "${FAILED[*]:-}"
[[ ${#FAILED[@]} -eq 0 ]]
