"""Pipeline.from_tfds on a TFDS directory written by hand: the shards are
copies of testdata/lm-sample.tfrecord (256 records each), dataset_info.json
and features.json are what tfds writes for such a dataset."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest
from conftest import LM, expected, values

import infeed

CORE = "tensorflow_datasets.core.features"
FEATURES = {
    "pythonClassName": f"{CORE}.features_dict.FeaturesDict",
    "featuresDict": {
        "features": {
            name: {
                "pythonClassName": f"{CORE}.sequence_feature.Sequence",
                "sequence": {
                    "feature": {
                        "pythonClassName": f"{CORE}.tensor_feature.Tensor",
                        "tensor": {"dtype": "int32", "encoding": "none", "shape": {}},
                    },
                    "length": "-1",
                },
            }
            for name in ["attention_mask", "input_ids"]
        }
    },
}


@pytest.fixture
def lm_tfds(tmp_path: pathlib.Path) -> pathlib.Path:
    """Split train: two shards of the 256 lm records; split test: one."""
    d = tmp_path / "lm" / "1.0.0"
    d.mkdir(parents=True)
    for split, shards in [("train", 2), ("test", 1)]:
        for i in range(shards):
            shutil.copy(LM, d / f"lm-{split}.tfrecord-{i:05d}-of-{shards:05d}")
    info = {
        "fileFormat": "tfrecord",
        "name": "lm",
        "version": "1.0.0",
        "splits": [
            {"name": "train", "numBytes": "1", "shardLengths": ["256", "256"]},
            {"name": "test", "numBytes": "1", "shardLengths": ["256"]},
        ],
    }
    (d / "dataset_info.json").write_text(json.dumps(info))
    (d / "features.json").write_text(json.dumps(FEATURES))
    return d


def rows(p: infeed.Pipeline, feature: str) -> list[list[int]]:
    """Each record's values of ``feature``, through batches of 16 with masks."""
    out = []
    for batch in p.max_length(512).batch(16, drop_remainder=False).threads(2):
        it_rows = batch[feature]
        mask = batch[f"{feature}_mask"]
        for r in range(it_rows.shape[0]):
            out.append(it_rows[r][mask[r] == 1].tolist())
    return out


def test_a_slice_parses_by_the_datasets_own_features(lm_tfds: pathlib.Path) -> None:
    lm = [values(r, "input_ids") for r in expected("lm-sample.tfrecord")]
    # 10% of 512 is 51.2: the first 51 records, all in the first shard.
    p = infeed.Pipeline.from_tfds(lm_tfds, "train[:10%]")
    assert p.files == [str(lm_tfds / "lm-train.tfrecord-00000-of-00002")]
    got = rows(p.parse(), "input_ids")
    assert len(got) == 64  # 51 records and the padding rows of the last batch
    assert got[:51] == lm[:51]
    # The last 300: 44 of the first shard, then the whole second.
    p = infeed.Pipeline.from_tfds(lm_tfds, "train[-300:]+test[:2]")
    assert len(p.files) == 3
    got = rows(p.parse(features=["input_ids"]), "input_ids")
    assert got[:302] == lm[212:] + lm + lm[:2]


def test_parse_features_selects_and_checks_names(lm_tfds: pathlib.Path) -> None:
    p = infeed.Pipeline.from_tfds(lm_tfds, "test").parse(features=["attention_mask"])
    shapes = p.pad_to_multiple_of(64).max_length(512).batch(8).shapes()
    assert {name for shape in shapes for name in shape} == {"attention_mask", "attention_mask_mask"}
    with pytest.raises(infeed.SpecError, match="no feature 'labels'") as e:
        infeed.Pipeline.from_tfds(lm_tfds, "test").parse(features=["labels"])
    assert e.value.feature == "labels"
    with pytest.raises(infeed.SpecError, match="from_tfds"):
        infeed.Pipeline.from_files([LM]).parse()


def test_a_state_restores_exactly_over_a_slice(lm_tfds: pathlib.Path) -> None:
    p = (
        infeed.Pipeline.from_tfds(lm_tfds, "train[100:400]")
        .interleave(2)
        .shuffle(32)
        .seed(3)
        .parse()
        .pad_to_multiple_of(64)
        .max_length(512)
        .batch(16)
        .threads(2)
    )
    full = [b["input_ids"].copy() for b in p]
    assert len(full) == 300 // 16
    it = p.iter()
    for _ in range(5):
        next(it)
    state = it.get_state()
    it.close()
    rest = [b["input_ids"].copy() for b in p.iter(state)]
    assert len(rest) == len(full) - 5
    for a, b in zip(full[5:], rest, strict=True):
        np.testing.assert_array_equal(a, b)


def test_tfds_errors_name_the_split_and_the_directory(lm_tfds: pathlib.Path) -> None:
    with pytest.raises(infeed.TfdsError, match='no split "validation"') as e:
        infeed.Pipeline.from_tfds(lm_tfds, "validation")
    assert '"train", "test"' in str(e.value)
    assert e.value.path == str(lm_tfds)
    with pytest.raises(infeed.TfdsError, match="out of its 512 records"):
        infeed.Pipeline.from_tfds(lm_tfds, "train[:600]")
    info = json.loads((lm_tfds / "dataset_info.json").read_text())
    info["fileFormat"] = "array_record"
    (lm_tfds / "dataset_info.json").write_text(json.dumps(info))
    with pytest.raises(infeed.TfdsError, match="array_record"):
        infeed.Pipeline.from_tfds(lm_tfds, "train")
    with pytest.raises(infeed.TfdsError, match="dataset_info.json"):
        infeed.Pipeline.from_tfds(lm_tfds.parent / "nothing", "train")
