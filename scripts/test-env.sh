#!/usr/bin/env bash
# Installs what the tests need beyond the Rust toolchain, each part skipped when it is there
# already:
#   bash scripts/test-env.sh
# .venv (tensorflow-cpu and tensorflow-datasets, for the interop tests), the storage emulators
# (scripts/emulators.sh install: into .emulators/), the XLA CPU PJRT plugin (scripts/fetch-pjrt.sh:
# into .pjrt/), .venv-python (python/requirements-test.txt) and .venv-beam
# (python/requirements-beam.txt). scripts/test.sh runs it first. It is mostly downloads, so
# .ci/run starts it in the background while the lints compile, and waits for it before the
# tests (a fresh run took ~3 minutes of its own before the tests could start).
# Needs python3 (3.10 to 3.13; PYTHON picks another) and node/npm (18+).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# .venv's TensorFlow pin and its install come from scripts/tf-venv.sh (the comparison scripts'
# too); tfds prepares the datasets of tests/io/tfds/oracle.rs.
# shellcheck source=scripts/tf-venv.sh
source scripts/tf-venv.sh
TFDS_PIN="tensorflow-datasets==4.9.10"
echo "test-env.sh: TensorFlow (at ${SECONDS} s)"
ensure_venv_pins test-env.sh "$TF_PIN" "$TFDS_PIN"

echo "test-env.sh: emulators (at ${SECONDS} s)"
bash scripts/emulators.sh install

# The XLA CPU PJRT plugin for the `xla` feature's tests (pinned, checksum-verified, into
# .pjrt/); those tests fail without it. PJRT_PLUGIN_PATH, when set, is used instead.
[[ -n "${PJRT_PLUGIN_PATH:-}" ]] || bash scripts/fetch-pjrt.sh

# venv_with_requirements VENV FILE: VENV holds FILE's pins (installed again when FILE changed).
venv_with_requirements() {
    local venv="$1" req="$2"
    [[ -x "$venv/bin/python" ]] || "${PYTHON:-python3}" -m venv "$venv"
    local mark
    mark="$venv/.$(basename "$req")"
    if ! cmp -s "$req" "$mark"; then
        echo "test-env.sh: installing $req into $venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
        cp "$req" "$mark"
    fi
}

# The Python package's (jax and TensorFlow pin different numpy and protobuf versions, so it
# has a venv of its own), and the Beam transform's (apache-beam pins its own numpy/protobuf).
echo "test-env.sh: Python venvs (at ${SECONDS} s)"
venv_with_requirements .venv-python python/requirements-test.txt
venv_with_requirements .venv-beam python/requirements-beam.txt
echo "test-env.sh: done (at ${SECONDS} s)"
