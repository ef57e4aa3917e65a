"""infeed.jax: global jax.Arrays on 8 CPU devices, prefetch, input wait, two processes."""

from __future__ import annotations

import ast
import json
import sys
import textwrap
import zlib

import numpy as np
import pytest
from conftest import LM, TESTDATA, as_lists, assert_same_batches, lm_pipeline, values
from processes import free_port, run_processes
from records import example, write_tfrecord

jax = pytest.importorskip("jax")
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import infeed  # noqa: E402
import infeed.jax  # noqa: E402


def data_sharding() -> NamedSharding:
    assert len(jax.devices()) == 8, "XLA_FLAGS must give 8 CPU devices"
    return NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))


def test_batches_become_sharded_global_arrays():
    sharding = data_sharding()
    host = as_lists(list(lm_pipeline()))
    it = infeed.jax.device_iterator(lm_pipeline(), sharding, prefetch=3)
    n = 0
    for batch, want in zip(it, host, strict=True):
        assert set(batch) == set(want)
        for name, array in batch.items():
            assert isinstance(array, jax.Array)
            assert array.sharding == sharding
            assert array.shape == want[name].shape and array.dtype == want[name].dtype
            assert len(array.addressable_shards) == 8
            for shard in array.addressable_shards:
                assert shard.data.shape == (2, want[name].shape[1])  # 16 rows / 8 devices
            np.testing.assert_array_equal(np.asarray(array), want[name])
        n += 1
    assert n == 48 == it.steps
    assert it.wait_seconds >= 0.0


def test_a_jitted_step_consumes_them():
    sharding = data_sharding()

    @jax.jit
    def tokens(batch):
        return batch["input_ids_mask"].sum()

    host = [int(b["input_ids_mask"].sum()) for b in lm_pipeline()]
    got = [int(tokens(b)) for b in infeed.jax.device_iterator(lm_pipeline(), sharding)]
    assert got == host


def test_device_iterator_state_ignores_prefetched_batches():
    sharding = data_sharding()
    full = as_lists(list(lm_pipeline()))
    it = infeed.jax.device_iterator(lm_pipeline(), sharding, prefetch=4)
    for _ in range(6):
        next(it)
    state = it.get_state()  # the prefetch thread is ahead by now
    it.close()
    rest = as_lists(list(lm_pipeline().iter(state=state)))
    assert_same_batches(rest, full[6:])
    it2 = infeed.jax.device_iterator(lm_pipeline(), sharding)
    it2.set_state(state)
    got = [{k: np.asarray(v) for k, v in b.items()} for b in it2]
    assert_same_batches(got, full[6:])


def test_cache_batches_replays_the_first_batches_for_ever():
    sharding = data_sharding()
    full = as_lists(list(lm_pipeline()))
    it = infeed.jax.device_iterator(lm_pipeline(), sharding, cache_batches=3)
    got = [{k: np.asarray(v) for k, v in next(it).items()} for _ in range(100)]
    # 48 batches exist; 100 steps replay the first 3 in turn.
    assert_same_batches(as_lists(got), [full[i % 3] for i in range(100)])
    assert it.steps == 100
    state = it.get_state()
    it.close()
    # Its state is that after the third batch.
    assert_same_batches(as_lists(list(lm_pipeline().iter(state=state))), full[3:])
    with pytest.raises(ValueError, match="negative"):
        infeed.jax.device_iterator(lm_pipeline(), sharding, cache_batches=-1)


def test_text_stays_on_the_host_beside_the_global_arrays(tmp_path):
    sharding = data_sharding()
    path = tmp_path / "text.tfrecord"
    texts = [f"text {i}".encode() for i in range(20)]
    write_tfrecord(path, [example({"text": [t], "id": [i]}) for i, t in enumerate(texts)])
    spec = {"text": infeed.FixedLen([], "bytes"), "id": infeed.FixedLen([], "int64")}
    p = infeed.Pipeline.from_files([path]).parse(spec).batch(8)
    got = list(infeed.jax.device_iterator(p, sharding))
    assert len(got) == 2
    for i, batch in enumerate(got):
        assert isinstance(batch["id"], jax.Array) and batch["id"].sharding == sharding
        assert isinstance(batch["text"], np.ndarray) and batch["text"].dtype == object
        assert batch["text"].tolist() == texts[8 * i : 8 * i + 8]
        assert np.asarray(batch["id"]).tolist() == list(range(8 * i, 8 * i + 8))


