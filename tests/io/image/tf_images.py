"""TensorFlow's pixels for tests/io/image/tf_images.rs.

Reads DIR/cases.json: a list of {"name", "file", "channels", "op", ...}
and prints one JSON line per case: {"name", "shape", "u8" or "f32"
(base64 of the array's bytes, little-endian)}.

op "decode": tf.io.decode_png (dtype uint8) or tf.io.decode_jpeg by the
file's format (checked by the Rust side), channels as given.
op "eval": decode_image, tf.image.resize to [rh, rw] (bilinear, no
antialias, half-pixel centers), then the [h, w] crop at (top, left): float32.
op "crop": decode_image, the window [y, x, ch, cw], resized to [h, w]: float32.
"""

import base64
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def main() -> None:
    folder = sys.argv[1]
    with open(os.path.join(folder, "cases.json")) as f:
        cases = json.load(f)
    for case in cases:
        with open(os.path.join(folder, case["file"]), "rb") as f:
            data = f.read()
        c = case["channels"]
        op = case["op"]
        if op == "decode":
            if data[:4] == b"\x89PNG":
                img = tf.io.decode_png(data, channels=c, dtype=tf.uint8)
            else:
                img = tf.io.decode_jpeg(data, channels=c)
            arr = img.numpy().astype(np.uint8)
            out = {"u8": base64.b64encode(arr.tobytes()).decode()}
        else:
            img = tf.io.decode_image(data, channels=c, expand_animations=False)
            img = tf.cast(img, tf.float32)
            if op == "eval":
                rh, rw, top, left, h, w = (case[k] for k in ("rh", "rw", "top", "left", "h", "w"))
                img = tf.image.resize(img, [rh, rw], method="bilinear", antialias=False)
                img = img[top : top + h, left : left + w]
            else:
                y, x, ch, cw, h, w = (case[k] for k in ("y", "x", "ch", "cw", "h", "w"))
                img = img[y : y + ch, x : x + cw]
                img = tf.image.resize(img, [h, w], method="bilinear", antialias=False)
            arr = img.numpy().astype("<f4")
            out = {"f32": base64.b64encode(arr.tobytes()).decode()}
        out["name"] = case["name"]
        out["shape"] = list(arr.shape)
        print(json.dumps(out))


if __name__ == "__main__":
    main()
