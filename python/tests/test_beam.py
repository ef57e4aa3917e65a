"""infeed.beam.WriteTFRecords on Beam's DirectRunner: the same records as
``infeed convert`` (as a multiset of serialized Examples, which the same Rust
encoder writes byte for byte), exact per-shard counts in the manifest, a
retried bundle or a rerun after a failed run leaving each record once, a
TFDS directory that tfds and ``Pipeline.from_tfds`` open, and tokenization
(the Python ``tokenizers``' ids; ``group_to`` packing each bundle's rows into
full records, dropping only a remainder). ``infeed.beam.ConvertFiles``
(file paths in, Rust reading them): the CLI's records on the same JSONL, CSV
and text files, tokenized or not, whole or split into byte ranges, and a
retried bundle leaving each once. Beam's own ReadFromTFRecord reading the
output of both and of the CLI by a glob of the folder (``OUT/*.tfrecord*``).
Both transforms reading from and writing to gs://, s3:// and az:// on the
storage emulators (stores.py).

Runs in .venv-beam (scripts/test.sh, with the emulators' environment);
skipped where apache-beam is missing, the cloud test where the emulators
are. Needs the ``infeed`` binary (target/debug/infeed, or $INFEED_CLI).
"""

from __future__ import annotations

import collections
import csv
import json
import os
import struct
import subprocess
import sys
import uuid
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pytest

beam = pytest.importorskip("apache_beam")

import stores  # noqa: E402

import infeed  # noqa: E402
from infeed import _infeed  # noqa: E402
from infeed import beam as infeed_beam  # noqa: E402
from infeed.beam import WriteTFRecords  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("INFEED_CLI", str(ROOT / "target" / "debug" / "infeed"))
FEATURES = ["id:int64", "label:int64", "score:float", "text:bytes", "tokens:int64[]"]
N = 300


def rows() -> list[dict[str, Any]]:
    out = []
    for i in range(N):
        out.append(
            {
                "id": i,
                "label": i % 3,
                "score": i / 8,
                "text": f"row {i} " + "é" * (i % 5),
                "tokens": list(range(i % 7)),
            }
        )
    return out


def write_inputs(tmp: Path) -> dict[str, Path]:
    data = rows()
    jsonl = tmp / "in.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data))
    # CSV holds scalars only.
    scalar = [{k: v for k, v in r.items() if k != "tokens"} for r in data]
    csv_path = tmp / "in.csv"
    with csv_path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(scalar[0]))
        w.writeheader()
        w.writerows(scalar)
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp / "in.parquet"
    pq.write_table(pa.Table.from_pylist(data), parquet, row_group_size=64)
    return {"jsonl": jsonl, "csv": csv_path, "parquet": parquet}


def read_rows(kind: str, path: Path) -> list[dict[str, Any]]:
    """The input as the Beam pipeline gets it (the usual readers)."""
    if kind == "jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    if kind == "csv":
        with path.open(newline="") as f:
            return [
                {"id": int(r["id"]), "label": int(r["label"]), "score": float(r["score"]),
                 "text": r["text"]}
                for r in csv.DictReader(f)
            ]
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def features_of(kind: str) -> list[str]:
    return [f for f in FEATURES if kind != "csv" or not f.startswith("tokens")]


def records(path: Path) -> list[bytes]:
    """The payloads of an uncompressed TFRecord file (framing only)."""
    return frames(path.read_bytes())


def frames(data: bytes) -> list[bytes]:
    """The payloads of uncompressed TFRecord bytes."""
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        out.append(data[pos + 12 : pos + 12 + length])
        pos += 12 + length + 4
    return out


def output(dir: Path) -> tuple[collections.Counter[bytes], dict[str, Any]]:
    """Every record of the shards the manifest lists, and the manifest; each
    shard's count must be the manifest's."""
    (manifest_path,) = dir.glob("*.manifest.json")
    manifest = json.loads(manifest_path.read_text())
    got: collections.Counter[bytes] = collections.Counter()
    for shard in manifest["shards"]:
        recs = records(dir / shard["name"])
        assert len(recs) == shard["records"], shard
        assert (dir / shard["name"]).stat().st_size == shard["bytes"]
        got.update(recs)
    assert sum(got.values()) == manifest["records"]
    # Each shard's index in .infeed-index beside it (out of reach of shard
    # globs), found and true to the shard.
    for shard in manifest["shards"]:
        source = _infeed.RecordSource([str(dir / shard["name"])])
        assert len(source) == shard["records"], shard
    listed = {s["name"] for s in manifest["shards"]} | {manifest_path.name, ".infeed-index"}
    assert sorted(p.name for p in dir.iterdir()) == sorted(listed), "no stray file"
    indexes = {s["name"] + ".index" for s in manifest["shards"]}
    assert sorted(p.name for p in (dir / ".infeed-index").iterdir()) == sorted(indexes)
    return got, manifest


