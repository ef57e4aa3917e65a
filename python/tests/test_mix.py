"""Mixtures: Pipeline.mix of two corpora 3:1, the ratio in every stratified
batch, a restore in a fresh process with the same batches, and a restore with
weights 1:1 that then hold."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import LM, LM_SPEC, TESTDATA, as_lists, assert_same_batches, expected, values

import infeed

# Two corpora from the sample: its first 128 records ("web") and its last 128
# ("code", from the GZIP copy), each shuffled and repeated on its own.
MIXED = """
import infeed
LM = {lm!r}
SPEC = {{"input_ids": infeed.VarLen("int64"), "attention_mask": infeed.VarLen("int64")}}

def mixed(web, code):
    return (
        infeed.Pipeline.mix(
            {{
                "web": infeed.Pipeline.from_files([LM]).take(128).seed(1).shuffle(32).repeat(),
                "code": (infeed.Pipeline.from_files([LM + ".gz"]).skip(128).seed(2)
                         .shuffle(32).repeat()),
            }},
            weights={{"web": web, "code": code}},
            by="stratified",
        )
        .seed(5)
        .parse(SPEC)
        .pad_to_multiple_of(64)
        .max_length(512)
        .cast("int32")
        .batch(16)
    )
"""

ns: dict = {}
exec(MIXED.format(lm=str(LM)), ns)
mixed = ns["mixed"]


def record_index() -> dict[tuple[int, ...], int]:
    return {
        tuple(values(r, "input_ids")): i for i, r in enumerate(expected("lm-sample.tfrecord"))
    }


def sources(batch: dict, index: dict) -> tuple[int, int]:
    """(web rows, code rows) of a batch, by each row's record."""
    web = code = 0
    for ids, mask in zip(batch["input_ids"], batch["input_ids_mask"], strict=True):
        i = index[tuple(int(v) for v in ids[mask == 1])]
        web += i < 128
        code += i >= 128
    return web, code


def test_every_stratified_batch_holds_the_ratio():
    index = record_index()
    it = mixed(3, 1).iter()
    for _ in range(40):
        assert sources(next(it), index) == (12, 4)
    counts = it.source_counts
    assert set(counts) == {"web", "code"}
    assert counts["web"] >= 480 and counts["code"] >= 160


def test_random_draws_follow_the_weights():
    p = infeed.Pipeline.mix(
        {
            "web": infeed.Pipeline.from_files([LM]).take(128).repeat(),
            "code": infeed.Pipeline.from_files([LM]).skip(128).repeat(),
        },
        weights={"web": 1, "code": 3},
    ).parse(LM_SPEC).max_length(512).batch(100)
    index = record_index()
    web = 0
    for _, batch in zip(range(40), p, strict=False):
        web += sources(batch, index)[0]
    # 4000 draws of p = 1/4: standard deviation 27; within 5 of them.
    assert abs(web - 1000) < 137, web


def test_restore_in_a_fresh_process_then_with_new_weights(tmp_path):
    full = as_lists([b for _, b in zip(range(30), mixed(3, 1), strict=False)])
    it = mixed(3, 1).iter()
    for _ in range(10):
        next(it)
    state = tmp_path / "state.bin"
    state.write_bytes(it.get_state())
    rest = tmp_path / "rest.npz"
    script = MIXED.format(lm=str(LM)) + textwrap.dedent(
        f"""
        import numpy as np
        it = mixed(3, 1).iter(state=open({str(state)!r}, "rb").read())
        out = {{}}
        for i in range(20):
            for name, a in next(it).items():
                out[f"{{i}}/{{name}}"] = a
        np.savez({str(rest)!r}, **out)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    got = np.load(rest)
    restored = [{k: got[f"{i}/{k}"] for k in full[0]} for i in range(20)]
    assert_same_batches(restored, full[10:])
    # The same state with weights 1:1: each source goes on where it was, and
    # every batch from there holds 8 and 8.
    index = record_index()
    even = mixed(1, 1).iter(state=state.read_bytes())
    for _ in range(20):
        assert sources(next(even), index) == (8, 8)


def test_a_source_with_batching_steps_is_refused():
    bad = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).batch(4)
    with pytest.raises(infeed.SpecError, match="record-level steps only"):
        infeed.Pipeline.mix({"a": bad}, weights={"a": 1}).parse(LM_SPEC).batch(4).shapes()
    with pytest.raises(ValueError, match="one weight per source"):
        infeed.Pipeline.mix({"a": infeed.Pipeline.from_files([LM])}, weights={"b": 1})
    assert TESTDATA.exists()


def scheduled(schedule, interpolate=False):
    return (
        infeed.Pipeline.mix(
            {
                "web": infeed.Pipeline.from_files([LM]).take(128).seed(1).shuffle(32).repeat(),
                "code": infeed.Pipeline.from_files([LM]).skip(128).seed(2).shuffle(32).repeat(),
            },
            weights={"web": 3, "code": 1},
            by="stratified",
            schedule=schedule,
            interpolate=interpolate,
        )
        .seed(5)
        .parse(LM_SPEC)
        .max_length(512)
        .batch(16)
    )


def test_a_schedule_moves_the_ratio_and_restores_exactly():
    index = record_index()
    p = scheduled([(4, {"web": 1, "code": 1}), (8, {"web": 0, "code": 1})])
    it = p.iter()
    got = [sources(next(it), index) for _ in range(10)]
    assert got == [(12, 4)] * 4 + [(8, 8)] * 4 + [(0, 16)] * 2
    linear = scheduled([(4, {"web": 1, "code": 3})], interpolate=True).iter()
    assert [sources(next(linear), index) for _ in range(6)] == [
        (12, 4),
        (10, 6),
        (8, 8),
        (6, 10),
        (4, 12),
        (4, 12),
    ]
    # A state after step 6 continues exactly.
    it = p.iter()
    for _ in range(6):
        next(it)
    state = it.get_state()

    def first(it, n):
        return [{k: v.copy() for k, v in next(it).items()} for _ in range(n)]

    assert_same_batches(first(p.iter(state=state), 4), first(p.iter(), 10)[6:])
    with pytest.raises(ValueError, match="schedule step 4: weights for"):
        scheduled([(4, {"web": 1})])
    with pytest.raises(infeed.SpecError, match="steps must increase"):
        scheduled([(4, {"web": 1, "code": 1}), (4, {"web": 1, "code": 2})]).iter()
