"""The builder: shapes, dtypes and values against what TensorFlow wrote."""

from __future__ import annotations

import base64
import threading

import numpy as np
import pytest
from conftest import LM, LM_SPEC, TESTDATA, expected, lm_pipeline, values

import infeed


def test_shapes_listed_before_the_first_batch():
    shapes = lm_pipeline().shapes()
    assert len(shapes) == 8
    for i, shape in enumerate(shapes):
        length = 64 * (i + 1)
        assert shape == {
            "input_ids": ((16, length), np.dtype("int32")),
            "input_ids_mask": ((16, length), np.dtype("int32")),
            "attention_mask": ((16, length), np.dtype("int32")),
            "attention_mask_mask": ((16, length), np.dtype("int32")),
        }


def test_every_batch_has_a_listed_shape():
    shapes = lm_pipeline().shapes()
    seen = 0
    for batch in lm_pipeline():
        got = {k: (v.shape, v.dtype) for k, v in batch.items()}
        assert got in shapes
        seen += 1
    assert seen == 3 * 256 // 16


@pytest.mark.parametrize("name", ["lm-sample.tfrecord", "lm-sample.tfrecord.gz"])
def test_values_are_what_tensorflow_wrote(name, lm_records):
    p = (
        infeed.Pipeline.from_glob(str(TESTDATA / name))
        .parse(LM_SPEC)
        .pad_to_multiple_of(64)
        .max_length(512)
        .batch(32, drop_remainder=False)
    )
    row = 0
    for batch in p:
        ids, mask = batch["input_ids"], batch["input_ids_mask"]
        assert ids.dtype == np.int64 and ids.shape[0] == 32
        assert ids.shape[1] % 64 == 0
        for r in range(32):
            want = values(lm_records[row], "input_ids")
            n = len(want)
            assert ids[r, :n].tolist() == want
            assert not ids[r, n:].any()
            assert mask[r].tolist() == [1] * n + [0] * (ids.shape[1] - n)
            assert batch["attention_mask"][r, :n].tolist() == values(
                lm_records[row], "attention_mask"
            )
            row += 1
    assert row == 256


def test_spec_string_is_the_same_spec():
    a = lm_pipeline(shuffle=False, repeat=False)
    b = (
        infeed.Pipeline.from_files([LM])
        .parse("input_ids:var_len:int64,attention_mask:var_len:int64")
        .pad_to_multiple_of(64)
        .max_length(512)
        .cast("int32")
        .batch(16)
    )
    assert a.shapes() == b.shapes()
    for x, y in zip(a, b, strict=True):
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])


def test_fixed_len_and_defaults_and_floats():
    records = expected("examples.tfrecord")
    p = (
        infeed.Pipeline.from_files([TESTDATA / "examples.tfrecord"])
        .parse(
            {
                "label": infeed.FixedLen([], "int64"),
                "embedding": infeed.FixedLen([4], np.float32),
                "missing": infeed.FixedLen([2], "int64", default=-5),
                "tokens": infeed.VarLen("int64"),
            }
        )
        .fixed_length(8)
        .truncation("keep_start")
        .batch(6)
    )
    assert p.shapes() == [
        {
            "label": ((6,), np.dtype("int64")),
            "embedding": ((6, 4), np.dtype("float32")),
            "missing": ((6, 2), np.dtype("int64")),
            "tokens": ((6, 8), np.dtype("int64")),
            "tokens_mask": ((6, 8), np.dtype("int64")),
        }
    ]
    (batch,) = list(p)
    assert batch["label"].tolist() == [values(r, "label")[0] for r in records]
    want = np.array([values(r, "embedding") for r in records], dtype=np.float32)
    assert batch["embedding"].tobytes() == want.tobytes()  # bit-exact, -0.0 included
    assert batch["missing"].tolist() == [[-5, -5]] * 6
    for r, rec in enumerate(records):
        toks = values(rec, "tokens")[:8]
        assert batch["tokens"][r, : len(toks)].tolist() == toks
        assert batch["tokens_mask"][r].sum() == len(toks)


