"""infeed.ray_data: a pipeline as a Ray Data datasource, on the cluster of
scripts/ray-cluster.sh (scripts/test.sh starts it and sets
INFEED_RAY_ADDRESS). Blocks are compared with the pipeline's shards run
locally."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from conftest import LM, LM_SPEC

import infeed

if "INFEED_RAY_ADDRESS" not in os.environ:
    pytest.skip(
        "no Ray cluster: bash scripts/ray-cluster.sh start; "
        'eval "$(bash scripts/ray-cluster.sh env)"',
        allow_module_level=True,
    )

import ray  # noqa: E402
import ray.data  # noqa: E402

import infeed.ray_data  # noqa: E402

# The sample plain and gzipped: two files of the same 256 records.
FILES = [LM, LM.with_name(LM.name + ".gz")]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(address=os.environ["INFEED_RAY_ADDRESS"], logging_level=logging.ERROR)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


def rows_of(p: infeed.Pipeline) -> list[dict]:
    """The rows of ``p``'s batches, padding rows left out."""
    rows = []
    with p.iter() as it:
        for batch in it:
            real = it.real_rows
            for r in range(len(batch["input_ids"]) if real is None else real):
                rows.append({k: v[r].copy() for k, v in batch.items()})
    return rows


def test_blocks_are_each_tasks_batches_task_after_task():
    p = (
        infeed.Pipeline.from_files(FILES)
        .seed(3)
        .shuffle(64)
        .parse(LM_SPEC)
        .fixed_length(512)
        .cast("int32")
        .batch(48, drop_remainder=False)
    )
    want = rows_of(p.shard(0, 2)) + rows_of(p.shard(1, 2))
    got = infeed.ray_data.read(p).take_all()
    assert len(got) == len(want) == 512
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.keys() == w.keys(), i
        for k in w:
            np.testing.assert_array_equal(g[k], w[k], err_msg=f"row {i} {k}")


@pytest.mark.parametrize("tasks", [2, 3])
def test_the_global_shuffle_of_indexed_shards_in_2_and_3_tasks(tmp_path, tasks):
    # Indexes built beside the shards, and the global shuffle, which every
    # task reads from every file, taking every count-th record of the
    # permutation.
    files = []
    for f in FILES:
        files.append(tmp_path / f.name)
        files[-1].write_bytes(f.read_bytes())
        infeed.build_index(files[-1])
    p = (
        infeed.Pipeline.from_files(files)
        .seed(4)
        .global_shuffle()
        .parse(LM_SPEC)
        .fixed_length(512)
        .cast("int32")
        .batch(32, drop_remainder=False)
    )
    want = [row for t in range(tasks) for row in rows_of(p.shard(t, tasks))]
    ds = infeed.ray_data.read(p, tasks=tasks)
    got = ds.take_all()
    assert len(got) == len(want) == 512
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        for k in w:
            np.testing.assert_array_equal(g[k], w[k], err_msg=f"row {i} {k}")


def test_each_task_lists_the_files_it_may_read():
    def inputs(p: infeed.Pipeline, tasks: int) -> list[list[str]]:
        read = infeed.ray_data.InfeedDatasource(p, tasks).get_read_tasks(1)
        return [list(t.metadata.input_files or ()) for t in read]

    names = [str(f) for f in FILES]
    p = infeed.Pipeline.from_files(FILES).parse(LM_SPEC).fixed_length(512).batch(8)
    assert inputs(p, 2) == [names[:1], names[1:]]  # by file
    assert inputs(p, 3) == [names] * 3  # by record
    assert inputs(p.global_shuffle(), 2) == [names] * 2
    assert inputs(p.streams(2), 2) == [names] * 2
    mixed = infeed.Pipeline.mix(
        {"a": infeed.Pipeline.from_files(FILES), "b": infeed.Pipeline.from_files(FILES[:1])},
        {"a": 1, "b": 1},
    )
    assert inputs(mixed.parse(LM_SPEC).fixed_length(512).batch(8), 2) == [names + names[:1]] * 2


def test_a_corrupt_record_is_the_datasets_error(tmp_path):
    data = bytearray(LM.read_bytes())
    data[20_000] ^= 0xFF
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(data)
    p = infeed.Pipeline.from_files([bad]).parse(LM_SPEC).fixed_length(512).batch(8)
    with pytest.raises(infeed.CorruptRecordError) as e:
        infeed.ray_data.read(p).take_all()
    assert e.value.path == str(bad)


def test_what_cannot_be_a_datasource_is_refused_by_name():
    p = infeed.Pipeline.from_files(FILES).parse(LM_SPEC).fixed_length(512)
    with pytest.raises(ValueError, match="makes no batches"):
        infeed.ray_data.read(p)
    with pytest.raises(ValueError, match="give it unsharded"):
        infeed.ray_data.read(p.batch(8).shard(0, 2))
    with pytest.raises(ValueError, match="map the dataset instead"):
        infeed.ray_data.read(p.batch(8).map_batch(lambda b: b))
