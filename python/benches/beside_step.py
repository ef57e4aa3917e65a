"""A device step and an input pipeline side by side: what each costs the other.

    python python/benches/beside_step.py --infeed target/release/infeed \\
        --lm 'testdata/lm-sample.tfrecord' --jpeg 'data/jpeg/*.tfrecord' [--seconds 4] [--json OUT]

The step: a jitted chain of matrix products on the first JAX device, waited
for after every step, as a loop that reads its loss does (``--size`` square
float32 matrices; 2048 on a GPU, 256 on a CPU by default). First the step
alone, then for each pipeline (the lm reference: pad to a multiple of 64, max
512, int32, batch 256; JPEG: ImageNet eval, shorter side to 256, center
224x224, batch 128) and each CPU budget (``cpu_affinity`` of 1 core, 2
cores and every core):

- the pipeline alone (``infeed bench --cpu-affinity ...``, endless input,
  ``--seconds``): its records/s on that budget;
- the pipeline and the step together: both figures again, so the step's
  slowdown from the pipeline's CPU shows beside the pipeline's own speed.

Prints one JSON object; ``--json`` also writes it to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

PIPELINES = {
    "lm": [
        "--spec",
        "input_ids:var_len:int64,attention_mask:var_len:int64",
        "--pad-to-multiple-of",
        "64",
        "--max-length",
        "512",
        "--cast",
        "int32",
        "--batch",
        "256",
        "--drop-remainder",
    ],
    "jpeg": [
        "--spec",
        "image/encoded:image[224,224,3]:eval=256,image/class/label:fixed_len[]:int64",
        "--batch",
        "128",
        "--drop-remainder",
    ],
}


def step_loop(size: int, seconds: float) -> float:
    """Steps per second of the step over ``seconds`` (after a warm-up)."""
    key = jax.random.key(0)
    w = jax.random.normal(key, (size, size), jnp.float32) / size**0.5
    x = jax.random.normal(key, (size, size), jnp.float32)

    @jax.jit
    def step(x: jax.Array) -> jax.Array:
        for _ in range(4):
            x = jnp.tanh(x @ w)
        return x

    x = step(x).block_until_ready()
    steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        x = step(x).block_until_ready()
        steps += 1
    return steps / (time.perf_counter() - start)


def bench(
    infeed: str,
    files: str,
    pipeline: str,
    cores: list[int],
    seconds: float,
    extra: tuple[str, ...] = (),
) -> Any:
    """``infeed bench`` of a pipeline, with ``extra`` flags, on ``cores`` for ``seconds``."""
    args = [infeed, "bench", files, *PIPELINES[pipeline], *extra]
    args += ["--epochs", "0", "--seconds", str(seconds), "--json", "--no-digest"]
    args += ["--cpu-affinity", ",".join(map(str, cores))]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def budgets() -> list[list[int]]:
    allowed = sorted(os.sched_getaffinity(0))
    sets = [allowed[:1], allowed[:2], allowed]
    return [s for i, s in enumerate(sets) if s not in sets[:i]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--infeed", required=True, help="the infeed binary")
    ap.add_argument("--lm", help="lm-shaped TFRecord files (a glob or comma-separated)")
    ap.add_argument("--jpeg", help="ImageNet-style JPEG TFRecord files")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--size", type=int, help="matrix size of the step")
    ap.add_argument("--json", help="also write the report to this file")
    args = ap.parse_args()

    device = jax.devices()[0]
    size = args.size or (256 if device.platform == "cpu" else 2048)
    alone = step_loop(size, args.seconds)
    runs = []
    for name, files in (("lm", args.lm), ("jpeg", args.jpeg)):
        if not files:
            continue
        for cores in budgets():
            solo = bench(args.infeed, files, name, cores, args.seconds)
            with ThreadPoolExecutor(1) as side:
                running = side.submit(bench, args.infeed, files, name, cores, args.seconds)
                beside = step_loop(size, args.seconds)
                result = running.result()
            runs.append(
                {
                    "pipeline": name,
                    "cores": len(cores),
                    "workers": solo["workers"],
                    "alone_records_per_sec": solo["records_per_sec"],
                    "beside_records_per_sec": result["records_per_sec"],
                    "step_steps_per_sec": beside,
                    "step_share_kept": beside / alone,
                }
            )
    report = {
        "platform": device.platform,
        "device": str(device.device_kind),
        "host_cores": len(os.sched_getaffinity(0)),
        "step_size": size,
        "step_alone_steps_per_sec": alone,
        "runs": runs,
    }
    print(json.dumps(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
