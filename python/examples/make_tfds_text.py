"""Prepares a small raw-text TFDS dataset with tensorflow-datasets itself.

    python python/examples/make_tfds_text.py DATA_DIR     # a Python with tensorflow-datasets

"pipeline_notes": documents of 1 to 4 sentences drawn at random from
testdata/tokenizer/corpus.txt (the text the test tokenizers were trained on),
one ``Text`` feature ``text``, as ``tfds`` writes C4's (``c4/en``'s ``text``),
in a train split of 3 000 documents and a test split of 300, 4 shards each.
Prints the dataset's directory (DATA_DIR/pipeline_notes/1.0.0) on the last
line: what python/examples/train_lm.py reads, in a venv with no TensorFlow.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "tokenizer" / "corpus.txt"


class PipelineNotes(tfds.core.GeneratorBasedBuilder):
    VERSION = tfds.core.Version("1.0.0")

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict({"text": tfds.features.Text()}),
        )

    def _split_generators(self, dl_manager: Any) -> dict[str, Iterator[tuple[int, dict]]]:
        return {
            "train": self._generate_examples(3000, seed=1),
            "test": self._generate_examples(300, seed=2),
        }

    def _generate_examples(self, n: int, seed: int) -> Iterator[tuple[int, dict]]:
        sentences = [s for s in CORPUS.read_text().splitlines() if s.strip()]
        rng = np.random.default_rng(seed)
        for i in range(n):
            picked = rng.choice(len(sentences), size=int(rng.integers(1, 5)))
            yield i, {"text": " ".join(sentences[j] for j in picked)}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tfds.disable_progress_bar()
    builder = PipelineNotes(data_dir=sys.argv[1])
    # tfds logs its progress on stdout: keep it for the directory alone.
    with contextlib.redirect_stdout(sys.stderr):
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=4))
    print(os.fspath(builder.data_dir))


if __name__ == "__main__":
    main()
