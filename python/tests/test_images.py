"""Image features from Python: uint8 [B, H, W, C] batches, the spec forms,
normalize (float32 and bfloat16), determinism and ImageError. The records
and PNGs are written here (pure Python: records.py and zlib)."""

from __future__ import annotations

import pathlib
import struct
import zlib

import ml_dtypes
import numpy as np
import pytest
from records import example, write_tfrecord

import infeed


def _example(image: bytes, label: int) -> bytes:
    """A tf.train.Example with ``image`` (bytes) and ``label`` (int64)."""
    return example({"image": [image], "label": [label]})


def _png(pixels: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of ``pixels`` [H, W, 3]."""
    h, w, _ = pixels.shape
    raw = b"".join(b"\0" + pixels[y].tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _pixels(h: int, w: int, seed: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y + seed) % 256], -1)
    return img.astype(np.uint8)


@pytest.fixture
def images(tmp_path: pathlib.Path) -> tuple[pathlib.Path, list[np.ndarray], list[int]]:
    pixels = [_pixels(6, 8, i) for i in range(6)]
    path = tmp_path / "images.tfrecord"
    offsets = write_tfrecord(path, [_example(_png(p), i) for i, p in enumerate(pixels)])
    return path, pixels, offsets


def test_fixed_pngs_come_out_as_uint8_bhwc_pixels(images) -> None:
    path, pixels, _ = images
    p = (
        infeed.Pipeline.from_files([path])
        .parse({"image": infeed.Image(6, 8, 3), "label": infeed.FixedLen([], "int64")})
        .batch(3)
    )
    assert p.shapes()[0]["image"] == ((3, 6, 8, 3), np.dtype("uint8"))
    batches = [b["image"].copy() for b in p]
    assert len(batches) == 2
    np.testing.assert_array_equal(np.concatenate(batches), np.stack(pixels))


def test_train_crops_from_the_spec_string_are_the_same_at_any_thread_count(images) -> None:
    path, _, _ = images

    def run(threads: int, seed: int) -> np.ndarray:
        p = (
            infeed.Pipeline.from_files([path])
            .seed(seed)
            .threads(threads)
            .parse("image:image[4,4,3]:train+flip,label:fixed_len[]:int64")
            .batch(2)
        )
        return np.concatenate([b["image"].copy() for b in p])

    one = run(1, 5)
    assert one.shape == (6, 4, 4, 3) and one.dtype == np.uint8
    np.testing.assert_array_equal(run(2, 5), one)
    assert not np.array_equal(run(1, 6), one)


def test_normalize_gives_float32_or_bfloat16(images) -> None:
    path, pixels, _ = images
    base = infeed.Pipeline.from_files([path]).parse({"image": infeed.Image(6, 8, 3)}).batch(6)
    mean, std = [100.0, 120.0, 140.0], [50.0, 60.0, 70.0]
    (f32,) = list(base.normalize("image", mean, std))
    m, s = np.asarray(mean, np.float32), np.asarray(std, np.float32)
    expected = (np.stack(pixels).astype(np.float32) - m) / s
    assert f32["image"].dtype == np.float32
    np.testing.assert_array_equal(f32["image"], expected)
    bf = base.normalize("image", 127.5, 127.5, dtype="bfloat16")
    assert bf.shapes()[0]["image"][1] == np.dtype(ml_dtypes.bfloat16)
    (b16,) = list(bf)
    assert b16["image"].dtype == ml_dtypes.bfloat16
    want = ((np.stack(pixels).astype(np.float32) - 127.5) / 127.5).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(b16["image"], want)
    with pytest.raises(infeed.SpecError, match="mean has 2 values"):
        base.normalize("image", [1.0, 2.0], 1.0).shapes()


def test_a_corrupt_image_is_an_image_error_naming_file_offset_and_feature(tmp_path) -> None:
    good = _png(_pixels(6, 8, 0))
    path = tmp_path / "bad.tfrecord"
    offsets = write_tfrecord(path, [_example(good, 0), _example(good[:40], 1)])
    p = infeed.Pipeline.from_files([path]).parse({"image": infeed.Image(6, 8, 3)}).batch(2)
    with pytest.raises(infeed.ImageError) as e:
        list(p)
    assert e.value.path == str(path)
    assert e.value.offset == offsets[1]
    assert e.value.record == 1
    assert e.value.feature == "image"
    assert "corrupt or truncated PNG" in str(e.value)
    with pytest.raises(infeed.SpecError, match="needs resize=S"):
        infeed.Pipeline.from_files([path]).parse({"image": infeed.Image(6, 8, 3, mode="eval")})


def test_skip_corrupt_leaves_out_a_record_whose_image_does_not_decode(tmp_path) -> None:
    images = [_pixels(6, 8, i) for i in range(3)]
    path = tmp_path / "some-bad.tfrecord"
    bad = _png(images[1])[:40]
    records = [_example(_png(images[0]), 0), _example(bad, 1), _example(_png(images[2]), 2)]
    write_tfrecord(path, records)
    p = (
        infeed.Pipeline.from_files([path])
        .read_options(skip_corrupt=True)
        .parse({"image": infeed.Image(6, 8, 3), "label": infeed.FixedLen([], "int64")})
        .batch(3)
    )
    it = iter(p)
    [batch] = list(it)
    # The shape stays; the good rows move up and the last row is padding.
    assert batch["image"].shape == (3, 6, 8, 3)
    assert it.real_rows == 2
    np.testing.assert_array_equal(batch["image"][:2], np.stack([images[0], images[2]]))
    assert batch["label"][:2].tolist() == [0, 2]
    assert "skipped_records: 1, skipped_bytes: 40," in str(it.stats()["batch"])