def test_errors_reach_the_consumer():
    sharding = data_sharding()
    p = (
        infeed.Pipeline.from_files([TESTDATA / "corrupt.tfrecord"])
        .parse({"label": infeed.FixedLen([], "int64", default=-1)})
        .batch(8, drop_remainder=False)
    )
    it = infeed.jax.device_iterator(p, sharding)
    # The worker that assembles the first batch reads its records and finds
    # record 2 corrupt: the batch is that error (records 0 and 1 with it).
    with pytest.raises(infeed.CorruptRecordError) as e:
        next(it)
    assert e.value.offset == 117
    # Skipped by the shard's walk, before any batch is cut, the records
    # around it come as a padded batch.
    skipped = p.read_options(skip_corrupt=True)
    first = next(infeed.jax.device_iterator(skipped, sharding))
    assert np.asarray(first["label"]).tolist()[:2] == [0, 1]


TWO_HOSTS = """
import os, sys
import numpy as np
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize("127.0.0.1:{port}", num_processes=2, process_id={pid})
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import infeed, infeed.jax

def host(i):
    return (infeed.Pipeline.from_files([{lm!r}]).shard(i, 2).equal_batches("drop")
            .parse("input_ids:var_len:int64").fixed_length(512).batch(12))

assert jax.process_count() == 2 and len(jax.devices()) == 2
sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))
mine = [b["input_ids"].copy() for b in host(jax.process_index())]
other = [b["input_ids"].copy() for b in host(1 - jax.process_index())]
steps = 0
for step, batch in enumerate(infeed.jax.device_iterator(host(jax.process_index()), sharding)):
    ids = batch["input_ids"]
    assert ids.shape == (24, 512), ids.shape
    full = multihost_utils.process_allgather(ids, tiled=True)
    rows = [mine[step], other[step]] if jax.process_index() == 0 else [other[step], mine[step]]
    np.testing.assert_array_equal(full, np.concatenate(rows))
    steps += 1
print("steps", steps)
"""


def run_jax_processes(script: str, n: int, **values: object) -> list[str]:
    """Runs ``script`` in ``n`` JAX processes on localhost, formatted with
    ``port``, ``pid`` (the process's index), ``n`` and ``values``; asserts
    each exits 0 and returns their stdouts."""
    port = free_port()
    return run_processes(
        [
            [sys.executable, "-c", textwrap.dedent(script).format(port=port, pid=i, n=n, **values)]
            for i in range(n)
        ]
    )


def test_two_jax_processes_build_global_batches_from_both_hosts():
    outs = run_jax_processes(TWO_HOSTS, 2, lm=str(LM))
    # 256 records, 128 per host, 12 rows a batch: 10 steps on both.
    assert [out.split()[-2:] for out in outs] == [["steps", "10"], ["steps", "10"]]


# n processes (each its own seed unless `{seed}` gives one), shapes that depend
# on the lengths: every process records the shapes of each step's global arrays,
# all-gathers a digest of them, and (when the digests agree) checks that the
# global arrays of the first steps hold every host's rows, recomputing each
# host's batches locally.
# `{tail}` ends the pipeline; `{steps}` caps the steps (None: to the end).
MANY_HOSTS = """
import itertools, json, zlib
import numpy as np
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize("127.0.0.1:{port}", num_processes={n}, process_id={pid})
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import infeed, infeed.jax

N, ME, CHECKED = {n}, {pid}, 3
SPEC = "input_ids:var_len:int64,attention_mask:var_len:int64"

def host(i):
    return (infeed.Pipeline.from_files({files!r}).shard(i, N).seed({seed})
            .shuffle_files().interleave(2).shuffle(64){tail})

def first_batches(i):
    with host(i).iter() as it:
        return [dict((k, v.copy()) for k, v in b.items())
                for b in itertools.islice(it, CHECKED)]

assert jax.process_count() == N and len(jax.devices()) == N
sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))
it = infeed.jax.device_iterator(host(ME), sharding)
shapes, kept = [], []
for batch in itertools.islice(it, {steps}):
    shapes.append(sorted([name, list(a.shape)] for name, a in batch.items()))
    if len(kept) < CHECKED:
        kept.append(batch)
it.close()
text = json.dumps(shapes).encode()
digest = np.array([len(shapes), zlib.crc32(text) & 0x7FFFFFFF], np.int32)
every = multihost_utils.process_allgather(digest)
checked = 0
if (every == every[0]).all():  # the same on every process: all check, or none
    hosts = [first_batches(i) for i in range(N)]
    for step, batch in enumerate(kept):
        for name, array in sorted(batch.items()):
            full = multihost_utils.process_allgather(array, tiled=True)
            want = np.concatenate([h[step][name] for h in hosts])
            np.testing.assert_array_equal(full, want, err_msg=f"step {{step}} {{name}}")
        checked += 1
print("RESULT", json.dumps(dict(shapes=shapes, every=every.tolist(), checked=checked)))
"""

