"""TensorFlow Datasets as the oracle of tests/io/tfds/oracle.rs.

    python tfds_oracle.py make DATA_DIR     tfds prepares a small dataset ("tiny") under
                                            DATA_DIR: every kind of feature infeed maps,
                                            train and test in 4 shards each; prints its
                                            directory as one JSON line {"dir": ...}.
    python tfds_oracle.py read DIR SPLIT    tfds reads split SPLIT of the dataset in DIR
                                            (builder_from_directory, files in order, one at
                                            a time; images of static shape decoded by tfds,
                                            the one of unknown size left encoded): one JSON
                                            line per example, its features flattened with "/".

Values print as lists: integers as they are, floats as their float32 bit patterns
(exact), byte strings as hex.
"""

import contextlib
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

# Floats that catch a lossy path: signed zero, a subnormal, the extremes.
ODD_FLOATS = [0.0, -0.0, 1e-45, -3.4028235e38, 3.4028235e38, 0.1, -7.25]


def png(i):
    """A small PNG whose size and pixels depend on i."""
    h, w = 1 + i % 3, 2 + i % 2
    pixels = (np.arange(h * w * 3, dtype=np.int64).reshape(h, w, 3) * (i + 1)) % 256
    return pixels.astype(np.uint8)


def pixels(i, h, w, c):
    """Pixels of a fixed size: gradients and a block that move with i (smooth
    enough for JPEG to keep them close)."""
    y, x = np.mgrid[0:h, 0:w]
    out = np.stack([(x * 255 // max(w - 1, 1) + 37 * i + 60 * k) % 256 for k in range(c)], -1)
    out[(y // 3 + x // 3 + i) % 4 == 0] //= 2
    return out.astype(np.uint8)


class Tiny(tfds.core.GeneratorBasedBuilder):
    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        f = tfds.features
        return tfds.core.DatasetInfo(
            builder=self,
            features=f.FeaturesDict(
                {
                    "label": f.ClassLabel(names=["a", "b", "c"]),
                    "score": f.Scalar(dtype=np.float32),
                    "flag": f.Scalar(dtype=np.bool_),
                    "vec": f.Tensor(shape=(3,), dtype=np.float32),
                    "small": f.Tensor(shape=(2, 2), dtype=np.int32),
                    "ragged": f.Tensor(shape=(None,), dtype=np.int64),
                    "rows": f.Tensor(shape=(None, 2), dtype=np.int32),
                    "raw": f.Tensor(shape=(2, 2), dtype=np.uint8, encoding="bytes"),
                    "text": f.Text(),
                    "tokens": f.Sequence(np.int64),
                    "meta": {
                        "id": np.int64,
                        "name": f.Text(),
                        "icon": f.Image(shape=(3, 2, 4), encoding_format="png"),
                    },
                    "steps": f.Sequence({"x": np.int64, "y": f.Text()}),
                    "image": f.Image(shape=(None, None, 3), encoding_format="png"),
                    "thumb": f.Image(shape=(6, 5, 3), encoding_format="png"),
                    "gray": f.Image(shape=(4, 7, 1), encoding_format="png"),
                    "photo": f.Image(shape=(16, 24, 3), encoding_format="jpeg"),
                }
            ),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(23), "test": self._generate_examples(7)}

    def _generate_examples(self, n):
        for i in range(n):
            yield i, {
                "label": i % 3,
                "score": ODD_FLOATS[i % len(ODD_FLOATS)],
                "flag": i % 2 == 0,
                "vec": [i, -1.5, ODD_FLOATS[(i + 3) % len(ODD_FLOATS)]],
                "small": [[i, -i], [2**31 - 1, -(2**31)]],
                "ragged": list(range(i % 4)) + [2**62] * (i % 2),
                "rows": np.array([[j, -j] for j in range(i % 3)], np.int32).reshape(-1, 2),
                "raw": np.full((2, 2), i, np.uint8),
                "text": f"text {i} é",
                "tokens": list(range(i % 5)),
                "meta": {"id": 1000 + i, "name": f"n{i}", "icon": pixels(i, 3, 2, 4)},
                "steps": [{"x": j, "y": f"s{j}"} for j in range(i % 3)],
                "image": png(i),
                "thumb": pixels(i, 6, 5, 3),
                "gray": pixels(i, 4, 7, 1),
                "photo": pixels(i, 16, 24, 3),
            }


def flat(prefix, value, out):
    if isinstance(value, dict):
        for key, v in value.items():
            flat(f"{prefix}/{key}" if prefix else key, v, out)
        return
    a = np.asarray(value)
    if a.dtype.kind == "f":
        out[prefix] = a.astype(np.float32).ravel().view(np.uint32).tolist()
    elif a.dtype.kind in "iub":
        out[prefix] = a.astype(np.int64).ravel().tolist()
    else:
        out[prefix] = [bytes(v).hex() for v in a.ravel()]


def main():
    cmd = sys.argv[1]
    if cmd == "make":
        tfds.disable_progress_bar()
        builder = Tiny(data_dir=sys.argv[2])
        # tfds prints its progress to stdout, where only the JSON line goes.
        with contextlib.redirect_stdout(sys.stderr):
            builder.download_and_prepare(
                download_config=tfds.download.DownloadConfig(num_shards=4)
            )
        print(json.dumps({"dir": os.fspath(builder.data_dir)}))
    elif cmd == "read":
        builder = tfds.builder_from_directory(sys.argv[2])
        ds = builder.as_dataset(
            split=sys.argv[3],
            shuffle_files=False,
            read_config=tfds.ReadConfig(interleave_cycle_length=1),
            # The image of unknown size stays encoded (infeed's spec of the
            # dataset gives its bytes); the others are decoded pixels.
            decoders={
                k: tfds.decode.SkipDecoding() for k in ("image",) if k in builder.info.features
            },
        )
        for example in tfds.as_numpy(ds):
            out = {}
            flat("", example, out)
            # The raw tensor comes back decoded: its bytes are its buffer.
            if "raw" in example:
                out["raw"] = [np.asarray(example["raw"], np.uint8).tobytes().hex()]
            print(json.dumps(out, sort_keys=True))
    else:
        sys.exit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main()
