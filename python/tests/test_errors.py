"""Rust errors arrive as infeed.Error subclasses with their fields."""

from __future__ import annotations

import pytest
from conftest import LM, LM_SPEC, TESTDATA, expected, values

import infeed


def test_corrupt_record_names_file_and_offset():
    p = (
        infeed.Pipeline.from_files([TESTDATA / "corrupt.tfrecord"])
        .parse({"label": infeed.FixedLen([], "int64", default=-1)})
        .batch(1)
    )
    it = iter(p)
    assert next(it)["label"].tolist() == [0]
    assert next(it)["label"].tolist() == [1]
    with pytest.raises(infeed.CorruptRecordError) as e:
        next(it)
    assert isinstance(e.value, infeed.Error)
    assert e.value.path is not None and e.value.path.endswith("corrupt.tfrecord")
    assert e.value.offset == 117  # record 2's header (testdata/README.md)
    assert "data CRC mismatch" in str(e.value)
    # The pipeline is over after an error.
    with pytest.raises(StopIteration):
        next(it)


def test_skip_corrupt_reads_the_rest():
    records = expected("corrupt.tfrecord")
    p = (
        infeed.Pipeline.from_files([TESTDATA / "corrupt.tfrecord"])
        .read_options(skip_corrupt=True)
        .parse({"label": infeed.FixedLen([], "int64", default=-1)})
        .batch(4)
    )
    (batch,) = list(p)
    assert (
        batch["label"].tolist()
        == [values(r, "label")[0] if "label" in r else -1 for r in records]
        == [0, 1, -1, 4]
    )


def test_record_not_matching_the_spec_names_the_feature():
    p = (
        infeed.Pipeline.from_files([LM])
        .parse({"input_ids": infeed.VarLen("float32")})
        .max_length(512)
        .batch(4)
    )
    with pytest.raises(infeed.ParseError) as e:
        next(iter(p))
    assert e.value.path is not None and e.value.path.endswith("lm-sample.tfrecord")
    assert e.value.offset == 0
    assert e.value.feature == "input_ids"
    assert e.value.record == 0
    assert isinstance(e.value, ValueError)


def test_missing_required_feature():
    p = infeed.Pipeline.from_files([LM]).parse({"label": infeed.FixedLen([], "int64")}).batch(2)
    with pytest.raises(infeed.ParseError) as e:
        next(iter(p))
    assert e.value.feature == "label"


def test_too_long_row_under_error_truncation():
    p = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).max_length(8).batch(256)
    with pytest.raises(infeed.BatchError) as e:
        next(iter(p))
    assert e.value.feature in ("input_ids", "attention_mask")
    assert e.value.path is not None and e.value.path.endswith("lm-sample.tfrecord")


def test_spec_errors():
    with pytest.raises(infeed.SpecError) as e:
        infeed.Pipeline.from_files([LM]).parse("input_ids:var_len:int8").batch(2).shapes()
    assert e.value.feature == "input_ids:var_len:int8"
    with pytest.raises(infeed.SpecError) as e:
        infeed.Pipeline.from_files([LM]).parse(LM_SPEC).batch(2).shapes()
    assert e.value.feature == "input_ids"  # unbounded: no max_length
    with pytest.raises(infeed.SpecError):
        infeed.Pipeline.from_files([LM]).parse(LM_SPEC).max_length(8).cast("int8").shapes()
    with pytest.raises(infeed.SpecError):
        infeed.Pipeline.from_files([LM]).batch(2).shapes()  # no parse
    with pytest.raises(infeed.SpecError):
        infeed.Pipeline.from_files([LM]).equal_batches("most").parse(LM_SPEC).shapes()
    with pytest.raises(TypeError):
        infeed.Pipeline.from_files([LM]).parse({"a": "int64"})  # type: ignore[dict-item]


def test_source_errors():
    with pytest.raises(infeed.SourceError) as e:
        infeed.Pipeline.from_glob(str(TESTDATA / "nothing-*.tfrecord"))
    assert e.value.path is not None and "nothing-*" in e.value.path
    assert isinstance(e.value, OSError)
    it = iter(
        infeed.Pipeline.from_files([TESTDATA / "absent.tfrecord"])
        .parse("a:var_len:int64")
        .max_length(4)
        .batch(1)
    )
    with pytest.raises(infeed.SourceError) as e:
        next(it)
    assert e.value.path is not None and e.value.path.endswith("absent.tfrecord")


def test_an_exception_in_map_batch_propagates():
    def boom(batch):
        raise RuntimeError("boom")

    p = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).max_length(512).batch(2).map_batch(boom)
    with pytest.raises(RuntimeError, match="boom"):
        next(iter(p))
