"""Trains a small JAX model on TFRecord shards through infeed.

    python python/examples/train_jax.py                 # writes its own shards, trains
    python python/examples/train_jax.py --data 'dir/train-*.tfrecord' --steps 500

With no --data it writes a few shards of learnable sequences (arithmetic
progressions modulo a small vocabulary, random lengths) as tf.train.Example
records with an ``input_ids`` Int64List, using the tiny TFRecord writer at the
bottom of this file (so the example needs neither TensorFlow nor the CLI).

The model sees the two tokens before each position (an embedding each, an MLP)
and predicts the next one: a progression is fixed by two terms, so the loss
falls from log(vocab) towards 0. The input is the pipeline users of tf.data
know: shuffle files, interleave, shuffle, repeat, parse, pad to a multiple of
16, cast to int32, batch; batches become global jax.Arrays sharded over every
device (``infeed.jax``), prefetched on a background thread. It prints the loss,
steps/s and the fraction of wall time the step waited for input. For 8 CPU
devices: ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (on a machine
with fewer cores than devices, XLA's CPU all-reduce can miss its 40 s
rendezvous under load and abort; that is XLA's CPU backend, not the input).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import tempfile
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import infeed
import infeed.jax

VOCAB = 64


def init_params(key: jax.Array, dim: int = 32, hidden: int = 256) -> dict:
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "embed": jax.random.normal(k1, (VOCAB, dim)) * 0.1,
        "w1": jax.random.normal(k2, (2 * dim, hidden)) * (2 * dim) ** -0.5,
        "b1": jnp.zeros(hidden),
        "w2": jax.random.normal(k3, (hidden, VOCAB)) * hidden**-0.5,
        "b2": jnp.zeros(VOCAB),
    }


def loss_fn(params: dict, ids: jax.Array, mask: jax.Array) -> jax.Array:
    # Predict token t from tokens t-2 and t-1 (t >= 2), only where t is real.
    prev2, prev1, target = ids[:, :-2], ids[:, 1:-1], ids[:, 2:]
    x = jnp.concatenate([params["embed"][prev2], params["embed"][prev1]], axis=-1)
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, target)
    weights = mask[:, 2:].astype(jnp.float32)
    return (losses * weights).sum() / jnp.maximum(weights.sum(), 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="glob of TFRecord shards with an input_ids Int64List")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64, help="rows per host per step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the figures to this file as one JSON object")
    args = ap.parse_args()

    tmp = None
    pattern = args.data
    if pattern is None:
        tmp = tempfile.TemporaryDirectory(prefix="infeed-train-")
        pattern = write_shards(tmp.name, shards=4, records=2000, seed=args.seed)
        print(f"wrote 4 shards of 2000 records to {tmp.name}")

    devices = np.array(jax.devices())
    sharding = NamedSharding(Mesh(devices, ("data",)), P("data"))
    replicated = NamedSharding(Mesh(devices, ("data",)), P())
    pipeline = (
        infeed.Pipeline.from_glob(pattern)
        .shard(jax.process_index(), jax.process_count())
        .seed(args.seed)
        .shuffle_files()
        .interleave(4)
        .shuffle(2000)
        .repeat()
        .parse({"input_ids": infeed.VarLen("int64")})
        .pad_to_multiple_of(16)
        .max_length(128)
        .truncation("keep_start")
        .cast("int32")
        .batch(args.batch)
    )
    print(f"{len(devices)} devices; batch shapes: {len(pipeline.shapes())}")

    optimizer = optax.adam(3e-3)
    params = jax.device_put(init_params(jax.random.key(args.seed)), replicated)
    opt_state = optimizer.init(params)

    @jax.jit
    def step(
        params: dict, opt_state: Any, batch: dict[str, jax.Array]
    ) -> tuple[dict, Any, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(
            params, batch["input_ids"], batch["input_ids_mask"]
        )
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    batches = infeed.jax.device_iterator(pipeline, sharding, prefetch=2)
    first = None
    losses = []
    start = time.perf_counter()
    for i, batch in enumerate(batches, start=1):
        params, opt_state, loss = step(params, opt_state, batch)
        if i == 1:
            first = float(loss)
            start = time.perf_counter()  # steps/s after the first compile
            batches.wait_seconds = 0.0
        if i % 50 == 0 or i == args.steps:
            losses.append(float(loss))
            print(f"step {i:5d}  loss {losses[-1]:.4f}")
        if i == args.steps:
            break
    jax.block_until_ready(params)
    wall = time.perf_counter() - start
    batches.close()
    steps_per_s = (args.steps - 1) / wall
    print(
        f"loss {first:.3f} -> {losses[-1]:.3f}; {steps_per_s:.1f} steps/s; "
        f"input wait {100 * batches.wait_seconds / wall:.1f}% of wall time"
    )
    if args.json:
        write_figures(
            args.json,
            platform=devices[0].platform,
            devices=len(devices),
            steps=args.steps,
            steps_per_sec=steps_per_s,
            input_wait_fraction=batches.wait_seconds / wall,
            first_loss=first,
            last_loss=losses[-1],
        )
    if tmp is not None:
        tmp.cleanup()


def write_figures(path: str, **figures: Any) -> None:
    with open(path, "w") as f:
        json.dump(figures, f)
        f.write("\n")


# A minimal TFRecord writer for the generated shards -----------------------


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def _masked_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _example(features: dict[str, list[int]]) -> bytes:
    """A tf.train.Example of Int64List features."""
    entries = b""
    for name, values in features.items():
        int64_list = _field(1, b"".join(_varint(v) for v in values))
        feature = _field(3, int64_list)
        entries += _field(1, _field(1, name.encode()) + _field(2, feature))
    return _field(1, entries)


def _record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", _masked_crc32c(length))
        + data
        + struct.pack("<I", _masked_crc32c(data))
    )


def write_shards(directory: str, shards: int, records: int, seed: int) -> str:
    """Arithmetic progressions modulo VOCAB, lengths 8..128."""
    rng = random.Random(seed)
    for s in range(shards):
        path = os.path.join(directory, f"train-{s:05d}-of-{shards:05d}.tfrecord")
        with open(path, "wb") as f:
            for _ in range(records):
                start, step = rng.randrange(VOCAB), rng.randrange(1, VOCAB)
                length = rng.randint(8, 128)
                ids = [(start + i * step) % VOCAB for i in range(length)]
                f.write(_record(_example({"input_ids": ids})))
    return os.path.join(directory, "train-*.tfrecord")


if __name__ == "__main__":
    main()
