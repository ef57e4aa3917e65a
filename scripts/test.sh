#!/usr/bin/env bash
# Sets up and runs every test of infeed, including the TensorFlow interop tests:
#   bash scripts/test.sh
# Creates .venv (python3 -m venv) with tensorflow-cpu pinned below, unless it already has
# it; checks that testdata/ is exactly what testdata/make_testdata.py writes; then runs
# `cargo test --all-features -- --include-ignored` with INFEED_PYTHON pointing at the venv,
# so the tests marked #[ignore = "needs TensorFlow..."] run too.
# Needs: a Rust toolchain and python3 (3.10 to 3.13). Set PYTHON to pick another python3.
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

"$INFEED_PYTHON" testdata/make_testdata.py --check
cargo test --all-features -- --include-ignored