def test_decode_raw_bytes_and_its_error():
    # corrupt.tfrecord's texts: b"record zero" (11 bytes), b"record one" (10), ...
    records = expected("corrupt.tfrecord")
    p = (
        infeed.Pipeline.from_files([TESTDATA / "corrupt.tfrecord"])
        .read_options(skip_corrupt=True)
        .parse({"text": infeed.FixedLen([], "bytes")})
        .decode_raw("text", [11])
        .batch(1)
    )
    assert p.shapes() == [{"text": ((1, 11), np.dtype("uint8"))}]
    it = iter(p)
    first = next(it)["text"]
    assert first.tobytes() == base64.b64decode(values(records[0], "text")[0])
    with pytest.raises(infeed.BatchError) as e:
        next(it)
    assert e.value.path is not None and e.value.path.endswith("corrupt.tfrecord")
    assert e.value.offset == 59  # record 1's header (testdata/README.md)
    assert e.value.feature == "text"


def test_bucket_by_length_shapes_and_rows():
    p = (
        infeed.Pipeline.from_files([LM])
        .parse(LM_SPEC)
        .max_length(512)
        .cast("int32")
        .bucket_by_length("input_ids", [64, 128, 256], [32, 16, 8, 4])
        .drop_remainder(True)
    )
    shapes = p.shapes()
    assert sorted(s["input_ids"][0] for s in shapes) == [(4, 512), (8, 256), (16, 128), (32, 64)]
    for batch in p:
        rows, length = batch["input_ids"].shape
        lengths = batch["input_ids_mask"].sum(axis=1)
        assert {64: 32, 128: 16, 256: 8, 512: 4}[length] == rows
        assert lengths.max() <= length and lengths.min() > length // 2 or length == 64


def test_pack_gives_segment_ids_and_positions(lm_records):
    p = (
        infeed.Pipeline.from_files([LM])
        .parse(LM_SPEC)
        .cast("int32")
        .pack(512)
        .pack_overflow("split")
        .batch(8, drop_remainder=False)
    )
    (shape,) = p.shapes()
    assert set(shape) == {
        "input_ids",
        "input_ids_mask",
        "attention_mask",
        "attention_mask_mask",
        "segment_ids",
        "positions",
    }
    total = 0
    for batch in p:
        seg, pos = batch["segment_ids"], batch["positions"]
        assert seg.shape == (8, 512)
        real = seg > 0
        total += int(real.sum())
        # positions restart at 0 at every new segment
        starts = real & (pos == 0)
        for r in range(8):
            assert starts[r].sum() == len(set(seg[r][real[r]].tolist()))
    assert total == sum(len(values(r, "input_ids")) for r in lm_records)


def test_pack_strategies_pad_less_and_concat_split_not_at_all(lm_records):
    def packed(strategy, max_segments=None):
        return (
            infeed.Pipeline.from_files([LM])
            .parse(LM_SPEC)
            .cast("int32")
            .pack(512, strategy=strategy, max_segments=max_segments)
            .pack_overflow("split")
            .batch(8, drop_remainder=False)
        )

    tokens = sum(len(values(r, "input_ids")) for r in lm_records)
    padding = {}
    for strategy in ("first_fit", "best_fit", "concat_split"):
        batches = list(packed(strategy))
        seg = np.stack([b["segment_ids"] for b in batches])
        assert int((seg > 0).sum()) == tokens, strategy
        padding[strategy] = int((seg == 0).sum())
        if strategy == "concat_split":
            # Padding only in the last batch.
            assert (seg[:-1] > 0).all()
    assert padding["concat_split"] < padding["best_fit"] <= padding["first_fit"]
    # At most two segments a row.
    for batch in packed("concat_split", max_segments=2):
        assert batch["segment_ids"].max() <= 2
    with pytest.raises(infeed.SpecError, match="expected first_fit, best_fit or concat_split"):
        packed("best").shapes()
    with pytest.raises(infeed.SpecError, match="max_segments"):
        packed("first_fit", max_segments=-1).shapes()


