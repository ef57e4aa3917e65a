"""The installed wheel works on its own: run by scripts/wheel.sh in a fresh
venv with no Rust toolchain on PATH (not collected by pytest).

    python wheel_smoke.py TESTDATA_DIR
"""

from __future__ import annotations

import hashlib
import pathlib
import shutil
import sys

import numpy as np

import infeed


def digests(it: infeed.Iterator) -> list[str]:
    return [
        hashlib.sha256(b"".join(a.tobytes() for _, a in sorted(batch.items()))).hexdigest()
        for batch in it
    ]


def main() -> None:
    testdata = pathlib.Path(sys.argv[1])
    assert shutil.which("cargo") is None and shutil.which("rustc") is None, "Rust on PATH"
    here = pathlib.Path(infeed.__file__).resolve()
    assert "site-packages" in here.parts, f"infeed imported from {here}, not the wheel"
    pipeline = (
        infeed.Pipeline.from_files([testdata / "lm-sample.tfrecord.gz"])
        .seed(3)
        .shuffle(64)
        .repeat(2)
        .parse({"input_ids": infeed.VarLen("int64"), "attention_mask": infeed.VarLen("int64")})
        .pad_to_multiple_of(64)
        .max_length(512)
        .cast("int32")
        .batch(16, drop_remainder=True)
    )
    shapes = pipeline.shapes()
    assert len(shapes) == 8, shapes  # lengths 64, 128, ..., 512
    whole = digests(pipeline.iter())
    assert len(whole) == 2 * 256 // 16, len(whole)
    it = pipeline.iter()
    first = next(it)
    ids = first["input_ids"]
    assert ids.dtype == np.int32 and ids.shape[0] == 16 and ids.shape[1] % 64 == 0, ids.shape
    assert {k: (v.shape, v.dtype) for k, v in first.items()} in [
        {k: (dims, dtype) for k, (dims, dtype) in s.items()} for s in shapes
    ]
    for _ in range(4):
        next(it)
    state = it.get_state()
    it.close()
    rest = digests(pipeline.iter(state))
    assert rest == whole[5:], "a restored iterator continues with the same batches"
    print(f"wheel smoke: infeed {infeed.__version__} from {here.parent}: {len(whole)} batches,")
    print(f"  {len(shapes)} shapes, restore after 5 batches exact ({len(state)} bytes of state)")


if __name__ == "__main__":
    main()
