"""A pipeline as one value: ``describe()`` gives the engine's description,
``from_description`` makes the pipeline again, and one description file
gives the same batches here, on the command line (``infeed bench
--pipeline``) and in Rust (tests/programs/cli/bench_config.rs). Needs the
``infeed`` binary (target/debug/infeed, or $INFEED_CLI)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest
from conftest import LM, LM_SPEC, TESTDATA

import infeed

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("INFEED_CLI", str(ROOT / "target" / "debug" / "infeed"))
FILE = "testdata/pipelines/lm.json"


def cli_digests(path: str) -> list[str]:
    """The per-batch digests ``infeed bench --pipeline PATH`` reports."""
    done = subprocess.run(
        [CLI, "bench", "--pipeline", path, "--json", "--digests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(done.stdout)["digests"])


def python_digests(pipeline: infeed.Pipeline) -> list[str]:
    it = pipeline.iter(digests=True)
    out = []
    for _ in it:
        assert it.digest is not None
        out.append(it.digest)
    return out


def test_one_file_gives_the_same_batches_here_and_on_the_command_line(monkeypatch):
    # The file names its shards relative to the repository, as the CLI runs it.
    monkeypatch.chdir(ROOT)
    here = python_digests(infeed.Pipeline.from_description(FILE))
    assert len(here) == 24
    assert here == cli_digests(FILE)


def test_the_builder_describes_what_the_file_says(monkeypatch):
    monkeypatch.chdir(ROOT)
    built = (
        infeed.Pipeline.from_glob("testdata/lm-sample.tfrecord.gz")
        .interleave(1)
        .shuffle_files()
        .shuffle(1000)
        .repeat(3)
        .seed(1)
        .parse(LM_SPEC)
        .batch(32, drop_remainder=False)
        .pad_to_multiple_of(64)
        .max_length(512)
        .cast("int32")
        .masks("uint8")
        .mask("input_ids", None)
    )
    described = built.describe()
    assert described == infeed.Pipeline.from_description(FILE).describe()
    assert described["batches"][-1] == {"mask": {"feature": "input_ids", "mask": "none"}}
    # Run from what describe() gives, the command line makes the same batches.
    path = ROOT / "target" / "test-description.json"
    path.write_text(json.dumps(described))
    assert python_digests(built) == cli_digests(str(path))


def test_a_description_is_checked_by_the_engine_naming_the_place():
    with pytest.raises(infeed.SpecError, match=r"records\[0\]\.shuffle\.buffer: .*`-2`"):
        infeed.Pipeline.from_files([LM]).shuffle(-2)
    described = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).batch(2).describe()
    described["version"] = 9
    with pytest.raises(infeed.SpecError, match="version 9: this infeed reads descriptions"):
        infeed.Pipeline.from_description(described)
    described["version"] = 1
    described["output"] = "columns"
    with pytest.raises(infeed.SpecError, match="delivers static-shape tensors"):
        iter(infeed.Pipeline.from_description(described))


def test_digests_are_taken_only_when_asked():
    p = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).max_length(512).batch(64)
    it = iter(p)
    next(it)
    assert it.digest is None
    first = p.iter(digests=True)
    second = p.iter(digests=True)
    next(first), next(second)
    assert first.digest == second.digest and len(first.digest or "") == 16


def test_the_engine_says_no_here_as_in_rust():
    lm = infeed.Pipeline.from_files([LM])
    with pytest.raises(infeed.SpecError, match="threads = 0: at least 1"):
        iter(lm.threads(0).parse(LM_SPEC).max_length(512).batch(2))
    with pytest.raises(infeed.SpecError, match="repeat = 0: at least 1 epoch"):
        iter(lm.repeat(0).parse(LM_SPEC).max_length(512).batch(2))
    with pytest.raises(infeed.SpecError, match="pack_overflow without pack"):
        lm.parse(LM_SPEC).pack_overflow("split").batch(2).shapes()


def test_values_json_cannot_hold_still_describe_and_run():
    import numpy as np

    spec = {
        "label": infeed.FixedLen([1], "int64"),
        "missing_f": infeed.FixedLen([2], "float32", default=[np.nan, np.inf]),
        "missing_b": infeed.FixedLen([], "bytes", default=b"\xff\x01"),
    }
    p = (
        infeed.Pipeline.from_files([TESTDATA / "examples.tfrecord"])
        .shuffle(np.int64(4))
        .seed(np.uint64(3))
        .parse(spec)
        .batch(np.float64(3), drop_remainder=False)
    )
    features = p.describe()["parse"]["features"]
    assert features[1]["default"] == ["nan", "inf"]
    assert features[2]["default"] == [[255, 1]]
    batch = next(iter(p))
    assert np.isnan(batch["missing_f"][:, 0]).all() and np.isinf(batch["missing_f"][:, 1]).all()
    assert list(batch["missing_b"]) == [b"\xff\x01"] * 3


def test_filter_length_is_data_and_keeps_those_lengths(monkeypatch):
    monkeypatch.chdir(ROOT)
    p = (
        infeed.Pipeline.from_files([LM])
        .parse(LM_SPEC)
        .filter_length("input_ids", 100, 200)
        .max_length(512)
        .batch(8, drop_remainder=False)
    )
    assert p.describe()["batches"][0] == {
        "filter_length": {"feature": "input_ids", "min": 100, "max": 200}
    }
    lengths = [n for b in p for n in b["input_ids_mask"].sum(axis=1) if n > 0]
    assert lengths and all(100 <= n <= 200 for n in lengths)
    # The same on the command line, from the description.
    path = ROOT / "target" / "test-filter-length.json"
    path.write_text(json.dumps(p.describe()))
    assert python_digests(p) == cli_digests(str(path))


def add_lengths(batch):
    out = dict(batch)
    out["lengths"] = batch["input_ids_mask"].sum(axis=1)
    return out


def test_a_map_batch_function_is_named_not_held(monkeypatch, tmp_path):
    p = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).max_length(512).batch(64)
    described = p.map_batch(add_lengths).describe()
    name = "python:test_description.add_lengths"
    assert described["batches"][-1] == {"map_delivered": {"callable": name}}
    with pytest.raises(infeed.SpecError, match="test_description.add_lengths"):
        infeed.Pipeline.from_description(described)
    again = infeed.Pipeline.from_description(described, functions={name: add_lengths})
    mapped = [b["lengths"].tolist() for b in again]
    assert mapped == [b["input_ids_mask"].sum(axis=1).tolist() for b in p]
    # The command line cannot run Python: it refuses the step by its name.
    path = tmp_path / "mapped.json"
    path.write_text(json.dumps(described))
    done = subprocess.run(
        [CLI, "bench", "--pipeline", str(path)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert 'user code ("python:test_description.add_lengths")' in done.stderr, done.stderr


def test_a_glob_is_listed_once_and_its_runs_read_what_it_matched(tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.tfrecord").write_bytes(pathlib.Path(LM).read_bytes())
    pattern = str(tmp_path / "*.tfrecord")
    p = infeed.Pipeline.from_glob(pattern)
    p = p.parse(LM_SPEC).pad_to_multiple_of(64).max_length(512).batch(8)
    two = sum(1 for _ in p.iter())
    # A shard that appears later is not read by this pipeline's runs (its
    # description still says the glob; from_description lists it again).
    (tmp_path / "c.tfrecord").write_bytes(pathlib.Path(LM).read_bytes())
    assert sum(1 for _ in p.iter()) == two
    assert len(p.shapes()) == 8  # 64 to 512 by 64
    assert p.describe()["source"] == {"glob": pattern}
    again = infeed.Pipeline.from_description(p.describe())
    assert sum(1 for _ in again.iter()) > two
    # A mixture's sources keep theirs.
    mixed = infeed.Pipeline.mix({"g": infeed.Pipeline.from_glob(pattern)}, {"g": 1.0})
    assert len(mixed.files) == 3