LM_FILES = [str(LM), str(LM) + ".gz"]  # the same records, twice: 512 a pass


def agreeing_shapes(n: int, tail: str, steps: int | None, seed: str = "100 + i") -> list[list]:
    """Runs MANY_HOSTS on ``n`` processes, host ``i`` seeded by ``seed`` (an
    expression of ``i``); asserts they saw the same shapes at every step and
    checked each other's rows; returns the shapes."""
    outs = run_jax_processes(
        MANY_HOSTS, n, files=LM_FILES, tail=tail, steps=steps, seed=seed
    )
    results = [json.loads(out.split("RESULT", 1)[1]) for out in outs]
    runs = [r["shapes"] for r in results]
    counts = [len(r) for r in runs]
    assert len(set(counts)) == 1, f"steps per process: {counts}"
    for step, at_step in enumerate(zip(*runs, strict=True)):
        assert all(s == at_step[0] for s in at_step), f"step {step}: {list(at_step)}"
    # The processes agree through JAX too (the all-gathered digest), and the
    # global arrays of the first steps held every host's rows.
    assert all(r["every"] == results[0]["every"] for r in results)
    assert all(len(set(map(tuple, r["every"]))) == 1 for r in results)
    assert [r["checked"] for r in results] == [3] * n
    return runs[0]


def widths(shapes: list[list]) -> list[tuple[int, int]]:
    """(rows, length) of input_ids at each step; every feature has them."""
    out = []
    for step in shapes:
        dims = {tuple(shape) for _name, shape in step}
        assert len(dims) == 1, step  # input_ids, attention_mask and the masks
        out.append(dims.pop())
    return out


@pytest.mark.parametrize("n", [2, 4])
def test_jax_processes_agree_on_padded_shapes_at_every_step(n):
    # 2n passes, 256 records per host a pass, 8 a batch: 128 equal steps; from
    # the step where the first host's input ends, each takes the longest
    # bucket. The count comes from running every host's grouping: one seed.
    tail = (
        '.repeat(2 * N).equal_batches("drop").parse(SPEC).pad_to_multiple_of(64)'
        '.max_length(512).cast("int32").batch(8, drop_remainder=True)'
    )
    shapes = widths(agreeing_shapes(n, tail, steps=None, seed="7"))
    assert len(shapes) == 128
    assert {rows for rows, _ in shapes} == {8 * n}
    lengths = {length for _, length in shapes}
    assert len(lengths) > 1, lengths
    assert lengths <= set(range(64, 513, 64))


@pytest.mark.parametrize("n", [2, 4])
def test_jax_processes_agree_on_bucket_shapes_at_every_step(n):
    tail = (
        '.repeat().parse(SPEC).bucket_by_length("input_ids", [64, 128, 256], [32, 16, 8, 4])'
        '.max_length(512).cast("int32")'
    )
    shapes = widths(agreeing_shapes(n, tail, steps=20))
    assert len(shapes) == 20
    assert len(set(shapes)) > 1, shapes
    assert set(shapes) <= {(32 * n, 64), (16 * n, 128), (8 * n, 256), (4 * n, 512)}


# Two processes whose pipelines differ in padding (against the design: only
# shard and seed may differ): the device iterator refuses at its start, on
# every process, before any step.
DISAGREEING = """
import numpy as np
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize("127.0.0.1:{port}", num_processes={n}, process_id={pid})
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import infeed, infeed.jax

multiple = 64 if {pid} == 0 else 32
p = (infeed.Pipeline.from_files({files!r}).shard({pid}, {n}).repeat()
     .parse("input_ids:var_len:int64").pad_to_multiple_of(multiple).max_length(512).batch(8))
sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))
try:
    infeed.jax.device_iterator(p, sharding)
    print("RESULT built")
except infeed.jax.ShapeDisagreement as e:
    print("RESULT refused", str(e).split(":")[0])
"""


def test_processes_whose_shapes_would_differ_are_refused_at_the_start():
    outs = run_jax_processes(DISAGREEING, 2, files=LM_FILES)
    said = [out.split("RESULT", 1)[1].strip() for out in outs]
    expected = (
        "refused the processes' pipelines would give batches of different shapes at "
        "the same step (per process [shapes digest, schedule digest]"
    )
    assert said == [expected, expected], said


