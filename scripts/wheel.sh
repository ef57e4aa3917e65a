#!/usr/bin/env bash
# Builds the release abi3 wheel of the Python package (WHEEL_PROFILE: another cargo
# profile) and installs it the way Python users install: into a fresh venv, with no Rust
# toolchain on PATH,
# then runs a smoke test (python/tests/wheel_smoke.py: a pipeline over
# testdata/, shapes, a batch, state, restore).
#   bash scripts/wheel.sh
# Needs: what scripts/test.sh set up (.venv-python with the pinned maturin and
# numpy); cmake and nasm for libjpeg-turbo (installed from apt when missing, by
# scripts/build-deps.sh). Prints the wheel's name (its platform tag) and size.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/build-deps.sh

PYVENV=.venv-python
OUT=target/wheels
rm -rf "$OUT"
# The root target/ holds the release build's dependencies once any release
# build ran; the extension itself is built here.
# WHEEL_PROFILE=dev (CI) builds the same wheel unoptimised, from the artifacts the tests' `maturin
# develop` left in target/: the smoke test checks packaging, not speed, and a release build of
# the extension costs CI six minutes.
CARGO_TARGET_DIR="$(pwd)/target" "$PYVENV/bin/maturin" build --profile "${WHEEL_PROFILE:-release}" \
    --quiet -m python/Cargo.toml --out "$OUT" --interpreter "$PYVENV/bin/python"
wheel=$(ls "$OUT"/infeed-*.whl)
echo "wheel.sh: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"

# A fresh venv: the wheel, and numpy at the version .venv-python pins.
FRESH=$(mktemp -d)
trap 'rm -rf "$FRESH"' EXIT
"${PYTHON:-python3}" -m venv "$FRESH/venv"
"$FRESH/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "$wheel" "numpy==$("$PYVENV/bin/python" -c 'import numpy; print(numpy.__version__)')"

# No cargo, rustc or maturin on PATH: only the venv and the system's tools.
env -i HOME="$FRESH" PATH="$FRESH/venv/bin:/usr/bin:/bin" \
    "$FRESH/venv/bin/python" python/tests/wheel_smoke.py "$(pwd)/testdata"
