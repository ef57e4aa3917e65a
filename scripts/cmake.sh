#!/usr/bin/env bash
# The cmake that the cmake crate runs in this repository's builds (.cargo/config.toml sets
# CMAKE to this script): the real cmake, with one change for SentencePiece. The
# `sentencepiece` feature links only libsentencepiece.a, but sentencepiece-sys builds
# SentencePiece's whole install target: the library twice (shared and static), its trainer
# twice and five command-line tools. Configured with SPM_ENABLE_SHARED=OFF and built for
# its static library alone, the same library takes ~45 s of a 2-core machine where the
# install target took ~200 s (measured on 2026-12-06), on the critical path of every
# clean build (.ci/run's clippy waits for it). Every other project, and every other
# command, goes to cmake unchanged.
set -euo pipefail

is_sentencepiece_source() {
    [[ -f "$1/CMakeLists.txt" ]] && grep -q '^project(sentencepiece' "$1/CMakeLists.txt"
}

is_sentencepiece_build() {
    [[ -f "$1/CMakeCache.txt" ]] && grep -q '^CMAKE_PROJECT_NAME:STATIC=sentencepiece$' "$1/CMakeCache.txt"
}

args=("$@")
if [[ "${1:-}" == --build ]] && is_sentencepiece_build "${2:-}"; then
    # `--target install` (the cmake crate's) becomes the static library's own target:
    # sentencepiece-sys links it from the build folder, and takes headers from its source.
    for i in "${!args[@]}"; do
        if [[ "${args[i]}" == --target && "${args[i + 1]:-}" == install ]]; then
            args[i + 1]=sentencepiece-static
        fi
    done
else
    for arg in "$@"; do
        if [[ "$arg" != -* ]] && is_sentencepiece_source "$arg"; then
            args+=(-DSPM_ENABLE_SHARED=OFF)
            break
        fi
    done
fi
exec cmake "${args[@]}"