def test_inputs_targets_shift_within_segments():
    def packed():
        return (
            infeed.Pipeline.from_files([LM])
            .parse(LM_SPEC)
            .cast("int32")
            .pack(512, strategy="concat_split")
            .batch(8, drop_remainder=False)
        )

    plain = list(packed())
    made = list(packed().inputs_targets("input_ids", bos=-1))
    assert len(plain) == len(made)
    for p, m in zip(plain, made, strict=True):
        assert "input_ids" not in m and "input_ids_mask" not in m
        np.testing.assert_array_equal(m["targets"], p["input_ids"])
        np.testing.assert_array_equal(m["targets_mask"], p["input_ids_mask"])
        seg = p["segment_ids"]
        starts = np.ones_like(seg, dtype=bool)
        starts[:, 1:] = seg[:, 1:] != seg[:, :-1]
        expected = np.where(starts, -1, np.roll(p["input_ids"], 1, axis=1))
        expected = np.where(seg == 0, p["input_ids"], expected)
        np.testing.assert_array_equal(m["inputs"], expected)
    with pytest.raises(infeed.SpecError, match='inputs_targets\\("nope"\\)'):
        packed().inputs_targets("nope").shapes()


def test_map_batch_runs_in_order_on_each_batch():
    threads = set()

    def add_lengths(batch):
        threads.add(threading.get_ident())
        batch = dict(batch)
        batch["lengths"] = batch["input_ids_mask"].sum(axis=1)
        return batch

    plain = [b["input_ids_mask"].sum(axis=1) for b in lm_pipeline()]
    mapped = [b["lengths"] for b in lm_pipeline().map_batch(add_lengths)]
    assert len(plain) == len(mapped) == 48
    for a, b in zip(plain, mapped, strict=True):
        np.testing.assert_array_equal(a, b)
    # On the thread that iterates (as its docs say), not on the engine's.
    assert threads == {threading.get_ident()}


