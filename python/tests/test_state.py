"""Checkpoints: get_state / iter(state=...) / set_state / state_dict, across processes."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import as_lists, assert_same_batches, lm_pipeline

import infeed


def all_batches(it) -> list[dict]:
    return as_lists(list(it))


@pytest.mark.parametrize("k", [0, 1, 7, 20, 47])
def test_resume_in_process_gives_the_remaining_batches(k):
    full = all_batches(lm_pipeline())
    assert len(full) == 48
    it = iter(lm_pipeline())
    for _ in range(k):
        next(it)
    state = it.get_state()
    it.close()
    rest = all_batches(lm_pipeline().iter(state=state))
    assert_same_batches(rest, full[k:])


def test_set_state_and_state_dict():
    full = all_batches(lm_pipeline())
    it = iter(lm_pipeline())
    for _ in range(5):
        next(it)
    saved = it.state_dict()
    assert set(saved) == {"infeed_state"} and isinstance(saved["infeed_state"], bytes)
    for _ in range(10):
        next(it)
    it.load_state_dict(saved)  # back to batch 5
    assert it.batches_delivered == 5
    assert_same_batches(all_batches(it), full[5:])
    other = iter(lm_pipeline())
    other.set_state(saved["infeed_state"])
    assert_same_batches(all_batches(other), full[5:])


def test_state_of_another_pipeline_is_refused():
    it = iter(lm_pipeline(seed=1))
    next(it)
    state = it.get_state()
    with pytest.raises(infeed.StateError):
        next(lm_pipeline(seed=2).iter(state=state))
    with pytest.raises(infeed.StateError):
        lm_pipeline().iter(state=b"not a state")
    bad = bytearray(state)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(infeed.StateError):
        lm_pipeline(seed=1).iter(state=bytes(bad))


def elastic(index: int, hosts: int) -> infeed.Pipeline:
    """Host ``index`` of ``hosts`` of a job of 4 logical streams, 8 rows a step."""
    return lm_pipeline(seed=5, repeat=None, batch=8 // hosts).shard(index, hosts).streams(4)


def test_merged_states_of_two_hosts_continue_on_one():
    whole = as_lists(list(itertools.islice(elastic(0, 1).iter(), 12)))
    states = []
    for i in range(2):
        it = elastic(i, 2).iter()
        for _ in range(5):
            next(it)
        states.append(it.get_state())
        it.close()
    merged = infeed.merge_states(states)
    rest = as_lists(list(itertools.islice(elastic(0, 1).iter(state=merged), 7)))
    assert_same_batches(rest, whole[5:])
    # One host's state alone lacks the other's streams.
    with pytest.raises(infeed.StateError, match="does not hold logical stream 2"):
        elastic(0, 1).iter(state=states[0])
    # States of different steps do not merge.
    it = elastic(1, 2).iter()
    next(it)
    with pytest.raises(infeed.StateError, match="merge the states of one step"):
        infeed.merge_states([states[0], it.get_state()])


PIPELINE = """
import sys, numpy as np
sys.path.insert(0, {tests!r})
from conftest import lm_pipeline
p = lm_pipeline(seed=11).repeat(None)
"""


def child(script: str, tmp_path, **fmt) -> None:
    from conftest import TESTDATA

    tests = str(TESTDATA.parent / "python" / "tests")
    code = PIPELINE.format(tests=tests) + textwrap.dedent(script).format(**fmt)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def test_save_in_one_process_restore_in_another(tmp_path):
    k, n = 13, 40
    state_file, rest_file = tmp_path / "state.bin", tmp_path / "rest.npz"
    # Process 1: k batches, then the state.
    child(
        """
        it = iter(p)
        for _ in range({k}):
            next(it)
        open({state!r}, "wb").write(it.get_state())
        """,
        tmp_path,
        k=k,
        state=str(state_file),
    )
    # Process 2 (fresh): restore and record the next n batches.
    child(
        """
        it = p.iter(state=open({state!r}, "rb").read())
        out = {{}}
        for i in range({n}):
            for name, a in next(it).items():
                out[f"{{i}}/{{name}}"] = a
        np.savez({rest!r}, **out)
        """,
        tmp_path,
        n=n,
        state=str(state_file),
        rest=str(rest_file),
    )
    # Here: the uninterrupted run.
    it = iter(lm_pipeline(seed=11).repeat(None))
    full = [next(it) for _ in range(k + n)]
    rest = np.load(rest_file)
    assert len(rest.files) == 4 * n
    for i in range(n):
        for name, a in full[k + i].items():
            np.testing.assert_array_equal(rest[f"{i}/{name}"], a, err_msg=f"{i} {name}")


def test_skip_steps_leaves_out_steps_and_a_restore_keeps_them():
    full = all_batches(lm_pipeline())
    kept = [b for t, b in enumerate(full) if t not in (3, 4, 30)]
    assert_same_batches(all_batches(lm_pipeline().skip_steps([(3, 5), (30, 31)])), kept)
    # Saved after steps 0, 1, 2, 5 with the ranges; restored without them.
    it = iter(lm_pipeline().skip_steps([(3, 5), (30, 31)]))
    for _ in range(4):
        next(it)
    state = it.get_state()
    it.close()
    assert_same_batches(all_batches(lm_pipeline().iter(state=state)), kept[4:])
    with pytest.raises(infeed.SpecError, match=r"\(7, 7\) is empty"):
        iter(lm_pipeline().skip_steps([(7, 7)]))