def cli(args: list[str]) -> None:
    subprocess.run([CLI, "convert", "-q", *args], check=True)


def multiprocess() -> Any:
    return beam.options.pipeline_options.PipelineOptions(
        flags=[], direct_num_workers=2, direct_running_mode="multi_processing"
    )


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_multiprocess_output_equals_the_clis(tmp_path: Path, kind: str) -> None:
    inputs = write_inputs(tmp_path)
    features = features_of(kind)
    cli_dir = tmp_path / "cli"
    flags = [a for f in features for a in ("--feature", f)]
    cli([str(inputs[kind]), "-o", str(cli_dir), "--records-per-shard", "70", *flags])
    want, cli_manifest = output(cli_dir)

    beam_dir = tmp_path / "beam"
    with beam.Pipeline(options=multiprocess()) as p:
        _ = (
            p
            | beam.Create(read_rows(kind, inputs[kind]), reshuffle=True)
            | WriteTFRecords(str(beam_dir), features=features, records_per_shard=70)
        )
    got, manifest = output(beam_dir)
    assert got == want
    assert manifest["records"] == N
    assert manifest["spec"] == cli_manifest["spec"]
    assert all(s["records"] <= 70 for s in manifest["shards"])
    n = len(manifest["shards"])
    assert [s["name"] for s in manifest["shards"]] == [
        f"train-{i:05d}-of-{n:05d}.tfrecord" for i in range(n)
    ]
    pipeline = infeed.Pipeline.from_glob(str(beam_dir / "*.tfrecord"))
    (batch,) = list(pipeline.parse({"id": infeed.FixedLen([], "int64")}).batch(N))
    assert sorted(batch["id"].tolist()) == list(range(N))


def payloads(dir: Path, compression: str) -> list[bytes]:
    """Every record of the shards ``dir``'s manifest lists, decompressed
    here (Python's gzip and zlib)."""
    import gzip
    import zlib

    (manifest_path,) = dir.glob("*.manifest.json")
    out: list[bytes] = []
    for shard in json.loads(manifest_path.read_text())["shards"]:
        data = (dir / shard["name"]).read_bytes()
        if compression == "gzip":
            data = gzip.decompress(data)
        elif compression == "zlib":
            data = zlib.decompress(data)
        out.extend(frames(data))
    return out


