# Sourced by the comparison scripts (compare-tfdata.sh, compare-images.sh, compare-python.sh,
# compare-grain.sh): makes sure .venv holds the pinned tensorflow-cpu they run tf.data with,
# installing it when it does not. Sets TF_PIN, VENV and VPY; defines ensure_tf_venv NAME and
# ensure_venv_pins NAME PIN... (NAME: the calling script, for messages). scripts/test-env.sh
# adds tensorflow-datasets with ensure_venv_pins.
TF_PIN="tensorflow-cpu==2.21.0"
VENV=.venv
VPY="$VENV/bin/python"

has_tf() {
    "$VPY" - "${TF_PIN#*==}" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(0 if m.version("tensorflow-cpu") == sys.argv[1] else 1)
PY
}

ensure_tf_venv() {
    if [[ -x "$VPY" ]] && has_tf; then
        return
    fi
    echo "$1: setting up $VENV with $TF_PIN" >&2
    [[ -x "$VPY" ]] || "${PYTHON:-python3}" -m venv "$VENV"
    "$VPY" -m pip install --quiet --disable-pip-version-check "$TF_PIN"
    has_tf || { echo "$1: $TF_PIN did not install into $VENV" >&2; exit 1; }
}

# ensure_venv_pins NAME PIN...: .venv holds every PIN (name==version), installing them when
# it does not (compare-python.sh and compare-grain.sh add grain and friends to tensorflow).
ensure_venv_pins() {
    local name="$1"; shift
    [[ -x "$VPY" ]] || "${PYTHON:-python3}" -m venv "$VENV"
    if ! "$VPY" - "$@" <<'PY' 2>/dev/null; then
import importlib.metadata as m, sys
sys.exit(0 if all(m.version(p.split("==")[0]) == p.split("==")[1] for p in sys.argv[1:]) else 1)
PY
        echo "$name: installing $* into $VENV" >&2
        "$VPY" -m pip install --quiet --disable-pip-version-check "$@"
    fi
}
