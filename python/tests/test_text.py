"""Bytes and text in batches: numpy arrays of ``bytes`` objects beside the
numeric arrays, exact values and ``b""`` padding; a TFDS dataset's Text
features by its own spec, and the Image it cannot decode refused by name."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from records import example, write_tfrecord

import infeed

TEXTS = ["héllo wörld", "", "third", "a longer fourth text", "5"]
TAGS = [["a", "bb"], [], ["c", "d", "e"], ["f"], []]


@pytest.fixture
def text_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "text.tfrecord"
    records = [
        example({"text": [t.encode()], "tags": [g.encode() for g in tags], "id": [i]})
        for i, (t, tags) in enumerate(zip(TEXTS, TAGS, strict=True))
    ]
    write_tfrecord(path, records)
    return path


SPEC: dict[str, infeed.VarLen | infeed.FixedLen] = {
    "text": infeed.FixedLen([], "bytes"),
    "tags": infeed.VarLen("bytes"),
    "id": infeed.FixedLen([], "int64"),
}


def test_text_and_tags_come_as_object_arrays_with_empty_padding(text_file):
    p = infeed.Pipeline.from_files([text_file]).parse(SPEC).max_length(4).batch(3, False)
    batches = list(p)
    assert [list(b) for b in batches] == [["tags_mask", "id", "text", "tags"]] * 2
    first, last = batches
    assert first["text"].dtype == object and first["text"].shape == (3,)
    assert first["text"].tolist() == [t.encode() for t in TEXTS[:3]]
    assert last["text"].tolist() == [b"a longer fourth text", b"5", b""]
    # Padded to the batch's longest: b"" after each row's tags, and in padding rows.
    assert first["tags"].shape == (3, 3)
    assert first["tags"].tolist() == [[b"a", b"bb", b""], [b"", b"", b""], [b"c", b"d", b"e"]]
    assert first["tags_mask"].dtype == np.uint8
    assert first["tags_mask"].tolist() == [[1, 1, 0], [0, 0, 0], [1, 1, 1]]
    assert last["tags"].tolist() == [[b"f"], [b""], [b""]]
    assert last["id"].tolist() == [3, 4, 0]
    # shapes() lists what a device program takes: the bytes stay on the host.
    assert p.shapes()[0].keys() == {"tags_mask", "id"}


def test_a_state_resumes_text_exactly(text_file):
    p = infeed.Pipeline.from_files([text_file]).parse(SPEC).max_length(4).batch(2, False)
    it = p.iter()
    next(it)
    state = it.get_state()
    rest = [b["text"].tolist() for b in it]
    resumed = [b["text"].tolist() for b in p.iter(state=state)]
    assert rest == resumed == [[b"third", b"a longer fourth text"], [b"5", b""]]


def test_packing_text_is_refused_by_name(text_file):
    spec = {"tags": infeed.VarLen("bytes")}
    p = infeed.Pipeline.from_files([text_file]).parse(spec).pack(8).batch(2)
    with pytest.raises(infeed.SpecError) as e:
        next(iter(p))
    assert e.value.feature == "tags"
    assert "only numeric features can be packed (tokenize text first)" in str(e.value)


CORE = "tensorflow_datasets.core.features"


def _text_tfds(root: pathlib.Path, text_file: pathlib.Path, image: dict) -> pathlib.Path:
    """A TFDS directory as tensorflow-datasets writes one: Text, a Sequence
    of Text, an int64 Tensor, and ``image`` (an Image feature's JSON)."""
    d = root / "texts" / "1.0.0"
    d.mkdir(parents=True)
    (d / "texts-train.tfrecord-00000-of-00001").write_bytes(text_file.read_bytes())
    tensor = {"dtype": "int64", "encoding": "none", "shape": {}}
    features = {
        "text": {"pythonClassName": f"{CORE}.text_feature.Text", "text": {}},
        "tags": {
            "pythonClassName": f"{CORE}.sequence_feature.Sequence",
            "sequence": {
                "feature": {"pythonClassName": f"{CORE}.text_feature.Text", "text": {}},
                "length": "-1",
            },
        },
        "id": {"pythonClassName": f"{CORE}.tensor_feature.Tensor", "tensor": tensor},
        "image": image,
    }
    doc = {
        "pythonClassName": f"{CORE}.features_dict.FeaturesDict",
        "featuresDict": {"features": features},
    }
    (d / "features.json").write_text(json.dumps(doc))
    info = {
        "fileFormat": "tfrecord",
        "name": "texts",
        "version": "1.0.0",
        "splits": [{"name": "train", "numBytes": "1", "shardLengths": [str(len(TEXTS))]}],
    }
    (d / "dataset_info.json").write_text(json.dumps(info))
    return d


def _image(shape: list[int]) -> dict:
    return {
        "pythonClassName": f"{CORE}.image_feature.Image",
        "image": {"shape": {"dimensions": [str(x) for x in shape]}, "dtype": "uint8"},
    }


def test_parse_delivers_a_tfds_datasets_text_and_refuses_an_image_of_unknown_size(
    tmp_path, text_file
):
    d = _text_tfds(tmp_path, text_file, _image([-1, -1, 3]))
    p = infeed.Pipeline.from_tfds(d, "train")
    with pytest.raises(infeed.SpecError) as e:
        p.parse()
    assert e.value.feature == "image"
    assert "infeed.Image entry" in str(e.value) and "features=" in str(e.value)
    with pytest.raises(infeed.SpecError) as e:
        p.parse(features=["id", "image"])
    assert e.value.feature == "image"

    batches = list(p.parse(features=["text", "tags", "id"]).max_length(4).batch(5))
    assert len(batches) == 1
    batch = batches[0]
    assert batch["text"].tolist() == [t.encode() for t in TEXTS]
    assert batch["tags"][2].tolist() == [b"c", b"d", b"e"]
    assert batch["id"].tolist() == [0, 1, 2, 3, 4]


def test_parse_takes_every_feature_of_a_text_dataset_by_default(tmp_path, text_file):
    # Records without the image: a uint8 Image of static size is decoded, so a
    # dataset whose records lack it fails only when read; leave it out here by
    # giving the records an image-free features.json.
    d = _text_tfds(tmp_path, text_file, _image([2, 2, 3]))
    doc = json.loads((d / "features.json").read_text())
    del doc["featuresDict"]["features"]["image"]
    (d / "features.json").write_text(json.dumps(doc))
    p = infeed.Pipeline.from_tfds(d, "train").parse().max_length(4).batch(2, False)
    texts = [t for b in p for t in b["text"].tolist()]
    assert texts == [t.encode() for t in TEXTS] + [b""]
