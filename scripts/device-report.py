"""Puts scripts/device-check.sh's step reports into report.json and prints a summary.

    python scripts/device-report.py REPORT_DIR MODE QUICK "FAILED STEPS"

Reads REPORT_DIR/<step>.json (one JSON object each; a step that failed has
none) and gpu.txt (nvidia-smi's name, memory and driver, on a GPU).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

STEPS = [
    "train_lm",
    "upload_bandwidth",
    "h2d",
    "train_jax",
    "train_tfds",
    "beside_step",
    "core_scaling",
]


def load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return {"error": f"no report ({e.__class__.__name__})"}


def fmt(x: Any, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def summary(r: dict[str, Any]) -> list[str]:
    lines = [f"device-check: {r['mode']} ({r['card']}){' quick' if r['quick'] else ''}"]
    t = r["steps"]["train_lm"]
    if "steps_per_sec" in t:
        lines.append(
            f"  train_lm (Rust, PJRT {t['platform']}): {fmt(t['steps_per_sec'])} steps/s, "
            f"loss {fmt(t['first_loss'], 3)} -> {fmt(t['last_loss'], 3)}, "
            f"compiles in loop {t['compiles_in_loop']}, input wait "
            f"{fmt(100 * t['input_wait_fraction'])}%, uploads {t['batch_uploads']} "
            f"(in place {t['zero_copy_uploads']}, pinned {t['pinned_uploads']}; DMA {t['dma']})"
        )
    u = r["steps"]["upload_bandwidth"]
    if "pooled_gb_per_sec" in u:
        lines.append(
            f"  uploads (Rust) of {u['bytes'] >> 20} MiB: pooled {fmt(u['pooled_gb_per_sec'])} GB/s "
            f"(pinned {u['pooled_pinned']}), pageable {fmt(u['pageable_gb_per_sec'])}, "
            f"copy {fmt(u['copy_gb_per_sec'])}, pooled four in flight "
            f"{fmt(u['pooled_in_flight_gb_per_sec'])}; read in place {u['read_in_place']}"
        )
    h = r["steps"]["h2d"]
    if "infeed_gb_per_sec" in h:
        lines.append(
            f"  jax.device_put of {h['bytes'] >> 20} MiB: infeed batch {fmt(h['infeed_gb_per_sec'])} "
            f"GB/s, numpy pageable {fmt(h['pageable_gb_per_sec'])}, pinned_host "
            f"{fmt(h['pinned_gb_per_sec'])}"
        )
    for name in ("train_jax", "train_tfds"):
        s = r["steps"][name]
        if "steps_per_sec" in s:
            lines.append(
                f"  {name} (infeed.jax, {s['platform']}): {fmt(s['steps_per_sec'])} steps/s, "
                f"input wait {fmt(100 * s['input_wait_fraction'])}%"
            )
        elif "skipped" in s:
            lines.append(f"  {name}: skipped ({s['skipped']})")
    b = r["steps"]["beside_step"]
    if "runs" in b:
        lines.append(
            f"  step alone {fmt(b['step_alone_steps_per_sec'])} steps/s; pipelines beside it:"
        )
        for run in b["runs"]:
            lines.append(
                f"    {run['pipeline']:4} on {run['cores']} core(s): "
                f"{fmt(run['alone_records_per_sec'], 0)} rec/s alone, "
                f"{fmt(run['beside_records_per_sec'], 0)} beside the step; "
                f"step keeps {fmt(100 * run['step_share_kept'])}%"
            )
    c = r["steps"]["core_scaling"]
    if "one_file" in c:
        lines.append("  lm alone, records/s by cores:")
        for name, modes in c.items():
            for mode, by_cores in modes.items():
                rates = ", ".join(f"{n}: {fmt(v, 0)}" for n, v in by_cores.items())
                lines.append(f"    {name} {mode}: {rates}")
    for name in r["failed"]:
        lines.append(f"  FAILED: {name} (see {name}.log)")
    return lines


def main() -> None:
    out, mode, quick, failed = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4]
    gpu = out / "gpu.txt"
    report = {
        "mode": mode,
        "quick": quick,
        "card": gpu.read_text().strip() if mode == "gpu" and gpu.exists() else "CPU plugin, no GPU",
        "failed": failed.split(),
        "steps": {name: load(out / f"{name}.json") for name in STEPS},
    }
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print("\n".join(summary(report)))
    print(f"report: {out / 'report.json'}")


if __name__ == "__main__":
    main()
