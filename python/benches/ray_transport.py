"""What infeed.ray's transport costs: a pipeline through Ray actors beside the
same pipeline in this process, alternated in one run.

    bash scripts/ray-cluster.sh start
    python python/benches/ray_transport.py --address 127.0.0.1:29600 \\
        --lm 'bench-data/scale-1/lm/*.tfrecord' \\
        --jpeg 'bench-data/scale-1/jpeg/*.tfrecord' [--rounds 3] [--actors 2] \\
        [--placement node,trainer] [--json OUT]

Each workload is one pipeline (``streams(4)``, so both sides run the same
one): ``lm``, the reference lm pipeline (pad to 64, max 512, int32, batch
256); ``jpeg``, the train pipeline of scripts/compare-images.sh (random
resized crop to 224x224, flip, normalize to float32, batch 128); and
``jpeg-uint8``, the same without the normalizing, left to the device as
many vision jobs do (a quarter of the bytes). Round after round:
``local`` iterates it here (its threads on every core this process may
use), then ``ray`` through ``infeed.ray.remote(actors=N)`` on the
cluster's node with ``infeed_streams`` (each actor ``cores / N`` CPUs and
as many threads) with ``--placement node``; with ``trainer``, on the
trainer's own node (half a CPU each: the script's head has one), whose
actors hand their parts over through shared memory, without the two
object stores' copy between nodes. On one machine both share the same
cores, so this measures what the transport costs, not what offloading gains. Per side:
records/s; for ``ray`` also the trainer process's CPU per batch (its
``ray.get``, Ray's threads, the join), the bytes per batch, and the bytes
of it received from the actors (padded features travel unpadded). And for
both, the CPU per batch of every process that takes part (from ``/proc``:
the trainer, the actors, the raylets, Ray's other processes), and the
cores this process may use kept busy on each side (by anyone). The remote
side can spend at most ``cores`` CPU-seconds a second, so its CPU a batch
caps its rate: that cap over the local rate is the ``ceiling`` printed, the
most the ratio can be, when the cluster runs on the same cores as this
script (start it under the same ``taskset``) and no other Ray cluster
runs on the machine (every Ray process here is counted).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import logging
import os
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import infeed
import infeed.ray

LM_SPEC = {"input_ids": infeed.VarLen("int64"), "attention_mask": infeed.VarLen("int64")}
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def pipelines(args: argparse.Namespace) -> dict[str, infeed.Pipeline]:
    out = {}
    if args.lm:
        out["lm"] = (
            infeed.Pipeline.from_glob(args.lm)
            .streams(4)
            .seed(1)
            .parse(LM_SPEC)
            .pad_to_multiple_of(64)
            .max_length(512)
            .cast("int32")
            .batch(256)
        )
    if args.jpeg:
        image = infeed.Image(224, 224, 3, mode="train", flip=True)
        decoded = (
            infeed.Pipeline.from_glob(args.jpeg)
            .streams(4)
            .seed(1)
            .shuffle(2500)
            .repeat(args.jpeg_epochs)
            .parse({"image/encoded": image, "image/class/label": infeed.FixedLen([], "int64")})
        )
        out["jpeg"] = decoded.normalize("image/encoded", MEAN, STD).batch(128)
        out["jpeg-uint8"] = decoded.batch(128)
    return out


RAY_DIR = os.path.dirname(ray.__file__)


def cpu_by_process() -> dict[tuple[int, int], tuple[str, float]]:
    """CPU seconds so far of each of this machine's processes that take
    part, keyed by (pid, start time), with its kind: this one
    (``trainer``), the actors, the raylets, Ray's other processes (from
    ``/proc``: Linux only, this machine only)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(pid) == os.getpid():
            kind = "trainer"
        elif "_Streams" in name or "_Streams" in command:
            kind = "actors"
        elif name == "raylet":
            kind = "raylets"
        elif name == "gcs_server" or any(
            mark in command for mark in ("ray::", RAY_DIR, "bin/ray start", " -m ray.")
        ):
            kind = "other Ray"
        else:
            continue
        # Fields 14 and 15 of stat (utime, stime), 22 (start time).
        out[(int(pid), int(fields[19]))] = (kind, (int(fields[11]) + int(fields[12])) / tick)
    return out


def machine_busy() -> float:
    """CPU seconds the cores this process may use have been busy, whoever
    used them (``/proc/stat``'s ``cpuN`` lines; steal counts as busy)."""
    mine = {f"cpu{n}" for n in os.sched_getaffinity(0)}
    busy = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *fields = line.split()
            if name in mine:
                ticks = [int(x) for x in fields[:8]]
                busy += sum(ticks) - ticks[3] - ticks[4]  # less idle, iowait
    return busy / os.sysconf("SC_CLK_TCK")


