#!/usr/bin/env bash
# Fetches the pinned XLA CPU PJRT plugin into .pjrt/ (git-ignored):
#   bash scripts/fetch-pjrt.sh
# Downloads the wheel `xla-cpu-pjrt==0.0.1` from PyPI with pip (no dependencies),
# checks its sha256 against the pin below, and unpacks
#   .pjrt/xla_cpu_pjrt.so   the plugin (PJRT C API 0.81), found by infeed's `xla` feature
#   .pjrt/pjrt_c_api.h      the header the committed bindings (src/xla/sys.rs) come from
# Idempotent: does nothing when both files are there and the plugin's checksum matches.
# Needs python3 with pip (set PYTHON to pick one) and unzip or python3's zipfile.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PIN="xla-cpu-pjrt==0.0.1"
WHEEL="xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl"
WHEEL_SHA256="55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc"
SO_SHA256="88c3f28c5900f48ad4a82cab9e79bba9537809743395e341485f8794268820dc"
DEST=.pjrt
PY="${PYTHON:-python3}"
[[ -z "${PYTHON:-}" && -x .venv/bin/python ]] && PY=.venv/bin/python

so_ok() {
    [[ -f "$DEST/xla_cpu_pjrt.so" && -f "$DEST/pjrt_c_api.h" ]] &&
        echo "$SO_SHA256  $DEST/xla_cpu_pjrt.so" | sha256sum --check --status
}

if so_ok; then
    echo "fetch-pjrt.sh: $DEST/xla_cpu_pjrt.so is already there"
    exit 0
fi

if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
    echo "fetch-pjrt.sh: $PIN is built for Linux x86_64 only; set PJRT_PLUGIN_PATH to a plugin for this machine" >&2
    exit 1
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --platform manylinux_2_27_x86_64 --python-version 3 \
    "$PIN" -d "$TMP"
echo "$WHEEL_SHA256  $TMP/$WHEEL" | sha256sum --check --quiet || {
    echo "fetch-pjrt.sh: $WHEEL does not have the pinned sha256" >&2
    exit 1
}
mkdir -p "$DEST"
"$PY" - "$TMP/$WHEEL" "$TMP" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so",
                 "xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h"):
        z.extract(name, sys.argv[2])
PY
mv "$TMP/xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h" "$DEST/pjrt_c_api.h"
mv "$TMP/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so" "$DEST/xla_cpu_pjrt.so.part"
mv "$DEST/xla_cpu_pjrt.so.part" "$DEST/xla_cpu_pjrt.so"
so_ok || { echo "fetch-pjrt.sh: the unpacked plugin does not have the pinned sha256" >&2; exit 1; }
echo "fetch-pjrt.sh: $DEST/xla_cpu_pjrt.so ready"
