#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for SECONDS each (default 60):
#   bash scripts/fuzz.sh [SECONDS]
# Installs cargo-fuzz (pinned) when missing. Uses the nightly toolchain when there is
# one, else the stable one with RUSTC_BOOTSTRAP=1 (cargo-fuzz needs -Z flags for the
# sanitizer and coverage instrumentation). Each target starts from its committed corpus
# fuzz/corpus/<target>/ (never written to); inputs found in this run go to
# fuzz/target/corpus-run/<target>/, crashes to fuzz/artifacts/<target>/.
# Environment: FUZZ_TARGETS="a b" runs only those; FUZZ_JOBS=N runs N processes per
# target (libFuzzer -fork); FUZZ_LOG=file appends the per-target summary there;
# FUZZ_LIGHT=1 leaves out convert_rows and the converters it compiles (parquet, arrow,
# tokenizers), which CI does to keep a fresh fuzz build short; FUZZ_DEV=1 builds and runs the
# targets unoptimized (cargo fuzz --dev: a fresh light build of 97 s against 211 s, for far
# fewer executions a second), which CI does for its short run: there the committed corpus
# replays whole either way, and the long runs that explore stay optimized.
# Exits non-zero if any target crashed, leaked past a limit or timed out.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"

SECONDS_EACH="${1:-60}"
CARGO_FUZZ_VERSION=0.13.1
# Memory bounds: a process above 2 GiB RSS, or a single allocation above 256 MiB,
# is a failure (every reader here bounds its allocations far below that).
LIMITS=(-rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=20)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

if cargo +nightly --version >/dev/null 2>&1; then
    FUZZ=(cargo +nightly fuzz)
    echo "fuzz.sh: nightly toolchain: $(cargo +nightly --version)"
else
    export RUSTC_BOOTSTRAP=1
    FUZZ=(cargo fuzz)
    echo "fuzz.sh: no nightly toolchain; stable with RUSTC_BOOTSTRAP=1: $(cargo --version)"
fi

features=(--features convert)
profile=()
if [[ -n "${FUZZ_DEV:-}" ]]; then profile=(--dev); fi
all_targets=$("${FUZZ[@]}" list)
if [[ -n "${FUZZ_LIGHT:-}" ]]; then
    features=()
    all_targets=$(printf '%s\n' $all_targets | grep -vx convert_rows)
fi
targets=${FUZZ_TARGETS:-$all_targets}
start=$(date +%s)
"${FUZZ[@]}" build "${profile[@]}" "${features[@]}"
echo "fuzz.sh: built in $(( $(date +%s) - start )) s"

failed=()
summary=()
for t in $targets; do
    work="target/corpus-run/$t"
    mkdir -p "$work" "corpus/$t"
    log="target/fuzz-$t.log"
    extra=()
    if [[ -n "${FUZZ_JOBS:-}" ]]; then extra=(-fork="$FUZZ_JOBS" -ignore_crashes=0); fi
    echo "== $t (${SECONDS_EACH}s)"
    if "${FUZZ[@]}" run "${profile[@]}" "${features[@]}" "$t" "$work" "corpus/$t" -- -max_total_time="$SECONDS_EACH" \
        "${LIMITS[@]}" -print_final_stats=1 "${extra[@]}" >"$log" 2>&1; then
        status=ok
    else
        status=FAILED
        failed+=("$t")
        tail -40 "$log"
    fi
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1 || true)
    if [[ -z "$runs" ]]; then
        runs=$(grep -Eo 'Done [0-9]+ runs' "$log" | grep -Eo '[0-9]+' | tail -1 || true)
    fi
    line="$t: ${runs:-?} executions in ${SECONDS_EACH}s: $status"
    echo "$line"
    summary+=("$line")
done

echo "== summary ($(( $(date +%s) - start )) s in all)"
printf '%s\n' "${summary[@]}"
if [[ -n "${FUZZ_LOG:-}" ]]; then printf '%s\n' "${summary[@]}" >>"$FUZZ_LOG"; fi
if (( ${#failed[@]} )); then
    echo "fuzz.sh: failed: ${failed[*]} (reproducers under fuzz/artifacts/)"
    exit 1
fi
