#!/usr/bin/env bash
# Sets up and runs every test of infeed, including the TensorFlow interop tests and the
# cloud-storage emulator tests:
#   bash scripts/test.sh
# First scripts/test-env.sh installs what is missing (each part skipped when there): .venv
# with the pinned tensorflow-cpu and tensorflow-datasets, the storage emulators, the XLA CPU
# PJRT plugin (into .pjrt/, for the `xla` feature's tests), .venv-python and .venv-beam.
# Then it checks that testdata/ is exactly what testdata/make_testdata.py writes; starts the
# storage emulators (scripts/emulators.sh: fake-gcs-server, moto, azurite, on 127.0.0.1;
# stopped by PID when this script exits); then runs
# `cargo test --all-features -- --include-ignored` with INFEED_PYTHON pointing at the venv
# and the emulators' environment, so the tests marked #[ignore = "needs TensorFlow..."] and
# #[ignore = "needs emulators..."] run too.
# Then the Python package (python/): builds it with maturin (dev profile, into the root
# target/ so it shares compiled dependencies) into .venv-python (the pins of
# python/requirements-test.txt), runs `ruff check python benches`, mypy (the package with its
# stub of the extension, its tests, examples and benches) and pytest (python/tests), with a
# two-node Ray cluster on 127.0.0.1 up for infeed.ray's tests (scripts/ray-cluster.sh,
# stopped by PID after them).
# Then the Beam transform (infeed.beam): its own venv .venv-beam (the pins of
# python/requirements-beam.txt: apache-beam pins its own numpy/protobuf; jax's are
# python/requirements-test.txt's), the package built into it (same target/, so no second
# compile) and pytest python/tests/test_beam.py on the DirectRunner (2 processes).
# Needs: a Rust toolchain, python3 (3.10 to 3.13) and node/npm (18+); cmake and nasm (for
# libjpeg-turbo) are installed from apt when missing (scripts/build-deps.sh). Set PYTHON to
# pick another python3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The venvs, emulators and plugin the tests need (downloads; skipped when already there).
bash scripts/test-env.sh
VPY=.venv/bin/python
INFEED_PYTHON="$(pwd)/$VPY"
export INFEED_PYTHON

bash scripts/build-deps.sh

"$INFEED_PYTHON" testdata/make_testdata.py --check

echo "test.sh: emulators (at ${SECONDS} s)"
trap 'bash scripts/emulators.sh stop' EXIT
bash scripts/emulators.sh start
eval "$(bash scripts/emulators.sh env)"

echo "test.sh: cargo test (at ${SECONDS} s)"
cargo test --all-features -- --include-ignored

# The Python package: built into its own venv (jax and TensorFlow pin different numpy
# and protobuf versions), dev profile (a release build doubles the compile time; the
# tests read small files), tested with pytest.
echo "test.sh: the Python package (at ${SECONDS} s)"
PYVENV=.venv-python
"$PYVENV/bin/ruff" check python benches
"$PYVENV/bin/mypy" --config-file python/pyproject.toml \
    python/infeed python/tests python/examples python/benches
# infeed.ray's tests run on a two-node Ray cluster on 127.0.0.1 (scripts/ray-cluster.sh),
# stopped by its PIDs when this script exits, as the emulators are.
trap 'bash scripts/ray-cluster.sh stop; bash scripts/emulators.sh stop' EXIT
bash scripts/ray-cluster.sh start
eval "$(bash scripts/ray-cluster.sh env)"
(
    cd python
    VIRTUAL_ENV="$(cd .. && pwd)/$PYVENV" CARGO_TARGET_DIR="$(cd .. && pwd)/target" \
        "../$PYVENV/bin/maturin" develop --quiet
    "../$PYVENV/bin/python" -m pytest -q tests
)
bash scripts/ray-cluster.sh stop
trap 'bash scripts/emulators.sh stop' EXIT

# The Beam transform: .venv-beam (apache-beam and the package), tests on the DirectRunner;
# the infeed binary they compare with is cargo test's debug build. The emulators started
# above are still up and their environment (INFEED_EMULATORS=1, endpoints, keys) exported,
# so the gs://, s3://, az:// tests run (python/tests/stores.py).
echo "test.sh: the Beam transform (at ${SECONDS} s)"
BEAMVENV=.venv-beam
# Beam's DirectRunner leaves an empty temporary folder or two behind for every pipeline it
# runs (its job server's): they go into a folder of this run's own, removed when it ends.
BEAM_TMP="$(mktemp -d "${TMPDIR:-/tmp}/infeed-beam-tests.XXXXXX")"
trap 'rm -rf "$BEAM_TMP"; bash scripts/emulators.sh stop' EXIT
(
    cd python
    VIRTUAL_ENV="$(cd .. && pwd)/$BEAMVENV" CARGO_TARGET_DIR="$(cd .. && pwd)/target" \
        "../$BEAMVENV/bin/maturin" develop --quiet
    INFEED_CLI="$(cd .. && pwd)/target/debug/infeed" TMPDIR="$BEAM_TMP" \
        "../$BEAMVENV/bin/python" -m pytest -q -p no:logging tests/test_beam.py
)
echo "test.sh: done (at ${SECONDS} s)"
