"""Pipeline.tokenize: token ids equal to the `tokenizers` and `sentencepiece`
packages' on text no test here wrote (docstrings of the standard library and
HTML5's named characters), bos and eos as asked, and errors by name."""

from __future__ import annotations

import html.entities
import importlib
import inspect
import pathlib

import numpy as np
import pytest
from conftest import TESTDATA
from records import example, write_tfrecord

import infeed

tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")

TOKENIZER = TESTDATA / "tokenizer" / "tokenizer.json"
MODELS = [
    TESTDATA / "tokenizer" / "spm-unigram.model",
    TESTDATA / "tokenizer" / "spm-bpe.model",
    TESTDATA / "tokenizer" / "spm-runs.model",
]
MODULES = ["json", "csv", "argparse", "string", "textwrap", "difflib", "email", "collections"]


def foreign_texts() -> list[str]:
    """Lines of the standard library's module docs, and HTML5's named
    characters in runs of 40 (symbols, accents, scripts no vocabulary here
    was trained on); some lines empty."""
    lines: list[str] = []
    for name in MODULES:
        lines += (inspect.getdoc(importlib.import_module(name)) or "").splitlines()
    chars = "".join(sorted(set(html.entities.html5.values())))
    lines += [chars[i : i + 40] for i in range(0, len(chars), 40)]
    return lines


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> tuple[pathlib.Path, list[str]]:
    lines = foreign_texts()
    assert len(lines) > 300
    path = tmp_path_factory.mktemp("text") / "text.tfrecord"
    write_tfrecord(path, [example({"text": [line.encode()]}) for line in lines])
    return path, lines


def token_rows(p: infeed.Pipeline) -> list[list[int]]:
    rows = []
    for batch in p.max_length(4096).batch(32, False).threads(2):
        assert batch["text"].dtype == np.int32
        for r in range(batch["text"].shape[0]):
            rows.append(batch["text"][r][batch["text_mask"][r] == 1].tolist())
    return rows


def tokenized(path: pathlib.Path, tokenizer: pathlib.Path, **kw) -> infeed.Pipeline:
    spec = {"text": infeed.FixedLen([], "bytes")}
    return infeed.Pipeline.from_files([path]).parse(spec).tokenize("text", tokenizer, **kw)


def test_a_tokenizer_json_gives_the_tokenizers_packages_ids(text_file):
    path, lines = text_file
    reference = tokenizers.Tokenizer.from_file(str(TOKENIZER))
    eos = reference.token_to_id("</s>")
    want = [reference.encode(line, add_special_tokens=False).ids + [eos] for line in lines]
    got = token_rows(tokenized(path, TOKENIZER))
    assert got[: len(lines)] == want
    assert got[len(lines) :] == [[]] * (len(got) - len(lines))  # padding rows


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.stem)
def test_sentencepiece_models_give_the_sentencepiece_packages_ids(text_file, model):
    path, lines = text_file
    reference = spm.SentencePieceProcessor(model_file=str(model))
    want = [reference.encode(line, add_bos=True, add_eos=True) for line in lines]
    got = token_rows(tokenized(path, model, add_bos=True))
    assert got[: len(lines)] == want
    # Pieces the model never saw: unknown (unigram) or bytes (the BPE model's fallback).
    assert any(reference.unk_id() in w or max(w) < 260 for w in want)


def test_runs_of_one_character_split_as_the_sentencepiece_package_splits_them(tmp_path):
    """spm-runs has `w` and `ww`, `4` and `44`, ...: a run of one character
    splits into pieces of equal total score two ways (`w ww`, `ww w`), and
    the float sums of the scores before the run decide which, so each line of
    the module docs before a URL, a digit run or a rule is a new draw."""
    model = TESTDATA / "tokenizer" / "spm-runs.model"
    reference = spm.SentencePieceProcessor(model_file=str(model))
    docs = [line for line in foreign_texts() if line.strip()][:60]
    runs = ["('www.python.org'", "http://www.python.org/", "4" * 10, "=" * 10, "-" * 30]
    texts = [f"{doc} {run}" for doc in docs for run in runs]
    path = tmp_path / "runs.tfrecord"
    write_tfrecord(path, [example({"text": [text.encode()]}) for text in texts])
    want = [reference.encode(text, add_eos=True) for text in texts]
    got = token_rows(tokenized(path, model))
    assert got[: len(texts)] == want
    # The texts draw the tie both ways.
    w, ww = reference.piece_to_id("w"), reference.piece_to_id("ww")
    pairs = {pair for ids in want for pair in zip(ids, ids[1:], strict=False)}
    assert (w, ww) in pairs and (ww, w) in pairs


def test_tokenize_then_pack_fills_rows_with_every_token(text_file):
    path, lines = text_file
    reference = spm.SentencePieceProcessor(model_file=str(MODELS[1]))
    total = sum(len(reference.encode(line)) + 1 for line in lines)
    p = (
        tokenized(path, MODELS[1])
        .pack(128)
        .pack_overflow("split")
        .batch(8, drop_remainder=False)
    )
    batches = list(p)
    assert sum(int((b["segment_ids"] > 0).sum()) for b in batches) == total
    assert all(b["text"].shape == (8, 128) for b in batches)


def test_errors_name_the_tokenizer_or_the_feature(text_file, tmp_path):
    path, _ = text_file
    missing = tmp_path / "nope.model"
    with pytest.raises(infeed.TokenizerError) as e:
        next(iter(tokenized(path, missing).max_length(8).batch(2)))
    assert e.value.path == str(missing)
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"\x0a\x03abc not a model")
    with pytest.raises(infeed.TokenizerError) as e:
        next(iter(tokenized(path, junk).max_length(8).batch(2)))
    assert e.value.path == str(junk)
    assert "cannot load it as a SentencePiece model" in str(e.value)
    numbers = (
        infeed.Pipeline.from_files([path])
        .parse({"text": infeed.VarLen("int64")})
        .tokenize("text", TOKENIZER)
        .max_length(8)
        .batch(2)
    )
    with pytest.raises(infeed.SpecError) as e:
        numbers.shapes()
    assert 'feature "text" is int64: it takes a text (bytes) feature' in str(e.value)
