#!/usr/bin/env bash
# The build tools the `images` and `sentencepiece` features (opt-in for the crate, on in the
# Python package) need beyond a Rust toolchain and a C compiler: cmake and nasm, with which
# the turbojpeg-sys crate builds libjpeg-turbo (and its SIMD code) from its vendored source,
# and a C++ compiler, with which sentencepiece-sys builds the SentencePiece library. Installs the
# missing ones from apt (Debian/Ubuntu), `apt-get update` first, sudo only when not root
# (as .ci/run installs valgrind). Called by .ci/run, scripts/test.sh and scripts/wheel.sh.
#   bash scripts/build-deps.sh
set -euo pipefail

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v nasm >/dev/null || missing+=(nasm)
command -v c++ >/dev/null || missing+=(g++)
if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi
echo "build-deps.sh: installing ${missing[*]} from apt"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
