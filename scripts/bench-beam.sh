#!/usr/bin/env bash
# Records/s of the Beam writer beside `infeed convert` (docs/performance.md, "Beam"):
# benches/beam_write.py in a venv of its own, .venv-bench-beam, with apache-beam and
# tensorflow-cpu pinned (they co-install: protobuf 6.x, numpy 2.x; google-crc32c is the
# CRC WriteToTFRecord uses, as apache-beam[gcp] brings it), the release build
# of the `infeed` binary and the release wheel of the package.
#   bash scripts/bench-beam.sh                       # 1 GB of JSONL, 3 rounds
#   bash scripts/bench-beam.sh --mb 200 --rounds 1   # any flags of beam_write.py
# Needs: a Rust toolchain, python3 (3.10 to 3.13; PYTHON picks another), cmake and nasm
# (installed from apt when missing, scripts/build-deps.sh). CARGO_TARGET_DIR is honoured
# (default: target/). The input (the --mb MB of JSONL), the shards and Beam's temporary
# files live under one folder in $TMPDIR (/tmp by default; the figures in the docs used
# TMPDIR=/dev/shm), removed at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/build-deps.sh

VENV=.venv-bench-beam
PINS=(apache-beam==2.77.0 tensorflow-cpu==2.21.0 google-crc32c==1.9.0 maturin==1.16.0)
[[ -x "$VENV/bin/python" ]] || "${PYTHON:-python3}" -m venv "$VENV"
if [[ "$(cat "$VENV/.pins" 2>/dev/null)" != "${PINS[*]}" ]]; then
    echo "bench-beam.sh: installing ${PINS[*]} into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}"
    echo "${PINS[*]}" >"$VENV/.pins"
fi

CARGO_TARGET_DIR=$(realpath -m "${CARGO_TARGET_DIR:-target}")
export CARGO_TARGET_DIR
cargo build --release --quiet --bin infeed

# Everything temporary under one folder, removed at the end: the wheel, the input and
# shards (beam_write.py), and the beam-temp-* and tmp* folders Beam leaves behind.
SCRATCH=$(mktemp -d)
export TMPDIR="$SCRATCH"
WHEELS="$SCRATCH/wheels"
mkdir "$WHEELS"
child=""
cleanup() {
    # beam_write.py runs in a process group of its own (setsid): its Beam workers go with it.
    if [[ -n "$child" ]] && kill -0 "$child" 2>/dev/null; then
        kill -TERM -- "-$child" 2>/dev/null || true
        wait "$child" 2>/dev/null || true
    fi
    rm -rf "$SCRATCH"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The wheel as users get it: `maturin build --release` with the features of
# python/pyproject.toml (beam, tokenize).
"$VENV/bin/maturin" build --release --quiet -m python/Cargo.toml --out "$WHEELS" \
    --interpreter "$VENV/bin/python"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --force-reinstall "$WHEELS"/infeed-*.whl

args=("$@")
[[ " ${args[*]} " == *" --mb "* ]] || args+=(--mb 1000)
[[ " ${args[*]} " == *" --rounds "* ]] || args+=(--rounds 3)
# From outside the source tree, so that `import infeed` is the installed wheel.
here=$(pwd)
(cd "$WHEELS" && exec setsid "$here/$VENV/bin/python" "$here/benches/beam_write.py" \
    --cli "$CARGO_TARGET_DIR/release/infeed" "${args[@]}") &
child=$!
wait "$child"
