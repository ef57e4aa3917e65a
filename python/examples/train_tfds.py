"""TensorFlow's "Use TPU" guide, its input on infeed: a TFDS image dataset to a JAX model.

    python python/examples/train_tfds.py DATASET_DIR [--steps 300]

DATASET_DIR is a dataset ``tfds`` prepared, e.g. ~/tensorflow_datasets/mnist/3.0.1
(or what python/examples/make_tfds_shapes.py writes). No TensorFlow is needed
here: the guide's

    dataset = tfds.load("mnist", split="train", as_supervised=True)
    dataset = dataset.map(scale)   # uint8 image -> float32 / 255
    dataset = dataset.shuffle(10000).repeat().batch(batch_size, drop_remainder=True)

becomes ``from_tfds(dir, "train")`` → ``parse()`` (the dataset's own features:
the PNG images decoded on infeed's workers to uint8 [28, 28, 1], the labels
int64) → ``normalize("image", 0, 255)`` → ``shuffle(10000).repeat()`` →
``batch(128, drop_remainder=True)``, fed as global jax.Arrays sharded over the
devices (``infeed.jax``). A small convolutional network trains on it; then the
test split, batched with padding rows (``real_rows``), gives the accuracy.
"""

from __future__ import annotations

import argparse
import json
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


def init_params(key: jax.Array, classes: int, channels: int) -> dict:
    k1, k2, k3, k4 = jax.random.split(key, 4)

    def he(k: jax.Array, shape: tuple[int, ...], fan_in: int) -> jax.Array:
        return jax.random.normal(k, shape) * (2.0 / fan_in) ** 0.5

    return {
        "c1": he(k1, (3, 3, channels, 16), 9 * channels),
        "c2": he(k2, (3, 3, 16, 32), 9 * 16),
        "d1": he(k3, (7 * 7 * 32, 64), 7 * 7 * 32),
        "b1": jnp.zeros(64),
        "d2": he(k4, (64, classes), 64),
        "b2": jnp.zeros(classes),
    }


def logits_of(params: dict, images: jax.Array) -> jax.Array:
    """Two 3x3 convolutions of stride 2 (28 → 14 → 7), two dense layers."""
    x = images
    for w in (params["c1"], params["c2"]):
        x = jax.lax.conv_general_dilated(
            x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        x = jax.nn.relu(x)
    x = x.reshape(x.shape[0], -1)
    x = jax.nn.relu(x @ params["d1"] + params["b1"])
    return x @ params["d2"] + params["b2"]


def loss_fn(params: dict, images: jax.Array, labels: jax.Array) -> jax.Array:
    logits = logits_of(params, images)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def classes_of(dataset: pathlib.Path) -> int:
    """The label's class count: tfds writes one name per line beside the data."""
    names = dataset / "label.labels.txt"
    if not names.exists():
        raise SystemExit(f"{names} is missing: is {dataset} a TFDS dataset with a ClassLabel?")
    return len(names.read_text().split())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=pathlib.Path, help="a TFDS dataset directory")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=128, help="global rows per step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the figures to this file as one JSON object")
    args = ap.parse_args()

    classes = classes_of(args.dataset)
    devices = np.array(jax.devices())
    mesh = Mesh(devices, ("data",))
    sharding = NamedSharding(mesh, P("data"))
    hosts, host = jax.process_count(), jax.process_index()
    train = (
        infeed.Pipeline.from_tfds(args.dataset, split="train")
        .shard(host, hosts)
        .seed(args.seed)
        .shuffle_files()
        .interleave(4)
        .parse(features=["image", "label"])
        .normalize("image", mean=0.0, std=255.0)
        .shuffle(10000)
        .repeat()
        .batch(args.batch // hosts, drop_remainder=True)
    )
    [shape] = train.shapes()
    channels = shape["image"][0][-1]
    print(f"{len(devices)} devices; {classes} classes; batch {shape}")

    optimizer = optax.adam(2e-3)
    params = jax.device_put(
        init_params(jax.random.key(args.seed), classes, channels), NamedSharding(mesh, P())
    )
    opt_state = optimizer.init(params)

    @jax.jit
    def step(
        params: dict, opt_state: Any, batch: dict[str, jax.Array]
    ) -> tuple[dict, Any, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, batch["image"], batch["label"])
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    batches = infeed.jax.device_iterator(train, sharding, prefetch=2)
    start = time.perf_counter()
    for i, batch in enumerate(batches, start=1):
        params, opt_state, loss = step(params, opt_state, batch)
        if i == 1:
            start = time.perf_counter()  # steps/s after the first compile
            batches.wait_seconds = 0.0
        if i % 100 == 0 or i == args.steps:
            print(f"step {i:5d}  loss {float(loss):.4f}")
        if i == args.steps:
            break
    jax.block_until_ready(params)
    wall = time.perf_counter() - start
    batches.close()

    # The test split once, in order; the last batch's padding rows are left out.
    test = (
        infeed.Pipeline.from_tfds(args.dataset, split="test")
        .parse(features=["image", "label"])
        .normalize("image", mean=0.0, std=255.0)
        .batch(256, drop_remainder=False)
    )
    predict = jax.jit(lambda p, x: jnp.argmax(logits_of(p, x), axis=-1))
    correct = seen = 0
    it = iter(test)
    for batch in it:
        real = it.real_rows or 0
        guesses = np.asarray(predict(params, batch["image"]))[:real]
        correct += int((guesses == batch["label"][:real]).sum())
        seen += real
    print(
        f"test accuracy {correct / seen:.4f} ({seen} images); "
        f"{(args.steps - 1) / wall:.1f} steps/s; "
        f"input wait {100 * batches.wait_seconds / wall:.1f}% of wall time"
    )
    if args.json:
        with open(args.json, "w") as f:
            figures = {
                "platform": devices[0].platform,
                "devices": len(devices),
                "steps": args.steps,
                "steps_per_sec": (args.steps - 1) / wall,
                "input_wait_fraction": batches.wait_seconds / wall,
                "test_accuracy": correct / seen,
            }
            json.dump(figures, f)
            f.write("\n")


if __name__ == "__main__":
    main()
