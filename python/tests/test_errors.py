"""Rust errors arrive as infeed.Error subclasses with their fields."""

from __future__ import annotations

from typing import Any

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


def _lm(step: str, value: int) -> infeed.Pipeline:
    """The lm pipeline with one numeric setting given ``value``."""
    p = infeed.Pipeline.from_files([LM])
    if step in ("shuffle", "prefetch", "threads", "skip", "take", "repeat", "seed", "streams"):
        p = getattr(p, step)(value)
    elif step == "interleave":
        p = p.interleave(value)
    if step == "pack":
        return p.parse(LM_SPEC).pack(value).batch(4)
    parsed = p.parse(LM_SPEC).max_length(512)
    if step == "batch":
        return parsed.batch(value)
    if step in ("max_length", "fixed_length", "pad_to_multiple_of"):
        parsed = infeed.Pipeline.from_files([LM]).parse(LM_SPEC)
        if step == "pad_to_multiple_of":
            parsed = parsed.max_length(512)
        return getattr(parsed, step)(value).batch(4)
    return parsed.batch(4)


NUMERIC = [
    "batch",
    "shuffle",
    "prefetch",
    "threads",
    "interleave",
    "skip",
    "take",
    "repeat",
    "seed",
    "streams",
    "max_length",
    "fixed_length",
    "pad_to_multiple_of",
    "pack",
]


# Where each setting of NUMERIC sits in the description (what its errors name).
PLACE = {
    "batch": ".batch.size",
    "shuffle": ".shuffle.buffer",
    "prefetch": "options.prefetch",
    "threads": "options.threads",
    "interleave": ".interleave.cycle_length",
    "skip": ".skip.records",
    "take": ".take.records",
    "repeat": ".repeat.epochs",
    "seed": "options.seed",
    "streams": "options.streams",
    "max_length": ".max_length.length",
    "fixed_length": ".fixed_length.length",
    "pad_to_multiple_of": ".pad_to_multiple_of.multiple",
    "pack": ".pack.row_length",
}


@pytest.mark.parametrize("step", NUMERIC)
def test_a_negative_number_is_a_spec_error_naming_the_setting(step: str) -> None:
    with pytest.raises(infeed.SpecError) as e:
        _lm(step, -1).shapes()
    assert PLACE[step] in str(e.value) and "`-1`" in str(e.value), str(e.value)


def test_absurd_sizes_are_clean_errors_or_correct_runs() -> None:
    """Every numeric setting given absurd values, in a child process limited
    to 4 GB of address space: a SpecError naming the value, or a run that
    ends — never an abort, a panic or runaway memory."""
    script = f"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4_000_000_000, 4_000_000_000))
sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
import infeed
from test_errors import _lm, NUMERIC, PLACE
outcomes = []
for step in NUMERIC:
    for value in [0, 2**32, 10**12, 2**40, 2**63 - 1, 2**64 - 1, 2**64]:
        try:
            it = iter(_lm(step, value))
            for _ in range(3):
                next(it, None)
            outcomes.append(f"{{step}}={{value}}: ran")
        except infeed.SpecError as e:
            named = (
                str(value) in str(e)
                or (value == 0 and "at least 1" in str(e))
                # Past 2**64 - 1: not a whole number the description holds.
                or (value == 2**64 and PLACE[step] in str(e))
            )
            assert named, (step, value, str(e))
            outcomes.append(f"{{step}}={{value}}: {{type(e).__name__}}")
print("\\n".join(outcomes))
"""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert len(lines) == len(NUMERIC) * 7
    assert "batch=4294967296: SpecError" in lines
    assert "shuffle=1000000000000: ran" in lines
    assert "pad_to_multiple_of=18446744073709551615: ran" in lines


def test_map_batch_must_return_a_dict_of_arrays() -> None:
    base = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).max_length(512).batch(2)

    def nothing(batch: Any) -> Any:
        return None

    def with_int(batch: Any) -> Any:
        return {**batch, "n": 3}

    with pytest.raises(infeed.MapError, match="nothing: returned NoneType, not a dict"):
        next(iter(base.map_batch(nothing)))
    with pytest.raises(infeed.MapError, match="entry 'n' is a int, not an array") as e:
        next(iter(base.map_batch(with_int)))
    assert e.value.feature == "n"


def test_words_take_either_spelling_and_an_unknown_word_lists_them() -> None:
    def first(truncation: str) -> list[int]:
        p = (
            infeed.Pipeline.from_files([LM])
            .parse(LM_SPEC)
            .max_length(64)
            .truncation(truncation)
            .batch(2)
        )
        return next(iter(p))["input_ids"].tolist()

    assert first("keep-start") == first("keep_start") != first("keep_end")
    with pytest.raises(infeed.SpecError) as e:
        first("keep")
    assert str(e.value).endswith('truncation "keep": expected error, keep_start or keep_end')
    with pytest.raises(infeed.SpecError, match='equal_batches "all": expected drop or pad'):
        infeed.Pipeline.from_files([LM]).equal_batches("all").parse(LM_SPEC).batch(2).shapes()