@pytest.mark.parametrize("compression", ["none", "gzip", "zlib"])
def test_beams_read_from_tfrecord_reads_the_output_by_a_glob(
    tmp_path: Path, compression: str
) -> None:
    """Beam's ``ReadFromTFRecord("OUT/*.tfrecord*")`` (a Beam user's glob of
    a folder of shards) reads every record of ``infeed convert``'s output
    (from JSONL and Parquet) and of ``WriteTFRecords``': the glob takes the
    shards and nothing else (their indexes are in ``OUT/.infeed-index``)."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.testing.util import assert_that, equal_to

    inputs = write_inputs(tmp_path)
    dirs = []
    for kind in ["jsonl", "parquet"]:
        out = tmp_path / f"cli-{kind}"
        flags = [a for f in features_of(kind) for a in ("--feature", f)]
        cli([str(inputs[kind]), "-o", str(out), "--records-per-shard", "70",
             "--compression", compression, *flags])
        dirs.append(out)
    out = tmp_path / "beam"
    with beam.Pipeline() as p:
        _ = p | beam.Create(rows()) | WriteTFRecords(
            str(out), features=FEATURES, records_per_shard=70, compression=compression
        )
    dirs.append(out)
    # Beam tells GZIP by the name (.gz); ZLIB's .zz it does not know, and its
    # DEFLATE is zlib's format.
    kind = CompressionTypes.DEFLATE if compression == "zlib" else CompressionTypes.AUTO
    for out in dirs:
        assert (out / ".infeed-index").is_dir(), out
        want = payloads(out, compression)
        assert len(want) == N
        with beam.Pipeline() as p:
            got = p | beam.io.ReadFromTFRecord(f"{out}/*.tfrecord*", compression_type=kind)
            assert_that(got, equal_to(want))


def test_inferred_schema_matches_the_clis(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path)
    cli_dir = tmp_path / "cli"
    cli([str(inputs["jsonl"]), "-o", str(cli_dir)])
    _, cli_manifest = output(cli_dir)
    beam_dir = tmp_path / "beam"
    with beam.Pipeline(options=beam.options.pipeline_options.PipelineOptions(flags=[])) as p:
        _ = p | beam.Create(read_rows("jsonl", inputs["jsonl"])) | WriteTFRecords(str(beam_dir))
    _, manifest = output(beam_dir)
    assert sorted(manifest["spec"].split(",")) == sorted(cli_manifest["spec"].split(","))
    assert manifest["records"] == N


class _FailOnce(infeed_beam._WriteBundle):
    """Fails the first attempt of the bundle that holds row 0, after its
    shards are complete: the worst case, finished files of a discarded attempt."""

    marker = ""

    def process(self, row: Any, features: Any) -> Any:
        self._has_first = getattr(self, "_has_first", False) or row["id"] == 0
        return super().process(row, features)

    def finish_bundle(self) -> Any:
        out = list(super().finish_bundle())
        if getattr(self, "_has_first", False) and not os.path.exists(self.marker):
            Path(self.marker).touch()
            raise RuntimeError("this bundle fails once, on purpose")
        self._has_first = False
        yield from out


def test_a_retried_bundle_leaves_each_record_once(tmp_path: Path, monkeypatch: Any) -> None:
    _FailOnce.marker = str(tmp_path / "failed-once")
    monkeypatch.setattr(infeed_beam, "_WriteBundle", _FailOnce)
    out = tmp_path / "out"
    # The bundle-based DirectRunner retries a failed bundle (up to 4 times).
    options = beam.options.pipeline_options.PipelineOptions(
        flags=[], runner="BundleBasedDirectRunner"
    )
    with beam.Pipeline(options=options) as p:
        _ = p | beam.Create(rows()) | WriteTFRecords(
            str(out), features=FEATURES, records_per_shard=50, batch_rows=16
        )
    assert os.path.exists(_FailOnce.marker), "the bundle failed once"
    got, manifest = output(out)
    assert manifest["records"] == N
    assert sorted(got.values()) == [1] * N, "each record once"


class _FailRow(infeed_beam._WriteBundle):
    def process(self, row: Any, features: Any) -> Any:
        if row["id"] == N - 1:
            raise RuntimeError("this run fails, on purpose")
        return super().process(row, features)


def test_a_rerun_after_a_failed_run_replaces_it_exactly(tmp_path: Path, monkeypatch: Any) -> None:
    out = tmp_path / "out"
    # A run whose every attempt fails after writing (in process: the test's
    # DoFn cannot be unpickled by the multi-process workers).
    monkeypatch.setattr(infeed_beam, "_WriteBundle", _FailRow)
    options = beam.options.pipeline_options.PipelineOptions(
        flags=[], runner="BundleBasedDirectRunner"
    )
    with pytest.raises(Exception, match="on purpose"):
        with beam.Pipeline(options=options) as p:
            _ = p | beam.Create(rows()) | WriteTFRecords(
                str(out), features=FEATURES, records_per_shard=20, batch_rows=4
            )
    assert list(out.glob(".train.attempt-*.tmp")), "the failed attempts left files"
    monkeypatch.undo()
    with beam.Pipeline(options=multiprocess()) as p:
        _ = p | beam.Create(rows(), reshuffle=True) | WriteTFRecords(
            str(out), features=FEATURES, records_per_shard=40
        )
    got, manifest = output(out)
    assert manifest["records"] == N
    assert sorted(got.values()) == [1] * N


TFDS_READ = """
import json, sys
import tensorflow_datasets as tfds
b = tfds.builder_from_directory(sys.argv[1])
ds = b.as_dataset(split=sys.argv[2], shuffle_files=False)
ids = sorted(int(x["id"]) for x in tfds.as_numpy(ds))
print(json.dumps({"n": b.info.splits[sys.argv[2]].num_examples, "ids": ids}))
"""


def test_a_tfds_directory_tfds_and_infeed_open(tmp_path: Path) -> None:
    out = tmp_path / "beam_ds" / "1.0.0"
    for split, n in [("train", N), ("test", 40)]:
        with beam.Pipeline(options=multiprocess()) as p:
            _ = p | beam.Create(rows()[:n], reshuffle=True) | WriteTFRecords(
                str(out), features=FEATURES, tfds="beam_ds:1.0.0", split=split,
                records_per_shard=64,
            )
    info = json.loads((out / "dataset_info.json").read_text())
    lengths = {s["name"]: sum(int(x) for x in s["shardLengths"]) for s in info["splits"]}
    assert lengths == {"train": N, "test": 40}
    names = sorted(p.name for p in out.glob("beam_ds-train.tfrecord-*"))
    assert names[0] == f"beam_ds-train.tfrecord-00000-of-{len(names):05d}"
    files = _infeed.tfds_files(str(out), "train[:50%]+test")
    assert files, "the split string selects shards"
    pipeline = infeed.Pipeline.from_tfds(str(out), "train").parse(features=["id"]).batch(N)
    (batch,) = list(pipeline)
    assert sorted(batch["id"].tolist()) == list(range(N))
    python = os.environ.get("INFEED_PYTHON")
    if not python:
        pytest.skip("INFEED_PYTHON (a python with tensorflow-datasets) is not set")
    for split, n in [("train", N), ("test", 40)]:
        done = subprocess.run(
            [python, "-c", TFDS_READ, str(out), split], check=True, capture_output=True, text=True
        )
        read = json.loads(done.stdout.strip().splitlines()[-1])
        assert read == {"n": n, "ids": list(range(n))}


def test_a_bad_row_names_its_feature(tmp_path: Path) -> None:
    w = _infeed.RowWriter(str(tmp_path), "train", "a", FEATURES)
    good = rows()[0]
    for bad, feature, words in [
        ({**good, "label": "x"}, "label", "expected int64, found str"),
        ({**good, "score": None}, "score", "null value"),
        ({k: v for k, v in good.items() if k != "id"}, "id", "missing value"),
        ({**good, "extra": 1}, "extra", "not in the schema"),
        ({**good, "tokens": [1, 2.5]}, "tokens", "expected list of int64, found float"),
        ({**good, "id": 1 << 70}, "id", "does not fit int64"),
    ]:
        with pytest.raises(infeed.errors.ConvertError, match=words) as e:
            w.write([good, bad])
        assert e.value.feature == feature
        assert e.value.record == 1
    w.abort()
    with pytest.raises(infeed.errors.ConvertError, match="unknown type"):
        _infeed.RowWriter(str(tmp_path), "train", "a", ["x:complex"])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


TOKENIZER = ROOT / "testdata" / "tokenizer"


def token_rows() -> tuple[list[dict[str, Any]], list[list[int]]]:
    """The corpus's lines as rows, and each line's ids as the Python
    ``tokenizers`` gives them (testdata/tokenizer/expected.jsonl)."""
    lines = (TOKENIZER / "expected.jsonl").read_text().splitlines()
    expected = [json.loads(line) for line in lines]
    return [{"text": e["text"]} for e in expected], [e["input_ids"] for e in expected]


def shard_ids(dir: Path, group_to: int | None = None) -> list[list[list[int]]]:
    """Each shard's records' input_ids, in file order (attention masks all
    1); ``group_to``: the records are fixed_len lists of that many ids."""
    (manifest_path,) = dir.glob("*.manifest.json")
    manifest = json.loads(manifest_path.read_text())
    kind = "var_len" if group_to is None else f"fixed_len[{group_to}]"
    assert manifest["spec"] == f"input_ids:{kind}:int64,attention_mask:{kind}:int64"
    out = []
    for shard in manifest["shards"]:
        p = infeed.Pipeline.from_files([dir / shard["name"]]).parse(
            {"input_ids": infeed.VarLen("int64"), "attention_mask": infeed.VarLen("int64")}
        )
        records = []
        for batch in p.max_length(4096).batch(1):
            n = int(batch["input_ids_mask"].sum())
            assert batch["attention_mask"][0, :n].tolist() == [1] * n
            records.append(batch["input_ids"][0, :n].tolist())
        assert len(records) == shard["records"], shard
        out.append(records)
    return out


def test_tokenized_rows_equal_the_python_tokenizers(tmp_path: Path) -> None:
    data, want = token_rows()
    out = tmp_path / "out"
    with beam.Pipeline(options=multiprocess()) as p:
        _ = (
            p
            | beam.Create(data, reshuffle=True)
            | WriteTFRecords(
                str(out),
                features=["text:bytes"],
                tokenizer=str(TOKENIZER / "tokenizer.json"),
                records_per_shard=8,
            )
        )
    got = [ids for shard in shard_ids(out) for ids in shard]
    assert sorted(got) == sorted(want)


def test_group_to_packs_each_bundles_rows_into_full_records(tmp_path: Path) -> None:
    """group_to=16: every record holds exactly 16 ids; each shard's ids, end
    to end, are whole rows (each used at most once over all shards) and then
    at most a head of one more: the block's remainder is dropped, never a
    token invented, reordered or repeated."""
    data, rows_ids = token_rows()
    out = tmp_path / "out"
    with beam.Pipeline(options=multiprocess()) as p:
        _ = (
            p
            | beam.Create(data, reshuffle=True)
            | WriteTFRecords(
                str(out),
                features=["text:bytes"],
                tokenizer=str(TOKENIZER / "tokenizer.json"),
                group_to=16,
            )
        )
    shards = shard_ids(out, group_to=16)
    assert sum(len(s) for s in shards) > 0
    unused = list(rows_ids)
    for shard in shards:
        assert all(len(ids) == 16 for ids in shard)
        stream = [t for ids in shard for t in ids]
        at = 0
        while at < len(stream):
            rest = stream[at:]
            whole = next((r for r in unused if rest[: len(r)] == r), None)
            if whole is not None:
                unused.remove(whole)
                at += len(whole)
                continue
            # The cut: what is left is the head of a row not written whole.
            assert any(r[: len(rest)] == rest for r in unused), (at, rest)
            break
    total = sum(len(r) for r in rows_ids)
    written = 16 * sum(len(s) for s in shards)
    # Each bundle's block drops fewer than 16 ids; at most one block per row.
    assert total - 16 * len(rows_ids) < written <= total


# ConvertFiles: Beam hands out file paths, Rust reads them.


def split_inputs(tmp: Path, kind: str, parts: int = 4) -> list[Path]:
    """The rows in ``parts`` files of ``kind`` (jsonl, csv, text), with a
    blank line in each (JSONL numbers it; CSV and text skip or keep it as
    ``infeed convert`` does)."""
    data = rows()
    out = []
    for k in range(parts):
        part = data[k::parts]
        if kind == "jsonl":
            path = tmp / f"in-{k}.jsonl"
            path.write_text(
                "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part[:5])
                + "\n"
                + "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part[5:])
            )
        elif kind == "csv":
            path = tmp / f"in-{k}.csv"
            scalar = [{k2: v for k2, v in r.items() if k2 != "tokens"} for r in part]
            with path.open("w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(scalar[0]))
                w.writeheader()
                w.writerows(scalar)
        else:
            path = tmp / f"in-{k}.txt"
            path.write_text("".join(f"{r['text']}, \"quoted\"\n" for r in part))
        out.append(path)
    return out


@pytest.mark.parametrize("kind", ["jsonl", "csv", "text"])
def test_convert_files_equals_the_clis(tmp_path: Path, kind: str) -> None:
    paths = split_inputs(tmp_path, kind)
    features = [] if kind == "text" else features_of(kind)
    flags = [a for f in features for a in ("--feature", f)]
    cli_dir = tmp_path / "cli"
    cli([*map(str, paths), "-o", str(cli_dir), "--records-per-shard", "70", *flags])
    want, cli_manifest = output(cli_dir)

    beam_dir = tmp_path / "beam"
    with beam.Pipeline(options=multiprocess()) as p:
        _ = (
            p
            | beam.Create([str(x) for x in paths])
            | infeed_beam.ConvertFiles(
                str(beam_dir),
                features=features or None,
                format=kind,
                records_per_shard=70,
            )
        )
    got, manifest = output(beam_dir)
    assert got == want
    assert manifest["records"] == cli_manifest["records"] == N
    assert manifest["spec"] == cli_manifest["spec"]
    assert manifest["input"]["records_read"] == N
    assert manifest["input"]["writer"] == "infeed.beam.ConvertFiles"
    assert sorted(f["path"] for f in manifest["input"]["files"]) == sorted(map(str, paths))
    assert all(s["records"] <= 70 for s in manifest["shards"])


def test_convert_files_a_bad_record_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1}\n{"id": "x"}\n')
    with pytest.raises(Exception, match=r"bad\.jsonl.*line 2|line 2.*bad\.jsonl"):
        with beam.Pipeline() as p:
            _ = (
                p
                | beam.Create([str(path)])
                | infeed_beam.ConvertFiles(str(tmp_path / "out"), features=["id:int64"])
            )


class _FailOnceFiles(infeed_beam._ConvertBundle):
    """Fails the first attempt of the bundle that holds file 0, after its
    shards are complete."""

    marker = ""

    def process(self, unit: Any) -> Any:
        self._has_first = getattr(self, "_has_first", False) or unit[0].endswith("in-0.jsonl")
        return super().process(unit)

    def finish_bundle(self) -> Any:
        out = list(super().finish_bundle())
        if getattr(self, "_has_first", False) and not os.path.exists(self.marker):
            Path(self.marker).touch()
            raise RuntimeError("this bundle fails once, on purpose")
        self._has_first = False
        yield from out


def test_convert_files_a_retried_bundle_leaves_each_record_once(
    tmp_path: Path, monkeypatch: Any
) -> None:
    _FailOnceFiles.marker = str(tmp_path / "failed-once")
    monkeypatch.setattr(infeed_beam, "_ConvertBundle", _FailOnceFiles)
    paths = split_inputs(tmp_path, "jsonl")
    out = tmp_path / "out"
    options = beam.options.pipeline_options.PipelineOptions(
        flags=[], runner="BundleBasedDirectRunner"
    )
    with beam.Pipeline(options=options) as p:
        _ = (
            p
            | beam.Create([str(x) for x in paths])
            | infeed_beam.ConvertFiles(str(out), features=FEATURES, records_per_shard=50)
        )
    assert os.path.exists(_FailOnceFiles.marker), "the bundle failed once"
    got, manifest = output(out)
    assert manifest["records"] == N
    assert sorted(got.values()) == [1] * N, "each record once"
    want, _ = output_of_cli(tmp_path, paths, FEATURES)
    assert got == want


def output_of_cli(
    tmp: Path, paths: list[Path], features: list[str], *extra: str
) -> tuple[collections.Counter[bytes], dict[str, Any]]:
    cli_dir = tmp / "cli"
    flags = [a for f in features for a in ("--feature", f)]
    cli([*map(str, paths), "-o", str(cli_dir), *flags, *extra])
    return output(cli_dir)


@pytest.mark.parametrize(
    "mode", [["--max-length", "12"], ["--group-to", "16", "--group-block", "7"]]
)
def test_convert_files_tokenized_equal_the_clis(tmp_path: Path, mode: list[str]) -> None:
    data, _ = token_rows()
    paths = []
    for k in range(3):
        path = tmp_path / f"tok-{k}.jsonl"
        lines = [json.dumps({"text": r["text"], "n": i}) for i, r in enumerate(data[k::3])]
        lines.insert(4, "")  # a blank line: numbered, so blocks stay the CLI's
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    tokenizer = str(TOKENIZER / "tokenizer.json")
    want, cli_manifest = output_of_cli(
        tmp_path, paths, ["text:bytes"], "--tokenizer", tokenizer, "--columns", "text", *mode
    )
    kwargs: dict[str, Any] = (
        {"max_length": int(mode[1])}
        if mode[0] == "--max-length"
        else {"group_to": int(mode[1]), "group_block": int(mode[3])}
    )
    out = tmp_path / "beam"
    with beam.Pipeline(options=multiprocess()) as p:
        _ = (
            p
            | beam.Create([str(x) for x in paths])
            | infeed_beam.ConvertFiles(
                str(out),
                features=["text:bytes"],
                ignore_unknown=True,
                tokenizer=tokenizer,
                records_per_shard=8,
                # Ranges for max_length; group_to keeps files whole.
                split_bytes=256,
                **kwargs,
            )
        )
    got, manifest = output(out)
    assert sum(got.values()) > 0
    assert got == want
    assert manifest["spec"] == cli_manifest["spec"]


# ConvertFiles: large files split into byte ranges.


def ragged_input(tmp: Path, kind: str, name: str = "big") -> Path:
    """One file of ``kind`` (jsonl, csv, text) with what byte ranges must
    get right: CRLF and LF line ends, blank lines, a line of several KiB
    (across many 1 KiB ranges), and a last line without its line break."""
    lines = []
    for i, r in enumerate(rows()):
        text = "w" * 5000 if i == 123 else r["text"] + ' a "quote", a comma'
        if kind == "jsonl":
            lines.append(json.dumps({**r, "text": text}, ensure_ascii=False))
        elif kind == "csv":
            quoted = '"' + text.replace('"', '""') + '"'
            lines.append(f"{r['id']},{r['label']},{r['score']},{quoted}")
        else:
            lines.append(text)
        if i % 17 == 0:
            lines.append("")
    if kind == "csv":
        lines.insert(0, "id,label,score,text")
    ends = ["\r\n" if i % 3 == 0 else "\n" for i in range(len(lines))]
    ends[-1] = ""
    path = tmp / f"{name}.{'txt' if kind == 'text' else kind}"
    path.write_bytes("".join(line + end for line, end in zip(lines, ends, strict=True)).encode())
    return path


@pytest.mark.parametrize("kind", ["jsonl", "csv", "text"])
def test_convert_files_split_into_byte_ranges_equals_the_clis(tmp_path: Path, kind: str) -> None:
    """Two files cut into 1 KiB ranges (lines straddle their ends, one line
    covers several): the CLI's records, counts and spec, each file listed
    once in the manifest."""
    paths = [ragged_input(tmp_path, kind, "a"), ragged_input(tmp_path, kind, "b")]
    ranges = _infeed.split_file(str(paths[0]), kind, 1024, csv_one_line=True)
    assert ranges is not None and len(ranges) >= 10
    assert ranges[0][0] == 0 and ranges[-1][1] == paths[0].stat().st_size
    features = [] if kind == "text" else features_of(kind)
    want, cli_manifest = output_of_cli(tmp_path, paths, features)
    beam_dir = tmp_path / "beam"
    with beam.Pipeline(options=multiprocess()) as p:
        _ = (
            p
            | beam.Create([str(x) for x in paths])
            | infeed_beam.ConvertFiles(
                str(beam_dir),
                features=features or None,
                format=kind,
                split_bytes=1024,
                csv_one_line=True,
                records_per_shard=70,
            )
        )
    got, manifest = output(beam_dir)
    assert got == want
    n = 2 * (N + (N + 16) // 17 if kind == "text" else N)
    assert manifest["records"] == cli_manifest["records"] == sum(got.values()) == n
    assert manifest["input"]["records_read"] == n
    assert manifest["spec"] == cli_manifest["spec"]
    listed = sorted((f["path"], f["bytes"]) for f in manifest["input"]["files"])
    assert listed == sorted((str(x), x.stat().st_size) for x in paths)


def test_convert_files_reads_whole_what_cannot_be_split(tmp_path: Path) -> None:
    """gzip, CSV without csv_one_line (a quoted field holds a line break
    here) and grouped files are one unit each: still the CLI's records."""
    import gzip

    jsonl = ragged_input(tmp_path, "jsonl")
    gz = tmp_path / "big.jsonl.gz"
    gz.write_bytes(gzip.compress(jsonl.read_bytes()))
    assert _infeed.split_file(str(gz), "jsonl", 1024) is None
    csv_path = tmp_path / "multi.csv"
    csv_path.write_text("id,text\n" + "".join(f'{i},"line {i}\nand more"\n' for i in range(200)))
    assert _infeed.split_file(str(csv_path), "csv", 1024) is None
    assert _infeed.split_file(str(csv_path), "csv", 1024, csv_one_line=True) is not None
    for path, features in [(gz, FEATURES), (csv_path, ["id:int64", "text:bytes"])]:
        cli_tmp = tmp_path / f"cli-of-{path.name}"
        cli_tmp.mkdir()
        want, _ = output_of_cli(cli_tmp, [path], features)
        out = tmp_path / f"beam-{path.name}"
        with beam.Pipeline(options=multiprocess()) as p:
            _ = (
                p
                | beam.Create([str(path)])
                | infeed_beam.ConvertFiles(
                    str(out),
                    features=features,
                    format="csv" if path.suffix == ".csv" else "jsonl",
                    split_bytes=1024,
                )
            )
        got, manifest = output(out)
        assert got == want
        assert manifest["records"] == (N if path == gz else 200)
    # Told wrongly that CSV records are one line each: the pipeline fails,
    # nothing is committed.
    out = tmp_path / "wrong"
    with pytest.raises(Exception, match="a quoted field holds a line break"):
        with beam.Pipeline() as p:
            _ = (
                p
                | beam.Create([str(csv_path)])
                | infeed_beam.ConvertFiles(
                    str(out),
                    features=["id:int64", "text:bytes"],
                    format="csv",
                    split_bytes=1024,
                    csv_one_line=True,
                )
            )
    assert not list(out.glob("*.manifest.json"))


