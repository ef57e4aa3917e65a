#!/usr/bin/env bash
# Sets up and runs every test of infeed, including the TensorFlow interop tests and the
# cloud-storage emulator tests:
#   bash scripts/test.sh
# Creates .venv (python3 -m venv) with tensorflow-cpu pinned below, unless it already has
# it; checks that testdata/ is exactly what testdata/make_testdata.py writes; installs and
# starts the storage emulators (scripts/emulators.sh: fake-gcs-server, moto, azurite, on
# 127.0.0.1; stopped by PID when this script exits); fetches the XLA CPU PJRT plugin
# (scripts/fetch-pjrt.sh, into .pjrt/) for the `xla` feature's tests; then runs
# `cargo test --all-features -- --include-ignored` with INFEED_PYTHON pointing at the venv
# and the emulators' environment, so the tests marked #[ignore = "needs TensorFlow..."] and
# #[ignore = "needs emulators..."] run too.
# Then the Python package (python/): builds it with maturin (dev profile, into the root
# target/ so it shares compiled dependencies) into .venv-python with the pins of
# python/requirements-test.txt, runs `ruff check python benches`, mypy (the package with its
# stub of the extension, its tests, examples and benches) and pytest (python/tests).
# Needs: a Rust toolchain, python3 (3.10 to 3.13) and node/npm (18+); cmake and nasm (for
# libjpeg-turbo) are installed from apt when missing (scripts/build-deps.sh). Set PYTHON to
# pick another python3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TF_PIN="tensorflow-cpu==2.21.0"
VENV=.venv
VPY="$VENV/bin/python"

has_tf() {
    "$VPY" - "${TF_PIN#*==}" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(0 if m.version("tensorflow-cpu") == sys.argv[1] else 1)
PY
}

if [[ -x "$VPY" ]] && has_tf; then
    echo "test.sh: $VENV already has $TF_PIN"
else
    echo "test.sh: setting up $VENV with $TF_PIN"
    [[ -x "$VPY" ]] || "${PYTHON:-python3}" -m venv "$VENV"
    "$VPY" -m pip install --quiet --disable-pip-version-check "$TF_PIN"
    has_tf || { echo "test.sh: $TF_PIN did not install into $VENV" >&2; exit 1; }
fi
INFEED_PYTHON="$(pwd)/$VPY"
export INFEED_PYTHON

bash scripts/build-deps.sh

"$INFEED_PYTHON" testdata/make_testdata.py --check

bash scripts/emulators.sh install
trap 'bash scripts/emulators.sh stop' EXIT
bash scripts/emulators.sh start
eval "$(bash scripts/emulators.sh env)"

# The XLA CPU PJRT plugin for the `xla` feature's tests (pinned, checksum-verified,
# into .pjrt/); those tests fail without it. PJRT_PLUGIN_PATH, when set, is used instead.
[[ -n "${PJRT_PLUGIN_PATH:-}" ]] || bash scripts/fetch-pjrt.sh

cargo test --all-features -- --include-ignored

# The Python package: built into its own venv (jax and TensorFlow pin different numpy
# and protobuf versions), dev profile (a release build doubles the compile time; the
# tests read small files), tested with pytest.
PYVENV=.venv-python
PYREQ=python/requirements-test.txt
[[ -x "$PYVENV/bin/python" ]] || "${PYTHON:-python3}" -m venv "$PYVENV"
if ! cmp -s "$PYREQ" "$PYVENV/.requirements-test.txt"; then
    echo "test.sh: installing $PYREQ into $PYVENV"
    "$PYVENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$PYREQ"
    cp "$PYREQ" "$PYVENV/.requirements-test.txt"
fi
"$PYVENV/bin/ruff" check python benches
"$PYVENV/bin/mypy" --config-file python/pyproject.toml \
    python/infeed python/tests python/examples python/benches
(
    cd python
    VIRTUAL_ENV="$(cd .. && pwd)/$PYVENV" CARGO_TARGET_DIR="$(cd .. && pwd)/target" \
        "../$PYVENV/bin/maturin" develop --quiet
    "../$PYVENV/bin/python" -m pytest -q tests
)
