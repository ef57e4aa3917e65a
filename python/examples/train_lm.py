"""Trains a small JAX language model on raw TFDS text through infeed.

    python python/examples/train_lm.py DATASET [--tokenizer MODEL] [--steps 200]

MaxText's input, without TensorFlow: a TFDS dataset with a ``text`` feature
(``python/examples/make_tfds_text.py`` prepares one; ``c4/en`` as ``tfds``
prepares it reads the same way) → ``from_tfds`` → ``parse()`` (the text as
bytes) → ``shuffle`` → ``repeat`` → ``tokenize`` with a SentencePiece model
(default: testdata's unigram model) → ``pack(128, strategy="concat_split")``
(no padding) → ``inputs_targets`` (next-token inputs and targets, shifted
within each document) → ``batch`` → global ``jax.Array``s sharded over
every device of every process (``infeed.jax``).

The model embeds the two tokens before each position (within its document)
and predicts the next one with an MLP: the loss falls from log(vocab). It
prints every step's loss and the global batch's shapes, which every process
must see alike. Several processes on one machine:
``--coordinator 127.0.0.1:PORT --processes N --process-id I`` in each (one
CPU device each), as ``python/tests/test_example.py`` runs it.
"""

from __future__ import annotations

import argparse
import pathlib
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

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "testdata" / "tokenizer" / "spm-unigram.model"
ROW = 128


def init_params(key: jax.Array, vocab: int, dim: int = 64, hidden: int = 256) -> dict:
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        # One more row: "no token before" (a document's first position).
        "embed": jax.random.normal(k1, (vocab + 1, dim)) * 0.1,
        "w1": jax.random.normal(k2, (2 * dim, hidden)) * (2 * dim) ** -0.5,
        "b1": jnp.zeros(hidden),
        "w2": jax.random.normal(k3, (hidden, vocab)) * hidden**-0.5,
        "b2": jnp.zeros(vocab),
    }


def loss_fn(params: dict, batch: dict[str, jax.Array], vocab: int) -> jax.Array:
    # inputs[t] is the token before t (bos at a document's start);
    # inputs[t - 1] the one before that, where t is not a document's start.
    inputs, positions = batch["inputs"], batch["positions"]
    before = jnp.roll(inputs, 1, axis=1)
    before = jnp.where(positions > 0, before, vocab)
    x = jnp.concatenate([params["embed"][inputs], params["embed"][before]], axis=-1)
    x = jax.nn.relu(x @ params["w1"] + params["b1"])
    logits = x @ params["w2"] + params["b2"]
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
    weights = batch["targets_mask"].astype(jnp.float32)
    return (ce * weights).sum() / jnp.maximum(weights.sum(), 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=pathlib.Path, help="a TFDS dataset directory")
    ap.add_argument("--tokenizer", default=str(TOKENIZER), help="a .model or tokenizer.json")
    ap.add_argument("--vocab", type=int, default=1024, help="at least the tokenizer's size")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16, help="global rows of 128 tokens a step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--cache-batches",
        type=int,
        default=0,
        help="replay the first N batches for ever: the step rate with perfect input",
    )
    ap.add_argument("--coordinator", help="host:port of process 0, for several processes")
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--process-id", type=int, default=0)
    args = ap.parse_args()

    if args.coordinator:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(args.coordinator, args.processes, args.process_id)
    hosts, host = jax.process_count(), jax.process_index()
    mesh = Mesh(np.array(jax.devices()), ("data",))
    sharding = NamedSharding(mesh, P("data"))
    train = (
        infeed.Pipeline.from_tfds(args.dataset, split="train")
        .shard(host, hosts)
        .seed(args.seed)
        .shuffle_files()
        .shuffle(1000)
        .repeat()
        .parse()
        .tokenize("text", args.tokenizer, add_eos=True)
        .pack(ROW, strategy="concat_split")
        .inputs_targets("text")
        .batch(args.batch // hosts, drop_remainder=True)
    )
    print(f"process {host} of {hosts}; {len(jax.devices())} devices", flush=True)

    optimizer = optax.adam(3e-3)
    params = jax.device_put(
        init_params(jax.random.key(args.seed), args.vocab), NamedSharding(mesh, P())
    )
    opt_state = optimizer.init(params)

    @jax.jit
    def step(params: dict, opt_state: Any, batch: dict) -> tuple[dict, Any, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, batch, args.vocab)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    batches = infeed.jax.device_iterator(
        train, sharding, prefetch=2, cache_batches=args.cache_batches
    )
    start = time.perf_counter()
    for i, batch in enumerate(batches, start=1):
        shapes = " ".join(f"{k}:{tuple(v.shape)}:{v.dtype}" for k, v in sorted(batch.items()))
        params, opt_state, loss = step(params, opt_state, batch)
        print(f"step {i} loss {float(loss):.4f} {shapes}", flush=True)
        if i == 1:
            start = time.perf_counter()  # steps/s after the first compile
            batches.wait_seconds = 0.0
        if i == args.steps:
            break
    jax.block_until_ready(params)
    wall = time.perf_counter() - start
    batches.close()
    print(
        f"{(args.steps - 1) / wall:.1f} steps/s; "
        f"input wait {100 * batches.wait_seconds / wall:.1f}% of wall time"
    )


if __name__ == "__main__":
    main()
