"""Host-to-device bandwidth through JAX: infeed's batches beside plain numpy.

    python python/benches/h2d.py [--mib 64] [--rounds 15] [--json OUT]

The same bytes three ways, alternating within each round, each upload waited
for (``block_until_ready``):

- ``infeed``: a batch of the lm pipeline (testdata/lm-sample.tfrecord,
  repeated, fixed length 512, int32, about ``--mib`` MiB a batch), its
  numpy views of infeed's pooled, 64-byte aligned buffers put on the first
  device with ``jax.device_put``, as ``infeed.jax`` does;
- ``pageable``: copies of those arrays in ordinary numpy memory;
- ``pinned``: the same arrays first placed in JAX's ``pinned_host`` memory
  (untimed), then moved to the device: the link's speed, where the platform
  has pinned host memory.

Prints one JSON line: median GB/s of each (1 GB = 1e9 bytes), the platform
and the bytes per upload. On a CPU device an upload may alias host memory
rather than copy it, so the figures there say nothing about a link.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.sharding import SingleDeviceSharding

import infeed

LM = Path(__file__).resolve().parents[2] / "testdata" / "lm-sample.tfrecord"
ROW_BYTES = 512 * 4 * 4  # fixed length 512, int32: two features and their masks


def upload(arrays: list[Any], target: Any) -> float:
    """Seconds to put ``arrays`` on ``target`` and wait for them."""
    start = time.perf_counter()
    jax.block_until_ready([jax.device_put(a, target) for a in arrays])
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", help="also write the line to this file")
    args = ap.parse_args()

    device = jax.devices()[0]
    rows = max(1, (args.mib << 20) // ROW_BYTES)
    pipeline = (
        infeed.Pipeline.from_files([LM])
        .repeat()
        .parse({"input_ids": infeed.VarLen("int64"), "attention_mask": infeed.VarLen("int64")})
        .fixed_length(512)
        .cast("int32")
        .batch(rows)
    )
    batches = iter(pipeline)
    on_device = SingleDeviceSharding(device)
    kinds = {m.kind for m in device.addressable_memories()}
    pinned_kind = SingleDeviceSharding(device, memory_kind="pinned_host")
    figures: dict[str, list[float]] = {"infeed": [], "pageable": [], "pinned": []}
    nbytes = 0
    for round_ in range(args.rounds + 1):  # round 0 warms up
        batch = list(next(batches).values())
        nbytes = sum(a.nbytes for a in batch)
        pageable = [np.array(a, copy=True) for a in batch]
        took = {"infeed": upload(batch, on_device), "pageable": upload(pageable, on_device)}
        if "pinned_host" in kinds:
            pinned = jax.block_until_ready([jax.device_put(a, pinned_kind) for a in pageable])
            took["pinned"] = upload(pinned, on_device)
        if round_ > 0:
            for name, secs in took.items():
                figures[name].append(nbytes / secs / 1e9)
    batches.close()
    line = {
        "platform": device.platform,
        "device": str(device.device_kind),
        "bytes": nbytes,
        "rounds": args.rounds,
        **{
            f"{name}_gb_per_sec": statistics.median(v) if v else None
            for name, v in figures.items()
        },
        "pinned_host": "pinned_host" in kinds,
    }
    print(json.dumps(line))
    if args.json:
        Path(args.json).write_text(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