def test_same_seed_same_batches_any_threads():
    a = [b["input_ids"].copy() for b in lm_pipeline(seed=3).threads(1)]
    b = [b["input_ids"].copy() for b in lm_pipeline(seed=3).threads(2)]
    c = [b["input_ids"].copy() for b in lm_pipeline(seed=4)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_shard_and_equal_batches():
    def host(i):
        return (
            infeed.Pipeline.from_files([LM])
            .shard(i, 3)
            .equal_batches("drop")
            .parse(LM_SPEC)
            .max_length(512)
            .batch(10)
        )

    counts = [sum(1 for _ in host(i)) for i in range(3)]
    # 256 records over 3 hosts: 86, 85, 85 -> 8 full batches each
    assert counts == [8, 8, 8]
    # Each host's record account: what it read is delivered or left out.
    for i in range(3):
        with host(i).iter() as it:
            batches = sum(1 for _ in it)
            account = it.figures()["record_account"]
        assert batches == 8
        assert account["delivered"] == 80
        assert account["read"] == 80 + sum(account["left_out"].values())
        assert set(account["left_out"]) == {
            "dropped", "sliced", "skipped_steps", "filtered", "corrupt", "empty", "mixture_end"
        }


def test_pad_delivers_every_record_across_hosts():
    def host(i):
        return (
            infeed.Pipeline.from_files([LM])
            .shard(i, 3)
            .seed(2)
            .equal_batches("pad")
            .parse(LM_SPEC)
            .pad_to_multiple_of(64)
            .max_length(512)
            .batch(10, drop_remainder=True)
        )

    read = delivered = 0
    for i in range(3):
        with host(i).iter() as it:
            rows = sum(int(b["input_ids_mask"].any(axis=1).sum()) for b in it)
            account = it.figures()["record_account"]
        assert account["delivered"] == rows
        read += account["read"]
        delivered += account["delivered"]
    assert (read, delivered) == (256, 256)


def test_builder_is_immutable():
    base = infeed.Pipeline.from_files([LM])
    a = base.take(10).parse(LM_SPEC).max_length(512).batch(5)
    b = base.take(20).parse(LM_SPEC).max_length(512).batch(5)
    assert sum(1 for _ in a) == 2
    assert sum(1 for _ in b) == 4


def labels(p: infeed.Pipeline) -> list[int]:
    return [int(x) for b in p for x in b["label"]]


EX = [TESTDATA / "examples.tfrecord", TESTDATA / "examples.tfrecord.gz"]
LABEL = {"label": infeed.FixedLen([], "int64")}


def test_record_level_words_keep_their_meaning():
    w = [values(r, "label")[0] for r in expected("examples.tfrecord")]
    assert len(w) == 6 and len(set(w)) == 6

    def run(p):
        return labels(p.parse(LABEL).batch(1))

    def at(*indices):
        return [w[i] for i in indices]

    base = infeed.Pipeline.from_files(EX)
    assert run(base) == w + w
    # 2 files at once, 2 records from each in turn
    assert run(base.interleave(2, 2)) == at(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5)
    assert run(base.interleave(2)) == [x for x in w for _ in range(2)]
    # skip/take count records of each epoch
    assert run(base.skip(4)) == at(4, 5, 0, 1, 2, 3, 4, 5)
    assert run(base.take(3).repeat(2)) == at(0, 1, 2, 0, 1, 2)
    # host sharding with two files: one file each
    assert run(base.shard(1, 2)) == w
    # shuffles keep the records, and a seed decides the order
    shuffled = run(base.seed(5).shuffle(12).repeat(3))
    assert sorted(shuffled) == sorted((w + w) * 3)
    assert shuffled == run(base.seed(5).shuffle(12).repeat(3))
    assert shuffled != run(base.seed(6).shuffle(12).repeat(3))
    files = run(infeed.Pipeline.from_files(EX * 4).seed(1).shuffle_files().repeat(2))
    assert sorted(files) == sorted(w * 16)
    # unordered, threads and prefetch change no record
    fast = run(base.repeat(20).unordered().threads(2).prefetch(4))
    assert sorted(fast) == sorted((w + w) * 20)


def test_read_options_compression():
    w = [values(r, "label")[0] for r in expected("examples.tfrecord")]
    p = infeed.Pipeline.from_files([TESTDATA / "examples.tfrecord.zz"]).parse(LABEL).batch(6)
    assert labels(p) == w
    forced = (
        infeed.Pipeline.from_files([TESTDATA / "examples.tfrecord.gz"])
        .read_options(compression="none")
        .parse(LABEL)
        .batch(6)
    )
    with pytest.raises(infeed.CorruptRecordError):
        labels(forced)
    with pytest.raises(infeed.SpecError):
        infeed.Pipeline.from_files(EX).read_options(compression="lz4").parse(LABEL).shapes()


def test_read_options_mmap_reads_the_same():
    w = [values(r, "label")[0] for r in expected("examples.tfrecord")]
    for name in ("examples.tfrecord", "examples.tfrecord.gz"):
        p = infeed.Pipeline.from_files([TESTDATA / name]).parse(LABEL).batch(6)
        assert labels(p) == w
        assert labels(p.read_options(mmap=True)) == w


def test_source_options_are_accepted_and_checked():
    w = [values(r, "label")[0] for r in expected("examples.tfrecord")]
    p = infeed.Pipeline.from_files([TESTDATA / "examples.tfrecord"]).parse(LABEL).batch(6)
    tuned = p.source_options(
        max_retries=2,
        retry_timeout=30,
        request_timeout=5.5,
        retry_backoff=0.05,
        max_backoff=1,
        chunk_size=1 << 20,
        readahead=2,
        retry_unknown_errors=True,
    )
    assert labels(tuned) == w
    assert labels(p.source_options(max_retries=0)) == w
    # Checked by the engine's reading of the description, naming the place.
    with pytest.raises(infeed.SpecError, match=r"options.source.max_retries: .*`-1`"):
        p.source_options(max_retries=-1)
    with pytest.raises(infeed.SpecError, match="max_retries"):
        p.source_options(max_retries=1.5)  # type: ignore[arg-type]
    with pytest.raises(infeed.SpecError, match="retry_timeout: -1 is not a time"):
        p.source_options(retry_timeout=-1)
    with pytest.raises(infeed.SpecError, match="request_timeout"):
        p.source_options(request_timeout=float("nan"))
    # Checked when the pipeline starts, with the other sizes.
    with pytest.raises(infeed.SpecError, match="readahead"):
        labels(p.source_options(readahead=0))
    with pytest.raises(TypeError):
        p.source_options(3)  # type: ignore[call-arg]
    # Also a ValueError, as the other description errors are.
    with pytest.raises(ValueError):
        p.source_options(chunk_size=-5)


def test_mask_dtypes_and_no_masks():
    u8 = lm_pipeline().masks(bool).shapes()[0]
    assert u8 == {
        "input_ids": ((16, 64), np.dtype("int32")),
        "input_ids_mask": ((16, 64), np.dtype("uint8")),
        "attention_mask": ((16, 64), np.dtype("int32")),
        "attention_mask_mask": ((16, 64), np.dtype("uint8")),
    }
    none = lm_pipeline().masks(None).shapes()[0]
    assert none == {
        "input_ids": ((16, 64), np.dtype("int32")),
        "attention_mask": ((16, 64), np.dtype("int32")),
    }
    one = lm_pipeline().masks(None).mask("input_ids", "uint8").shapes()[0]
    assert sorted(one) == ["attention_mask", "input_ids", "input_ids_mask"]
    batch = next(iter(lm_pipeline().masks("uint8")))
    # The u8 mask is 1 exactly where the sample's attention_mask is.
    assert batch["input_ids_mask"].dtype == np.uint8
    np.testing.assert_array_equal(batch["input_ids_mask"], batch["attention_mask"].astype(np.uint8))
    assert "input_ids_mask" not in next(iter(lm_pipeline().masks(None)))


def test_positions_name_each_rows_record(lm_records):
    # The sample's records in file order: row i of an unshuffled pipeline
    # is record i, at the offsets its frames have.
    offsets, at = [], 0
    with open(LM, "rb") as f:
        data = f.read()
    while at < len(data):
        offsets.append(at)
        (length,) = np.frombuffer(data[at : at + 8], dtype="<u8")
        at += int(length) + 16
    it = (
        infeed.Pipeline.from_files([LM])
        .parse(LM_SPEC)
        .max_length(512)
        .batch(100, drop_remainder=False)
        .iter()
    )
    seen: list[tuple[str, int]] = []
    for _ in it:
        rows = it.positions()
        assert len(rows) == 100
        seen.extend(r for r in rows if r is not None)
        assert all(r is None for r in rows[it.real_rows :])
    assert seen == [(str(LM), o) for o in offsets]
    # Packed rows list their sequences.
    packed = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).pack(1024).batch(4).iter()
    next(packed)
    rows = packed.positions()
    assert all(isinstance(r, list) and r for r in rows)
    assert rows[0][0] == (str(LM), 0)


