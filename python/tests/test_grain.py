"""infeed.grain against the grain package: TFRecordSource as Grain's
random-access source (records, parsed dicts, Grain's own shuffle, batch and
checkpoint), IterDataset carrying infeed's state through Grain's iterator
and its Orbax handler, build_index and global_shuffle from Python."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import grain
import numpy as np
import orbax.checkpoint as ocp
import pytest
from conftest import LM, LM_SPEC, TESTDATA, expected, values

import infeed
import infeed.grain


def _pad(record: dict[str, Any]) -> dict[str, Any]:
    """A parsed lm record padded to 512 (Grain's batch stacks arrays)."""
    ids = record["input_ids"]
    out = np.zeros(512, dtype=np.int64)
    out[: len(ids)] = ids
    return {"input_ids": out, "length": np.int64(len(ids))}


@pytest.mark.parametrize(
    "name", ["examples.tfrecord", "examples.tfrecord.gz", "examples.tfrecord.zz"]
)
def test_a_source_gives_every_record_as_tensorflow_wrote_it(name: str) -> None:
    # The three files hold the same records (testdata/README.md).
    want = expected("examples.tfrecord")
    path = str(TESTDATA / name)
    source = infeed.grain.TFRecordSource([path])
    assert len(source) == len(want)
    raw = [source[i] for i in range(len(source))]
    assert raw == source.__getitems__(list(range(len(source))))
    assert source[-1] == raw[-1]
    # Parsed by a spec: the values TensorFlow wrote.
    parsed = infeed.grain.TFRecordSource([path], spec={"label": infeed.VarLen("int64")})
    for i, record in enumerate(want):
        assert parsed[i]["label"].tolist() == (values(record, "label") if "label" in record else [])
    with pytest.raises(IndexError):
        source[len(source)]


def test_the_source_pickles_and_takes_a_glob(tmp_path: Path) -> None:
    # A comma-separated list of patterns, one a glob.
    source = infeed.grain.TFRecordSource(f"{LM},{TESTDATA / 'lm-sample.tfrecord.g[z]'}")
    # Both copies of the lm sample: 256 records each.
    assert len(source) == 512
    again = pickle.loads(pickle.dumps(source))
    assert len(again) == 512 and again[300] == source[300]


def test_grain_shuffles_batches_and_restores_a_source_exactly() -> None:
    source = infeed.grain.TFRecordSource([LM], spec=LM_SPEC)
    ds = grain.MapDataset.source(source).shuffle(seed=1).map(_pad).batch(16)
    batches = [b["length"].tolist() for b in ds]
    assert len(batches) == 16
    # A permutation of the 256 records.
    lengths = sorted(x for b in batches for x in b)
    want = sorted(len(values(r, "input_ids")) for r in expected("lm-sample.tfrecord"))
    assert lengths == want
    # Grain's iterator state restores the rest exactly.
    it = iter(ds.to_iter_dataset())
    for _ in range(5):
        next(it)
    state = it.get_state()
    rest = [b["length"].tolist() for b in it]
    it2 = iter(ds.to_iter_dataset())
    it2.set_state(state)
    assert [b["length"].tolist() for b in it2] == rest == batches[5:]


def _lm_pipeline() -> infeed.Pipeline:
    return (
        infeed.Pipeline.from_files([LM])
        .seed(3)
        .global_shuffle()
        .repeat(2)
        .parse(LM_SPEC)
        .pad_to_multiple_of(64)
        .max_length(512)
        .batch(32)
    )


def test_an_infeed_pipeline_is_a_grain_dataset_that_restores_exactly(tmp_path: Path) -> None:
    pipeline = _lm_pipeline()
    want = [b["input_ids"].tolist() for b in pipeline]
    ds = infeed.grain.IterDataset(pipeline)
    assert [b["input_ids"].tolist() for b in ds] == want
    it = iter(ds)
    for _ in range(3):
        next(it)
    state = it.get_state()
    assert set(state) == {"infeed_state"} and isinstance(state["infeed_state"], str)
    it2 = iter(ds)
    it2.set_state(state)
    assert [b["input_ids"].tolist() for b in it2] == want[3:]
    # Grain's Orbax handler: saved beside a model's state, restored into a
    # fresh iterator.
    it = iter(ds)
    for _ in range(7):
        next(it)
    with ocp.CheckpointManager(tmp_path / "ckpt") as manager:
        manager.save(7, args=ocp.args.Composite(data=grain.checkpoint.CheckpointSave(it)))
        manager.wait_until_finished()
        fresh = iter(ds)
        manager.restore(7, args=ocp.args.Composite(data=grain.checkpoint.CheckpointRestore(fresh)))
    assert [b["input_ids"].tolist() for b in fresh] == want[7:]


def test_build_index_then_global_shuffle_reads_every_record_once(tmp_path: Path) -> None:
    written = infeed.build_index([LM, str(TESTDATA / "examples.tfrecord.gz")], tmp_path / "idx")
    assert [(Path(s).name, Path(i).name, n) for s, i, n in written] == [
        ("lm-sample.tfrecord", "lm-sample.tfrecord.index", 256),
        ("examples.tfrecord.gz", "examples.tfrecord.gz.index", len(expected("examples.tfrecord"))),
    ]
    for blocks in [None, 20_000]:
        p = (
            infeed.Pipeline.from_files([LM])
            .index_dir(tmp_path / "idx")
            .global_shuffle(block_bytes=blocks)
            .parse({"input_ids": infeed.VarLen("int64")})
            .max_length(512)
            .batch(256, drop_remainder=False)
        )
        (batch,) = list(p)
        mask = batch["input_ids_mask"].sum(axis=1)
        want = sorted(len(values(r, "input_ids")) for r in expected("lm-sample.tfrecord"))
        assert sorted(mask.tolist()) == want
    # The same indexes frame the shard for the workers that read its records:
    # the batches and states of a walk of its headers (`worker_reads`, which
    # once asked for this, changes nothing). With mmap, each worker takes its
    # records from its own map of the shard.
    def lm(indexed: bool, mmap: bool = False) -> infeed.Pipeline:
        p = infeed.Pipeline.from_files([LM]).read_options(mmap=mmap)
        if indexed:
            p = p.index_dir(tmp_path / "idx").worker_reads()
        return p.parse({"input_ids": infeed.VarLen("int64")}).max_length(512).batch(32)

    read, workers, mapped = iter(lm(False)), iter(lm(True)), iter(lm(True, mmap=True))
    for _ in range(8):
        a, b, c = next(read), next(workers), next(mapped)
        assert a["input_ids"].tolist() == b["input_ids"].tolist() == c["input_ids"].tolist()
        assert read.get_state() == workers.get_state() == mapped.get_state()
    # A stale index is refused by name.
    stale = tmp_path / "stale"
    stale.mkdir()
    copy = stale / "lm-sample.tfrecord"
    copy.write_bytes(Path(LM).read_bytes())
    # By default into .infeed-index beside the shard, out of its glob's way.
    ((_, index, _),) = infeed.build_index([str(copy)])
    assert index == str(stale / ".infeed-index" / "lm-sample.tfrecord.index")
    with copy.open("ab") as f:
        f.write(Path(LM).read_bytes()[:916])
    with pytest.raises(infeed.ShardIndexError, match="stale index") as e:
        infeed.grain.TFRecordSource([str(copy)])
    assert e.value.path == str(copy)