# A job of 12 logical streams saved with Orbax by `{n}` processes after
# `{k}` steps, then restored in fresh processes on another count: every
# later global batch equals the uninterrupted run's, which one process of a
# 12-stream job with the global batch size computes alone.
ELASTIC = """
import itertools, json
import numpy as np
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
if {n} > 1:
    jax.distributed.initialize("127.0.0.1:{port}", num_processes={n}, process_id={pid})
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import orbax.checkpoint as ocp
import infeed, infeed.jax, infeed.orbax

N, ME, K, GLOBAL = {n}, {pid}, {k}, 24

def source(files, seed):
    return (infeed.Pipeline.from_files(files).seed(seed).shuffle_files().interleave(2)
            .shuffle(64).repeat())

def host(i, n):
    if {mixed}:
        # Two corpora 3:1 (1:1 from step 8), stratified, sharded on the mixture.
        files = {files!r}
        mixed = infeed.Pipeline.mix({{"a": source(files[:1], 1), "b": source(files[1:], 2)}},
                                    weights={{"a": 3, "b": 1}}, by="stratified",
                                    schedule=[(8, {{"a": 1, "b": 1}})])
        return (mixed.seed(3).shard(i, n).streams(12).parse("input_ids:var_len:int64")
                .fixed_length(512).cast("int32").batch(GLOBAL // n))
    return (infeed.Pipeline.from_files({files!r}).shard(i, n).streams(12).seed(3)
            .shuffle_files().interleave(2).shuffle(64).repeat()
            .parse("input_ids:var_len:int64").pad_to_multiple_of(64).max_length(512)
            .cast("int32").batch(GLOBAL // n))

# With skip: steps K + 2 and K + 3 are left out, said before the save only.
if {skip} and "{phase}" == "save":
    it = host(ME, N).skip_steps([(K + 2, K + 4)]).iter()
else:
    it = host(ME, N).iter()
mngr = ocp.CheckpointManager({directory!r})
if "{phase}" == "save":
    for _ in range(K):
        next(it)
    mngr.save(K, args=ocp.args.Composite(data=infeed.orbax.CheckpointSave(it)))
    mngr.wait_until_finished()
    print("RESULT saved")
else:
    mngr.restore(K, args=ocp.args.Composite(data=infeed.orbax.CheckpointRestore(it)))
    sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))
    whole = host(0, 1).iter()
    want = [b["input_ids"].copy() for b in itertools.islice(whole, K + 10)][K:]
    if {skip}:
        del want[2:4]
    steps = 0
    for step, batch in enumerate(itertools.islice(infeed.jax.device_iterator(it, sharding), 8)):
        ids = batch["input_ids"]
        full = multihost_utils.process_allgather(ids, tiled=True) if N > 1 else np.asarray(ids)
        np.testing.assert_array_equal(full, want[step], err_msg=f"step {{K + step}}")
        steps += 1
    print("RESULT", steps)
mngr.close()
"""


@pytest.mark.parametrize(
    ("before", "after", "k", "mixed", "skip"),
    [
        (2, 4, 5, False, False),
        (4, 2, 9, False, False),
        (2, 1, 3, False, False),
        (1, 3, 7, False, False),
        (2, 3, 6, True, False),
        (2, 4, 4, False, True),
    ],
)
def test_a_job_saved_on_n_processes_continues_on_m(tmp_path, before, after, k, mixed, skip):
    """A single corpus, a scheduled mixture of two (the schedule's step 8
    falls after the restore), and a run that skips two steps after the
    restore, said before the save only (the ranges travel in the state)."""
    pytest.importorskip("orbax.checkpoint")
    directory = str(tmp_path / "ckpt")
    common = dict(files=LM_FILES, k=k, directory=directory, mixed=mixed, skip=skip)
    outs = run_jax_processes(ELASTIC, before, phase="save", **common)
    assert all(out.split("RESULT", 1)[1].split() == ["saved"] for out in outs)
    saved = sorted(p.name for p in (tmp_path / "ckpt" / str(k) / "data").glob("*.infeed"))
    assert saved == [f"process_{i}-of-{before}.infeed" for i in range(before)]
    outs = run_jax_processes(ELASTIC, after, phase="restore", **common)
    assert [out.split("RESULT", 1)[1].split() for out in outs] == [["8"]] * after


