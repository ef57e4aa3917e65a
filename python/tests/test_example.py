"""The examples train: python/examples/train_jax.py (the loss falls, it
reports steps/s and input wait), train_tfds.py on a dataset tensorflow-datasets
prepared, and train_lm.py from raw TFDS text on one and on two JAX processes."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest
from processes import free_port, run_processes

pytest.importorskip("jax")
pytest.importorskip("optax")

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "train_jax.py"


def test_train_jax_example_loss_falls():
    # One CPU device: with several, every step all-reduces across devices, and
    # XLA's CPU collectives abort when a device's thread misses a 40 s
    # rendezvous, which a loaded 2-core machine can cause (seen in CI with 8
    # and with 2 devices). Sharding over 8 devices is tested in test_jax.py.
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1")
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "150"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = out.stdout + out.stderr[-3000:]
    assert out.returncode == 0, report
    m = re.search(
        r"loss ([\d.]+) -> ([\d.]+); ([\d.]+) steps/s; input wait ([\d.]+)% of wall time",
        out.stdout,
    )
    assert m, report
    first, last, steps_per_s, wait = map(float, m.groups())
    assert last < first - 1.0, report
    assert steps_per_s > 0 and 0 <= wait <= 100, report


TFDS_EXAMPLE = EXAMPLE.parent / "train_tfds.py"
MAKE_SHAPES = EXAMPLE.parent / "make_tfds_shapes.py"


def test_train_tfds_example_learns_from_a_dataset_tfds_prepared(tmp_path: pathlib.Path) -> None:
    """The TPU guide's input on infeed: tensorflow-datasets (in the interop
    venv, $INFEED_PYTHON) prepares the dataset; the example trains on it in
    this venv, which has no TensorFlow, and reaches a high test accuracy."""
    python = os.environ.get("INFEED_PYTHON")
    if not python:
        pytest.skip("INFEED_PYTHON (a python with tensorflow-datasets) is not set")
    assert importlib.util.find_spec("tensorflow") is None, "the training venv has TensorFlow"
    made = subprocess.run(
        [python, str(MAKE_SHAPES), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    dataset = made.stdout.strip().splitlines()[-1]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1")
    out = subprocess.run(
        [sys.executable, str(TFDS_EXAMPLE), dataset, "--steps", "150"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = out.stdout + out.stderr[-3000:]
    assert out.returncode == 0, report
    assert "4 classes; batch {'image': ((128, 28, 28, 1), dtype('float32'))" in out.stdout, report
    m = re.search(r"test accuracy ([\d.]+) \((\d+) images\)", out.stdout)
    assert m, report
    accuracy, images = float(m.group(1)), int(m.group(2))
    assert images == 800, report
    assert accuracy >= 0.9, report


LM_EXAMPLE = EXAMPLE.parent / "train_lm.py"
MAKE_TEXT = EXAMPLE.parent / "make_tfds_text.py"
LM_SHAPES = " ".join(
    f"{name}:(16, 128):int32"
    for name in ["inputs", "positions", "segment_ids", "targets", "targets_mask"]
)


def lm_steps(out: str) -> list[tuple[float, str]]:
    """Each step's loss and global batch shapes, as train_lm.py prints them."""
    return [(float(m[1]), m[2]) for m in re.finditer(r"^step \d+ loss ([\d.]+) (.*)$", out, re.M)]


def test_train_lm_example_learns_from_raw_tfds_text_on_one_and_two_processes(
    tmp_path: pathlib.Path,
) -> None:
    """Raw text that tensorflow-datasets wrote (in the interop venv,
    $INFEED_PYTHON) → tokenize → concat-split packing → inputs/targets →
    a JAX model in this venv, which has no TensorFlow: the loss falls on one
    process, and two processes see the same global shapes and the same
    loss at every step."""
    python = os.environ.get("INFEED_PYTHON")
    if not python:
        pytest.skip("INFEED_PYTHON (a python with tensorflow-datasets) is not set")
    assert importlib.util.find_spec("tensorflow") is None, "the training venv has TensorFlow"
    made = subprocess.run(
        [python, str(MAKE_TEXT), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    dataset = made.stdout.strip().splitlines()[-1]
    steps = 120
    [one] = run_processes([[sys.executable, str(LM_EXAMPLE), dataset, "--steps", str(steps)]])
    ran = lm_steps(one)
    assert len(ran) == steps, one[-3000:]
    assert all(shapes == LM_SHAPES for _, shapes in ran), ran[0]
    assert ran[-1][0] < ran[0][0] - 3.0, [loss for loss, _ in ran]

    port = free_port()
    two = run_processes(
        [
            [sys.executable, str(LM_EXAMPLE), dataset, "--steps", str(steps)]
            + ["--coordinator", f"127.0.0.1:{port}", "--processes", "2", "--process-id", str(i)]
            for i in range(2)
        ]
    )
    hosts = [lm_steps(out) for out in two]
    assert [len(h) for h in hosts] == [steps, steps], two[0][-3000:]
    assert hosts[0] == hosts[1], "the two processes saw other shapes or losses"
    assert all(shapes == LM_SHAPES for _, shapes in hosts[0])
    assert hosts[0][-1][0] < hosts[0][0][0] - 3.0, [loss for loss, _ in hosts[0]]
