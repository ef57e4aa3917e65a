#!/usr/bin/env bash
# Guards the hot kernels' speed with instruction counts, which load does not disturb:
# builds examples/kernels.rs (release, no default features), runs each kernel under
# callgrind collecting only inside its measured region, and compares instructions per
# record with benches/callgrind-baseline.json. Exit 1 when a kernel grew more than 10%
# (or is missing from the baseline); a kernel that shrank more than 10% is only reported
# (run --update to lock the gain in). A baseline taken with another rustc is still
# compared, and the difference said.
#
# Usage: scripts/callgrind-guard.sh [--update]   (needs valgrind and python3)
#   --update  rewrites the baseline with this build's figures.
# Environment: CALLGRIND_TOLERANCE (default 0.10).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

UPDATE=0
case "${1:-}" in
    "") ;;
    --update) UPDATE=1 ;;
    *) echo "usage: $0 [--update]" >&2; exit 2 ;;
esac
BASELINE=benches/callgrind-baseline.json
TOLERANCE="${CALLGRIND_TOLERANCE:-0.10}"

command -v valgrind >/dev/null || { echo "callgrind-guard: valgrind is not installed" >&2; exit 2; }

cargo build --quiet --release --example kernels --no-default-features
BIN=target/release/examples/kernels
WORK="$(mktemp -d "${TMPDIR:-/tmp}/callgrind-guard.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

: >"$WORK/figures"
for kernel in $("$BIN" --list); do
    # Only the measured region counts (setup and the warm-up run are outside it).
    valgrind --tool=callgrind --callgrind-out-file="$WORK/$kernel.out" \
        --toggle-collect='*measured_region*' "$BIN" "$kernel" >"$WORK/$kernel.stdout" 2>"$WORK/$kernel.log" || {
        cat "$WORK/$kernel.log" >&2; echo "callgrind-guard: $kernel failed" >&2; exit 2; }
    read -r name records <"$WORK/$kernel.stdout"
    instructions="$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$WORK/$kernel.out")"
    [[ "$name" == "$kernel" && "$records" -gt 0 && -n "$instructions" ]] || {
        echo "callgrind-guard: $kernel: no figures (stdout: $(cat "$WORK/$kernel.stdout"))" >&2; exit 2; }
    echo "$kernel $instructions $records" >>"$WORK/figures"
done

python3 - "$WORK/figures" "$BASELINE" "$UPDATE" "$TOLERANCE" "$(rustc --version)" "$(valgrind --version)" <<'PY'
import json, sys

figures_path, baseline_path, update, tolerance, rustc, valgrind = sys.argv[1:]
tolerance = float(tolerance)
now = {}
for line in open(figures_path):
    kernel, instructions, records = line.split()
    now[kernel] = round(int(instructions) / int(records), 1)

if update == "1":
    with open(baseline_path, "w") as f:
        json.dump({"rustc": rustc, "valgrind": valgrind,
                   "command": "scripts/callgrind-guard.sh --update",
                   "instructions_per_record": now}, f, indent=2)
        f.write("\n")
    for kernel, per in now.items():
        print(f"{kernel:<12} {per:>10.1f} instructions/record")
    print(f"callgrind-guard: wrote {baseline_path} ({rustc})")
    sys.exit(0)

try:
    baseline = json.load(open(baseline_path))
except FileNotFoundError:
    sys.exit(f"callgrind-guard: no {baseline_path}: run with --update")
if baseline.get("rustc") != rustc:
    print(f"callgrind-guard: baseline taken with {baseline.get('rustc')}, this is {rustc}: "
          "compared anyway (a compiler change alone can move counts)")
before = baseline["instructions_per_record"]
failed = False
print(f"{'kernel':<12} {'baseline':>10} {'now':>10} {'change':>8}  (instructions/record)")
for kernel, per in now.items():
    if kernel not in before:
        print(f"{kernel:<12} {'-':>10} {per:>10.1f} {'':>8}  FAIL: not in the baseline (--update)")
        failed = True
        continue
    change = per / before[kernel] - 1
    verdict = ""
    if change > tolerance:
        verdict = f"  FAIL: grew more than {tolerance:.0%}"
        failed = True
    elif change < -tolerance:
        verdict = f"  shrank more than {tolerance:.0%}: --update to keep the gain"
    print(f"{kernel:<12} {before[kernel]:>10.1f} {per:>10.1f} {change:>+8.1%}{verdict}")
for kernel in before.keys() - now.keys():
    print(f"{kernel:<12} {before[kernel]:>10.1f} {'-':>10}   (no longer measured)")
sys.exit(1 if failed else 0)
PY
