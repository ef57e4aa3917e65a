#!/usr/bin/env bash
# Sets up and runs every test of infeed, including the TensorFlow interop tests and the
# cloud-storage emulator tests:
#   bash scripts/test.sh
# Creates .venv (python3 -m venv) with tensorflow-cpu and tensorflow-datasets pinned
# below, unless it already has them; checks that testdata/ is exactly what testdata/make_testdata.py writes; installs and
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
# Then the Beam transform (infeed.beam): its own venv .venv-beam with the pins of
# python/requirements-beam.txt (apache-beam pins its own numpy/protobuf; jax's are
# python/requirements-test.txt's), the package built into it (same target/, so no second
# compile) and pytest python/tests/test_beam.py on the DirectRunner (2 processes).
# Needs: a Rust toolchain, python3 (3.10 to 3.13) and node/npm (18+); cmake and nasm (for
# libjpeg-turbo) are installed from apt when missing (scripts/build-deps.sh). Set PYTHON to
# pick another python3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TF_PIN="tensorflow-cpu==2.21.0"
# tfds prepares the datasets of the TFDS interop tests (tests/io/tfds/oracle.rs).
TFDS_PIN="tensorflow-datasets==4.9.10"
VENV=.venv
VPY="$VENV/bin/python"

has_tf() {
    "$VPY" - "${TF_PIN#*==}" "${TFDS_PIN#*==}" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
ok = m.version("tensorflow-cpu") == sys.argv[1] and m.version("tensorflow-datasets") == sys.argv[2]
sys.exit(0 if ok else 1)
PY
}

if [[ -x "$VPY" ]] && has_tf; then
    echo "test.sh: $VENV already has $TF_PIN and $TFDS_PIN"
else
    echo "test.sh: setting up $VENV with $TF_PIN and $TFDS_PIN"
    [[ -x "$VPY" ]] || "${PYTHON:-python3}" -m venv "$VENV"
    "$VPY" -m pip install --quiet --disable-pip-version-check "$TF_PIN" "$TFDS_PIN"
    has_tf || { echo "test.sh: $TF_PIN or $TFDS_PIN did not install into $VENV" >&2; exit 1; }
fi
INFEED_PYTHON="$(pwd)/$VPY"
export INFEED_PYTHON

bash scripts/build-deps.sh

"$INFEED_PYTHON" testdata/make_testdata.py --check

echo "test.sh: emulators (at ${SECONDS} s)"
bash scripts/emulators.sh install
trap 'bash scripts/emulators.sh stop' EXIT
bash scripts/emulators.sh start
eval "$(bash scripts/emulators.sh env)"

# The XLA CPU PJRT plugin for the `xla` feature's tests (pinned, checksum-verified,
# into .pjrt/); those tests fail without it. PJRT_PLUGIN_PATH, when set, is used instead.
[[ -n "${PJRT_PLUGIN_PATH:-}" ]] || bash scripts/fetch-pjrt.sh

echo "test.sh: cargo test (at ${SECONDS} s)"
cargo test --all-features -- --include-ignored

# The Python package: built into its own venv (jax and TensorFlow pin different numpy
# and protobuf versions), dev profile (a release build doubles the compile time; the
# tests read small files), tested with pytest.
echo "test.sh: the Python package (at ${SECONDS} s)"
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

# The Beam transform: .venv-beam (apache-beam and the package), tests on the DirectRunner;
# the infeed binary they compare with is cargo test's debug build. The emulators started
# above are still up and their environment (INFEED_EMULATORS=1, endpoints, keys) exported,
# so the gs://, s3://, az:// tests run (python/tests/stores.py).
echo "test.sh: the Beam transform (at ${SECONDS} s)"
BEAMVENV=.venv-beam
BEAMREQ=python/requirements-beam.txt
[[ -x "$BEAMVENV/bin/python" ]] || "${PYTHON:-python3}" -m venv "$BEAMVENV"
if ! cmp -s "$BEAMREQ" "$BEAMVENV/.requirements-beam.txt"; then
    echo "test.sh: installing $BEAMREQ into $BEAMVENV"
    "$BEAMVENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$BEAMREQ"
    cp "$BEAMREQ" "$BEAMVENV/.requirements-beam.txt"
fi
(
    cd python
    VIRTUAL_ENV="$(cd .. && pwd)/$BEAMVENV" CARGO_TARGET_DIR="$(cd .. && pwd)/target" \
        "../$BEAMVENV/bin/maturin" develop --quiet
    INFEED_CLI="$(cd .. && pwd)/target/debug/infeed" \
        "../$BEAMVENV/bin/python" -m pytest -q -p no:logging tests/test_beam.py
)
echo "test.sh: done (at ${SECONDS} s)"