def test_convert_files_a_bad_record_in_a_range_names_its_byte(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = '{"id": 1}\n' * 300
    path.write_text(good + '{"id": "x"}\n' + good)
    with pytest.raises(Exception, match=rf"bad\.jsonl: byte {len(good)}: column \"id\""):
        with beam.Pipeline() as p:
            _ = (
                p
                | beam.Create([str(path)])
                | infeed_beam.ConvertFiles(
                    str(tmp_path / "out"), features=["id:int64"], split_bytes=1024
                )
            )


def test_convert_files_copies_other_schemes_with_beams_file_systems(tmp_path: Path) -> None:
    """A URL of a scheme infeed does not read (here one registered with
    Beam for the test) is copied by Beam's file systems and read whole."""
    from apache_beam.io.localfilesystem import LocalFileSystem

    class Prefixed(LocalFileSystem):
        @classmethod
        def scheme(cls) -> str:
            return "infeedtest"

        def open(self, path: str, *args: Any, **kwargs: Any) -> Any:
            return super().open(path.removeprefix("infeedtest://"), *args, **kwargs)

    path = ragged_input(tmp_path, "jsonl")
    url = f"infeedtest://{path}"
    want, _ = output_of_cli(tmp_path, [path], FEATURES)
    out = tmp_path / "beam"
    # In process: the file system is registered in this interpreter only.
    with beam.Pipeline() as p:
        _ = (
            p
            | beam.Create([url])
            | infeed_beam.ConvertFiles(str(out), features=FEATURES, split_bytes=1024)
        )
    got, manifest = output(out)
    assert got == want
    assert manifest["input"]["files"] == [
        {"path": url, "format": "jsonl", "bytes": path.stat().st_size}
    ]


# Cloud inputs and outputs, on the storage emulators.


def remote_output(url: str) -> tuple[collections.Counter[bytes], dict[str, Any]]:
    """``output`` for a bucket prefix: every record of the shards its
    manifest lists (each shard's count the manifest's), nothing else there."""
    manifest = json.loads(stores.get(f"{url}/train.manifest.json"))
    got: collections.Counter[bytes] = collections.Counter()
    for shard in manifest["shards"]:
        data = stores.get(f"{url}/{shard['name']}")
        recs = frames(data)
        assert len(recs) == shard["records"], shard
        assert len(data) == shard["bytes"], shard
        # Its index in .infeed-index beside it (no `*` reaches it there).
        assert stores.get(f"{url}/.infeed-index/{shard['name']}.index")[:4] == b"INFX", shard
        got.update(recs)
    assert sum(got.values()) == manifest["records"]
    listed = {f"{url}/{s['name']}" for s in manifest["shards"]} | {f"{url}/train.manifest.json"}
    assert sorted(_infeed.list_files(f"{url}/*")) == sorted(listed), "no stray object"
    return got, manifest


@pytest.mark.skipif(
    not stores.EMULATORS,
    reason="needs the storage emulators (INFEED_EMULATORS=1): bash scripts/emulators.sh "
    'start; eval "$(bash scripts/emulators.sh env)" (scripts/test.sh does both)',
)
@pytest.mark.parametrize("scheme", ["gs", "s3", "az"])
def test_cloud_inputs_and_outputs(tmp_path: Path, scheme: str) -> None:
    """ConvertFiles reads JSONL and CSV objects (split into 1 KiB ranges,
    read by range requests) and writes shards and manifest into the bucket;
    WriteTFRecords writes rows there: the CLI's records on the same data,
    exact counts, nothing else left. gs:// writes go through a proxy that
    turns object_store's XML-API writes into fake-gcs-server's JSON API
    (``stores.gcs_writable``)."""
    writable: AbstractContextManager[Any] = (
        stores.gcs_writable(tmp_path) if scheme == "gs" else nullcontext()
    )
    with writable:
        base = f"{scheme}://{stores.BUCKET}/beam-{uuid.uuid4().hex}"
        local = [ragged_input(tmp_path, "jsonl", "a"), ragged_input(tmp_path, "jsonl", "b")]
        urls = []
        for path in local:
            urls.append(f"{base}/in/{path.name}")
            stores.put(urls[-1], path.read_bytes())
        want, cli_manifest = output_of_cli(tmp_path, local, FEATURES)
        with beam.Pipeline(options=multiprocess()) as p:
            _ = (
                p
                | beam.Create(urls)
                | infeed_beam.ConvertFiles(
                    f"{base}/files", features=FEATURES, split_bytes=1024, records_per_shard=70
                )
            )
        got, manifest = remote_output(f"{base}/files")
        assert got == want
        assert manifest["records"] == cli_manifest["records"] == 2 * N
        assert manifest["spec"] == cli_manifest["spec"]
        listed = sorted((f["path"], f["bytes"]) for f in manifest["input"]["files"])
        assert listed == sorted(zip(urls, (x.stat().st_size for x in local), strict=True))

        # CSV by ranges: every range reads the object's header first.
        csv_path = ragged_input(tmp_path, "csv")
        stores.put(f"{base}/in/big.csv", csv_path.read_bytes())
        (tmp_path / "csv").mkdir()
        want, _ = output_of_cli(tmp_path / "csv", [csv_path], features_of("csv"))
        with beam.Pipeline(options=multiprocess()) as p:
            _ = (
                p
                | beam.Create([f"{base}/in/big.csv"])
                | infeed_beam.ConvertFiles(
                    f"{base}/csv",
                    features=features_of("csv"),
                    format="csv",
                    csv_one_line=True,
                    split_bytes=1024,
                )
            )
        got, manifest = remote_output(f"{base}/csv")
        assert got == want
        assert manifest["records"] == N

        inputs = write_inputs(tmp_path)
        (tmp_path / "rows").mkdir()
        want, _ = output_of_cli(tmp_path / "rows", [inputs["jsonl"]], FEATURES)
        with beam.Pipeline(options=multiprocess()) as p:
            _ = (
                p
                | beam.Create(read_rows("jsonl", inputs["jsonl"]), reshuffle=True)
                | WriteTFRecords(f"{base}/rows", features=FEATURES, records_per_shard=70)
            )
        got, manifest = remote_output(f"{base}/rows")
        assert got == want
        assert manifest["records"] == N