def test_records_of_names_the_rows_each_process_delivered():
    def host(i: int, n: int, packed: bool = False) -> infeed.Pipeline:
        p = (
            infeed.Pipeline.from_files([LM, str(LM) + ".gz"])
            .shard(i, n)
            .streams(4)
            .seed(3)
            .shuffle(32)
            .parse(LM_SPEC)
        )
        if packed:
            return p.pack(512).batch(8 // n, drop_remainder=False)
        return p.max_length(512).batch(8 // n, drop_remainder=False)

    for packed in (False, True):
        per_host = []
        for i in range(2):
            it = host(i, 2, packed).iter()
            per_host.append([it.positions() for _ in it])
        steps = len(per_host[0])
        found = host(1, 2, packed).records_of([0, 3, steps - 1])
        for step in (0, 3, steps - 1):
            assert found[step] == per_host[0][step] + per_host[1][step], (packed, step)


def test_record_indexes_of_positions(tmp_path):
    # Unshuffled: row i is record i of the sample, read from its index or
    # from the file when it has none.
    it = (
        infeed.Pipeline.from_files([LM])
        .parse(LM_SPEC)
        .max_length(512)
        .batch(64, drop_remainder=False)
        .iter()
    )
    positions = [r for _ in it for r in it.positions() if r is not None]
    assert infeed.record_indexes(positions) == list(range(256))
    infeed.build_index([LM], output=tmp_path)
    assert infeed.record_indexes(positions[:3], index_dir=tmp_path) == [0, 1, 2]
    assert infeed.record_indexes([(str(LM), 5)]) == [None]