# Two processes mix their shards of two corpora 3:1, stratified: every global
# batch (both processes' rows of a step) holds exactly 12 and 4 of 16, and
# both see the same global batches. Rows travel as CRCs of their tokens: a
# pipe holds 64 KiB, and a process blocked writing to it would never reach
# jax's shutdown barrier.
MIXED_HOSTS = """
import itertools, json, zlib
import numpy as np
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize("127.0.0.1:{port}", num_processes={n}, process_id={pid})
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import infeed, infeed.jax

N, ME, LM = {n}, {pid}, {lm!r}
# Record sharding (one file, two hosts) runs before skip/take: each host's
# first half is the sample's first 128 records, its second half the rest.
web = infeed.Pipeline.from_files([LM]).shard(ME, N).take(128 // N).seed(1).shuffle(32).repeat()
code = (infeed.Pipeline.from_files([LM + ".gz"]).shard(ME, N).skip(128 // N).seed(2)
        .shuffle(32).repeat())
p = (infeed.Pipeline.mix({{"web": web, "code": code}}, weights={{"web": 3, "code": 1}},
                         by="stratified")
     .seed(5).parse("input_ids:var_len:int64").fixed_length(512).batch(16 // N))
sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))
it = infeed.jax.device_iterator(p, sharding)
kept = list(itertools.islice(it, 12))
it.close()
steps = []
for batch in kept:
    ids = np.asarray(multihost_utils.process_allgather(batch["input_ids"], tiled=True))
    mask = np.asarray(multihost_utils.process_allgather(batch["input_ids_mask"], tiled=True))
    steps.append([zlib.crc32(r[m == 1].astype(np.int64).tobytes()) for r, m in zip(ids, mask)])
print("RESULT", json.dumps(steps))
"""


def test_two_processes_mix_their_shards_in_the_global_share(lm_records):
    outs = run_jax_processes(MIXED_HOSTS, 2, lm=str(LM))
    steps = [json.loads(out.split("RESULT", 1)[1]) for out in outs]
    assert steps[0] == steps[1] and len(steps[0]) == 12
    index = {
        zlib.crc32(np.asarray(values(r, "input_ids"), np.int64).tobytes()): i
        for i, r in enumerate(lm_records)
    }
    for step in steps[0]:
        web = sum(index[row] < 128 for row in step)
        assert (len(step), web) == (16, 12), step


# Each process reports its batches' positions; records_of, computed in the
# test's own process from one host's pipeline, must name the same rows.
POSITIONS = """
import json
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize("127.0.0.1:{port}", num_processes=2, process_id={pid})
import infeed
p = (infeed.Pipeline.from_files({files!r}).equal_batches("pad").shard({pid}, 2).streams(4)
     .seed(3).shuffle(32).parse("input_ids:var_len:int64").pack(512)
     .batch(4, drop_remainder=False))
it = p.iter()
print("POSITIONS", json.dumps([it.positions() for _ in it]))
"""


def test_records_of_equals_what_two_jax_processes_delivered():
    outs = run_jax_processes(POSITIONS, 2, files=LM_FILES)
    hosts = [json.loads(out.split("POSITIONS", 1)[1]) for out in outs]
    steps = len(hosts[0])
    assert steps == len(hosts[1]) and steps > 3
    p = (
        infeed.Pipeline.from_files(LM_FILES)
        .equal_batches("pad")
        .shard(0, 2)
        .streams(4)
        .seed(3)
        .shuffle(32)
        .parse("input_ids:var_len:int64")
        .pack(512)
        .batch(4, drop_remainder=False)
    )
    found = p.records_of(range(steps))
    for step in range(steps):
        rows = [
            None if r is None else [tuple(x) for x in r] for r in hosts[0][step] + hosts[1][step]
        ]
        assert found[step] == rows, step


# Process 1 is made slow on purpose (a map_batch that sleeps): the report
# every 4 steps, gathered over both, names it on both.
SLOW_HOST = """
import time
import numpy as np
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize("127.0.0.1:{port}", num_processes=2, process_id={pid})
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import infeed, infeed.jax

def slow(batch):
    time.sleep(0.05)
    return batch

p = (infeed.Pipeline.from_files({files!r}).shard({pid}, 2).equal_batches("drop")
     .repeat(4).parse("input_ids:var_len:int64").fixed_length(512).batch(8))
if {pid} == 1:
    p = p.map_batch(slow)
sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))
it = infeed.jax.device_iterator(p, sharding, report_every=4)
for _ in range(12):
    next(it)
print("REPORTS", [(r["process"], r["limit"]) for r in it.reports])
it.close()
"""


def test_the_gathered_report_names_the_slow_process():
    outs = run_jax_processes(SLOW_HOST, 2, files=LM_FILES)
    for out in outs:
        reports = ast.literal_eval(out.split("REPORTS", 1)[1].strip())
        assert [process for process, _ in reports] == [1, 1, 1], out
        # Past the start, the slow process's pipeline kept ahead of its
        # consumer: the time went to the map.
        assert all(limit == "consumer" for _, limit in reports[1:]), out
