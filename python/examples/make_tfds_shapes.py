"""Prepares a small MNIST-like TFDS dataset with tensorflow-datasets itself.

    python python/examples/make_tfds_shapes.py DATA_DIR     # a Python with tensorflow-datasets

"shapes": 28x28x1 grayscale PNG images of four classes (a horizontal bar, a
vertical bar, a diagonal, a hollow square) at random places and sizes, with
noise, in a train split and a test split of 4 shards each, written as
`tfds` writes MNIST (`Image(shape=(28, 28, 1))`, `ClassLabel`). Prints the
dataset's directory (DATA_DIR/shapes/1.0.0) on the last line: what
python/examples/train_tfds.py reads, in a venv with no TensorFlow. The TPU
guide's MNIST, prepared by `tfds` elsewhere, reads the same way.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

CLASSES = ["horizontal", "vertical", "diagonal", "square"]


def draw(rng: np.random.Generator, label: int) -> np.ndarray:
    """One 28x28x1 image of class ``label``."""
    image = rng.integers(0, 60, size=(28, 28), dtype=np.int64)
    size = int(rng.integers(10, 20))
    top, left = (int(v) for v in rng.integers(2, 26 - size, size=2))
    bright = int(rng.integers(180, 256))
    if label == 0:
        row = top + size // 2
        image[row : row + 3, left : left + size] = bright
    elif label == 1:
        col = left + size // 2
        image[top : top + size, col : col + 3] = bright
    elif label == 2:
        for i in range(size):
            image[top + i, left + i : left + i + 2] = bright
    else:
        image[top : top + size, left : left + size] = bright
        image[top + 2 : top + size - 2, left + 2 : left + size - 2] = rng.integers(0, 60)
    return image.clip(0, 255).astype(np.uint8)[:, :, None]


class Shapes(tfds.core.GeneratorBasedBuilder):
    VERSION = tfds.core.Version("1.0.0")

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict(
                {
                    "image": tfds.features.Image(shape=(28, 28, 1)),
                    "label": tfds.features.ClassLabel(names=CLASSES),
                }
            ),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager: Any) -> dict[str, Iterator[tuple[int, dict]]]:
        return {
            "train": self._generate_examples(4000, seed=1),
            "test": self._generate_examples(800, seed=2),
        }

    def _generate_examples(self, n: int, seed: int) -> Iterator[tuple[int, dict]]:
        rng = np.random.default_rng(seed)
        for i in range(n):
            label = i % len(CLASSES)
            yield i, {"image": draw(rng, label), "label": label}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tfds.disable_progress_bar()
    builder = Shapes(data_dir=sys.argv[1])
    # tfds logs its progress on stdout: keep it for the directory alone.
    with contextlib.redirect_stdout(sys.stderr):
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=4))
    print(os.fspath(builder.data_dir))


if __name__ == "__main__":
    main()