def measure(it: Any, batch_records: int) -> dict[str, Any]:
    """Drains ``it``: records/s, this process's CPU and the bytes per batch;
    the CPU per batch of every process that takes part (a process's CPU
    since the start, or all of it if it started since; one that ended is
    not counted), and what the whole machine was busy."""
    start, cpu = time.perf_counter(), time.process_time()
    before, busy = cpu_by_process(), machine_busy()
    batches = nbytes = 0
    for batch in it:
        batches += 1
        nbytes += sum(v.nbytes for v in batch.values())
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    busy = machine_busy() - busy
    split: dict[str, float] = collections.defaultdict(float)
    for key, (kind, seconds) in cpu_by_process().items():
        split[kind] += seconds - before.get(key, (kind, 0.0))[1]
    n = max(batches, 1)
    return {
        "records_per_sec": batches * batch_records / wall,
        "batches": batches,
        "wall_s": wall,
        "trainer_cpu_us_per_batch": cpu / n * 1e6,
        "cpu_ms_per_batch": {k: v / n * 1e3 for k, v in split.items()},
        "machine_busy_ms_per_batch": busy / n * 1e3,
        "bytes_per_batch": nbytes / n,
        "received_per_batch": getattr(it, "bytes_received", nbytes) / n,
    }


def _rate(records_per_sec: float) -> str:
    return f"{records_per_sec / 1e3:.{0 if records_per_sec >= 1e5 else 2}f} K/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default=os.environ.get("INFEED_RAY_ADDRESS"))
    parser.add_argument("--lm")
    parser.add_argument("--jpeg")
    parser.add_argument("--jpeg-epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--placement", default="node", help="node, trainer, or both")
    parser.add_argument("--json")
    args = parser.parse_args()
    ray.init(address=args.address, logging_level=logging.ERROR, log_to_driver=False)
    cores = len(os.sched_getaffinity(0))
    results = []
    placements = args.placement.split(",")
    for round_, (name, p), where in itertools.product(
        range(args.rounds), pipelines(args).items(), placements
    ):
        batch = 256 if name == "lm" else 128
        local = measure(p.iter(), batch)
        if where == "node":
            place: dict[str, Any] = {
                "num_cpus": max(1, cores // args.actors),
                "resources": {"infeed_streams": 1},
            }
        else:
            here = ray.get_runtime_context().get_node_id()
            place = {
                "num_cpus": 0.5,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(here, soft=False),
            }
        remote = infeed.ray.remote(p, args.actors, **place)
        with remote.iter() as it:
            far = measure(it, batch)
        row: dict[str, Any] = {
            "round": round_,
            "workload": name,
            "placement": where,
            "local": local["records_per_sec"],
            "ray": far["records_per_sec"],
            "ratio": far["records_per_sec"] / local["records_per_sec"],
            "trainer_cpu_us_per_batch": far["trainer_cpu_us_per_batch"],
            "local_cpu_ms_per_batch": local["cpu_ms_per_batch"],
            "ray_cpu_ms_per_batch": far["cpu_ms_per_batch"],
            "bytes_per_batch": far["bytes_per_batch"],
            "received_per_batch": far["received_per_batch"],
        }
        results.append(row)
        print(
            f"{name} on {where} round {round_}: local {_rate(local['records_per_sec'])}, "
            f"ray {_rate(far['records_per_sec'])} ({row['ratio']:.2f}), trainer "
            f"{row['trainer_cpu_us_per_batch']:.0f} us CPU a batch of "
            f"{row['bytes_per_batch'] / 2**20:.2f} MiB, {row['received_per_batch'] / 2**20:.2f} "
            "MiB of it received",
            flush=True,
        )
        # The remote side can give at most `cores` seconds of CPU a second:
        # its CPU a batch caps its rate, and so the ratio (the ceiling).
        mine, theirs = local["cpu_ms_per_batch"], far["cpu_ms_per_batch"]
        local_per_sec = local["records_per_sec"] / batch
        row["ceiling"] = cores / (sum(theirs.values()) / 1e3) / local_per_sec
        row["local_cores_busy"] = local["machine_busy_ms_per_batch"] / 1e3 * local_per_sec
        row["ray_cores_busy"] = (
            far["machine_busy_ms_per_batch"] / 1e3 * far["records_per_sec"] / batch
        )
        print(
            f"  CPU a batch (ms): local {sum(mine.values()):.2f}; ray "
            + ", ".join(f"{k} {v:.2f}" for k, v in sorted(theirs.items()))
            + f" (ceiling {row['ceiling']:.2f}); cores busy: local "
            f"{row['local_cores_busy']:.2f}, ray {row['ray_cores_busy']:.2f} of {cores}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
