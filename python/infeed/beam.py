"""infeed's TFRecord writer as an Apache Beam transform (``pip install infeed[beam]``).

::

    import apache_beam as beam
    from infeed.beam import WriteTFRecords

    with beam.Pipeline(options=options) as p:
        (p
         | beam.io.ReadFromParquet("gs://bucket/raw/*.parquet")
         | WriteTFRecords("gs://bucket/tfrecords/", features=["label:int64", "text:bytes"]))

Rows are dicts. Each is checked against the schema (the words of ``infeed
convert --feature``; inferred over all rows when not given), encoded as a
``tf.train.Example`` by infeed's Rust encoder (the same bytes ``infeed
convert`` writes for the same values and features) and written into shards
of about ``shard_bytes`` per bundle, under temporary names unique to the
bundle's attempt. One finalize step then names the shards
``{prefix}-{i:05d}-of-{n:05d}.tfrecord`` (or TFDS's names with ``tfds=``),
writes the manifest ``infeed convert`` writes (per-shard record counts that
``Pipeline.equal_batches`` reads) and removes the files of attempts that
failed, so a retried bundle leaves each record exactly once. docs/beam.md
has the details, the runners' command lines and the speed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from infeed import _infeed

__all__ = ["ConvertFiles", "WriteTFRecords"]

# Above this, an integer is not exact as float32 (schema inference keeps
# such a column int64 rather than rounding it).
_FLOAT32_EXACT = 1 << 24


def _place(value: object) -> str:
    text = repr(value)
    return f"value {text[:40]}{'...' if len(text) > 40 else ''}"


def _see_value(seen: dict[str, Any], value: object) -> None:
    kind: str
    if isinstance(value, bool):
        kind = "int"
    elif isinstance(value, int):
        kind = "int"
        if abs(value) > _FLOAT32_EXACT:
            seen.setdefault("inexact_int", _place(value))
    elif isinstance(value, float):
        kind = "float"
    elif isinstance(value, (str, bytes)):
        kind = "bytes"
    else:
        what = "an object" if isinstance(value, Mapping) else f"a {type(value).__name__}"
        seen.setdefault("unsupported", (_place(value), what))
        return
    seen.setdefault(kind, _place(value))


def _observe(acc: dict[str, dict[str, Any]], row: Mapping[str, object]) -> None:
    """Notes the kinds of every value of ``row`` (as ``infeed convert``'s
    inference does for JSON)."""
    for name, value in row.items():
        seen = acc.setdefault(name, {})
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            seen.setdefault("list", _place(value))
            for item in value:
                if isinstance(item, (list, tuple)):
                    seen.setdefault("unsupported", (_place(value), "a list of lists"))
                elif item is not None:
                    _see_value(seen, item)
        else:
            seen.setdefault("scalar", _place(value))
            _see_value(seen, value)


class _InferSchema(beam.CombineFn):
    """The ``--feature`` words of every column, from all rows (columns in
    name order)."""

    def create_accumulator(self) -> dict[str, dict[str, Any]]:
        return {}

    def add_input(
        self, acc: dict[str, dict[str, Any]], row: Mapping[str, object]
    ) -> dict[str, dict[str, Any]]:
        _observe(acc, row)
        return acc

    def merge_accumulators(
        self, accs: Iterable[dict[str, dict[str, Any]]]
    ) -> dict[str, dict[str, Any]]:
        merged: dict[str, dict[str, Any]] = {}
        for acc in accs:
            for name, seen in acc.items():
                into = merged.setdefault(name, {})
                for kind, place in seen.items():
                    into.setdefault(kind, place)
        return merged

    def extract_output(self, acc: dict[str, dict[str, Any]]) -> list[str]:
        return [_infeed.resolve_feature(name, acc[name]) for name in sorted(acc)]


class _WriteBundle(beam.DoFn):
    """Writes each bundle's rows into shards of one attempt; at the end of the
    bundle emits ``{"shards": [(temp, records, bytes, crc32c)], "rows": n}``."""

    def __init__(self, output: str, stem: str, options: dict[str, Any], batch_rows: int) -> None:
        self._output = output
        self._stem = stem
        self._options = options
        self._batch_rows = batch_rows
        self._writer: Any = None
        self._rows: list[Mapping[str, object]] = []
        self._count = 0

    def start_bundle(self) -> None:
        self._writer = None
        self._rows = []
        self._count = 0

    def process(self, row: Mapping[str, object], features: Sequence[str]) -> Iterator[Any]:
        if self._writer is None:
            # A fresh name per attempt: a retried bundle never writes over, or
            # into, the files of an attempt that failed.
            self._writer = _infeed.RowWriter(
                self._output, self._stem, uuid.uuid4().hex, list(features), **self._options
            )
        self._rows.append(row)
        self._count += 1
        if len(self._rows) >= self._batch_rows:
            self._writer.write(self._rows)
            self._rows = []
        return iter(())

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if self._writer is None:
            return
        if self._rows:
            self._writer.write(self._rows)
            self._rows = []
        shards = self._writer.finish()
        self._writer = None
        yield GlobalWindows.windowed_value({"shards": shards, "rows": self._count})

    def teardown(self) -> None:
        # A bundle that failed: its files go now (finalize would remove them too).
        if self._writer is not None:
            self._writer.abort()
            self._writer = None


class _WriteBundleKnown(beam.DoFn):
    """``_WriteBundle`` with the features given up front: ``process`` takes the
    row alone, so Beam calls it through its fast invoker (a side input or any
    extra argument sends every element through the per-window invoker: 10%
    fewer records/s on the DirectRunner, docs/performance.md, "Beam")."""

    def __init__(self, inner: _WriteBundle, features: Sequence[str]) -> None:
        self._inner = inner
        self._features = list(features)

    def start_bundle(self) -> None:
        self._inner.start_bundle()

    def process(self, row: Mapping[str, object]) -> Iterator[Any]:
        return self._inner.process(row, self._features)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        return self._inner.finish_bundle()

    def teardown(self) -> None:
        self._inner.teardown()


def _finalize(
    attempts: list[dict[str, Any]],
    features: Sequence[str],
    output: str,
    stem: str,
    options: dict[str, Any],
    writer: str = "infeed.beam.WriteTFRecords",
) -> dict[str, Any]:
    shards = sorted(s for a in attempts for s in a["shards"])
    rows = sum(a["rows"] for a in attempts)
    files = sorted(tuple(f) for a in attempts for f in a.get("files", ()))
    manifest, committed = _infeed.finalize(
        output,
        stem,
        list(features),
        shards,
        records_read=rows,
        writer=writer,
        files=files,
        **options,
    )
    return {
        "manifest": manifest,
        "shards": [{"name": n, "records": r, "bytes": b} for n, r, b in committed],
        "records": sum(r for _, r, _ in committed),
        "rows": rows,
    }


class WriteTFRecords(beam.PTransform):
    """Writes a ``PCollection`` of rows (dicts) as TFRecord shards of
    ``tf.train.Example`` with a manifest, exactly once per row.

    Args:
        output: a folder, or a ``gs://``, ``s3://``, ``az://`` prefix (with
            credentials from the environment, as for reading).
        features: the schema as ``infeed convert --feature`` words
            (``label:int64``, ``score:float``, ``text:bytes``, a list
            ``ids:int64[]``, a fixed-length list ``xyz:float[3]``), in the
            order features are written; ``None`` infers them from all rows
            with ``infeed convert``'s rules (one more pass; columns in name
            order).
        prefix: shard names ``{prefix}-00000-of-00016.tfrecord``.
        tfds: ``"name:version"``: write a TFDS directory (its split ``split``)
            that ``tfds.builder_from_directory(output)`` and
            ``Pipeline.from_tfds`` open.
        shard_bytes: target shard size (framed bytes, before compression),
            per bundle: each bundle cuts its own shards.
        records_per_shard: records per shard instead of a size.
        compression: ``"none"``, ``"gzip"`` or ``"zlib"`` (not with ``tfds``).
        tokenizer: a Hugging Face ``tokenizer.json``: the ``text_column`` is
            replaced by ``input_ids`` and ``attention_mask``.
        max_length: truncate each row's tokens to this many.
        group_to: concatenate the tokens of each ``group_block`` rows of a
            bundle and cut records of exactly this many tokens, dropping each
            block's remainder (per bundle, not global: see docs/beam.md).
        null_omit: a ``None`` or missing value leaves the feature out of the
            record instead of failing the row.
        ignore_unknown: keys outside the schema are ignored instead of
            failing the row.
        batch_rows: rows handed to the Rust writer at once.

    The output is a one-element ``PCollection``: ``{"manifest", "shards":
    [{"name", "records", "bytes"}], "records", "rows"}``.
    """

    def __init__(
        self,
        output: str,
        *,
        features: Sequence[str] | None = None,
        prefix: str = "train",
        tfds: str | None = None,
        split: str = "train",
        shard_bytes: int = 100_000_000,
        records_per_shard: int | None = None,
        compression: str = "none",
        tokenizer: str | None = None,
        text_column: str = "text",
        max_length: int | None = None,
        group_to: int | None = None,
        group_block: int = 1000,
        add_special_tokens: bool = True,
        null_omit: bool = False,
        ignore_unknown: bool = False,
        batch_rows: int = 1000,
    ) -> None:
        super().__init__()
        if tokenizer is not None and not _infeed.can_tokenize():
            raise ValueError("this build of infeed has no tokenizer (the `tokenize` feature)")
        if not prefix or "/" in prefix or prefix.startswith("."):
            raise ValueError(f"prefix {prefix!r}: a plain, non-hidden file name prefix")
        self._output = output
        self._features = list(features) if features is not None else None
        self._stem = prefix
        tokenize = {
            "tokenizer": tokenizer,
            "text_column": text_column,
            "max_length": max_length,
            "group_to": group_to,
            "group_block": group_block,
        }
        self._writer_options: dict[str, Any] = {
            "compression": compression,
            "shard_bytes": shard_bytes,
            "records_per_shard": records_per_shard,
            "add_special_tokens": add_special_tokens,
            "null_omit": null_omit,
            "ignore_unknown": ignore_unknown,
            **tokenize,
        }
        self._finalize_options: dict[str, Any] = {
            "compression": compression,
            "tfds": (tfds, split) if tfds is not None else None,
            **tokenize,
        }
        if tfds is not None:
            # The shards carry the TFDS stem from the start; finalize checks the rest.
            name = tfds.split(":", 1)[0]
            self._stem = f"{name}-{split}"
        self._batch_rows = batch_rows

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        if self._features is None:
            features = rows | "InferSchema" >> beam.CombineGlobally(_InferSchema())
        else:
            features = rows.pipeline | "Schema" >> beam.Create([self._features])
        schema = beam.pvalue.AsSingleton(features)
        write = _WriteBundle(self._output, self._stem, self._writer_options, self._batch_rows)
        if self._features is None:
            attempts = rows | "WriteBundles" >> beam.ParDo(write, schema)
        else:
            attempts = rows | "WriteBundles" >> beam.ParDo(
                _WriteBundleKnown(write, self._features)
            )
        return (
            attempts
            | "Collect" >> beam.combiners.ToList()
            | "Finalize"
            >> beam.Map(_finalize, schema, self._output, self._stem, self._finalize_options)
        )


# The schemes infeed's Rust readers open themselves (src/source/url.rs:
# credentials from the environment); a file under any other scheme is copied
# by Beam's file systems and read whole.
_RUST_SCHEMES = frozenset(
    {"file", "gs", "s3", "s3a", "az", "azure", "adl", "abfs", "abfss", "http", "https"}
)


def _rust_reads(path: str) -> bool:
    scheme, sep, _ = path.partition("://")
    return not sep or scheme.lower() in _RUST_SCHEMES


@contextmanager
def _local_copy(path: str) -> Iterator[str]:
    """A local temporary copy of ``path``, a URL of a scheme infeed does not
    read itself (``hdfs://``, say), made with Beam's file systems (its bytes
    as stored: Rust recognizes gzip and zstd by their first bytes)."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    fd, local = tempfile.mkstemp(prefix="infeed-input-")
    try:
        with (
            os.fdopen(fd, "wb") as out,
            FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as src,
        ):
            shutil.copyfileobj(src, out, 1 << 22)
        yield local
    finally:
        os.remove(local)


# A unit of work of ConvertFiles: a file and a byte range of it, or (None,
# None) for the whole file.
_Unit = tuple[str, int | None, int | None]


class _SplitFiles(beam.DoFn):
    """Each file as ConvertFiles' units of work: the byte ranges of a large
    uncompressed file (``_infeed.split_file``: its size and first bytes), or
    the whole file."""

    def __init__(self, fmt: str, split_bytes: int, csv_one_line: bool) -> None:
        self._format = fmt
        self._split_bytes = split_bytes
        self._csv_one_line = csv_one_line

    def process(self, path: str) -> Iterator[_Unit]:
        ranges = None
        if self._split_bytes > 0 and _rust_reads(path):
            ranges = _infeed.split_file(
                path, self._format, self._split_bytes, csv_one_line=self._csv_one_line
            )
        if ranges is None:
            yield (path, None, None)
        else:
            for start, end in ranges:
                yield (path, start, end)


class _ConvertBundle(beam.DoFn):
    """Reads each unit (a file, or a byte range of one) of a bundle with
    ``infeed convert``'s Rust readers into shards of one attempt, without the
    GIL; at the end of the bundle emits ``{"shards", "rows", "files": [(path,
    format, bytes)]}`` (a file is listed by its whole or first range)."""

    def __init__(
        self, output: str, stem: str, features: Sequence[str], options: dict[str, Any], fmt: str
    ) -> None:
        self._output = output
        self._stem = stem
        self._features = list(features)
        self._options = options
        self._format = fmt
        self._writer: Any = None
        self._rows = 0
        self._files: list[tuple[str, str, int]] = []

    def start_bundle(self) -> None:
        self._writer = None
        self._rows = 0
        self._files = []

    def process(self, unit: _Unit) -> Iterator[Any]:
        path, start, end = unit
        if self._writer is None:
            self._writer = _infeed.RowWriter(
                self._output, self._stem, uuid.uuid4().hex, self._features, **self._options
            )
        if _rust_reads(path):
            _, fmt, size, records = self._writer.write_file(path, self._format, start, end)
        else:
            with _local_copy(path) as local:
                _, fmt, size, records = self._writer.write_file(local, self._format)
        self._rows += records
        if not start:
            self._files.append((path, fmt, size))
        return iter(())

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if self._writer is None:
            return
        shards = self._writer.finish()
        self._writer = None
        yield GlobalWindows.windowed_value(
            {"shards": shards, "rows": self._rows, "files": self._files}
        )

    def teardown(self) -> None:
        if self._writer is not None:
            self._writer.abort()
            self._writer = None


class ConvertFiles(WriteTFRecords):
    """Converts a ``PCollection`` of input files (paths, or ``gs://``,
    ``s3://``, ``az://`` URLs) into TFRecord shards of ``tf.train.Example``
    with a manifest, exactly once per record: Beam distributes the files (and
    byte ranges of large ones) and retries, Rust reads them.

    ::

        paths = p | fileio.MatchFiles("gs://bucket/raw/*.jsonl") | beam.Map(lambda m: m.path)
        paths | ConvertFiles("gs://bucket/tfrecords/", features=["label:int64", "text:bytes"])

    Each file is read by ``infeed convert``'s own readers (``format``:
    ``"jsonl"``, ``"csv"``, ``"tsv"``, ``"text"`` one record per line; gzip
    and zstd recognized by their first bytes; not Parquet), checked, encoded
    and written by the writer of ``WriteTFRecords`` without the GIL, so no
    record becomes a Python object. The records equal ``infeed convert``'s
    on the same files. A bad record fails its bundle with
    ``infeed.errors.ConvertError`` naming the file and line (in a byte range
    that does not start the file: the record's byte offset). Local paths,
    ``file://``, ``gs://``, ``s3://``, ``az://`` and ``http(s)://`` are read
    by Rust (credentials from the environment, as for infeed's other reads);
    a URL of another scheme is copied to a local temporary file by Beam's
    file systems and read whole.

    An uncompressed JSONL or text file larger than ``split_bytes`` is read
    as byte ranges of about that size, by as many workers: a range owns the
    lines that start in it. CSV and TSV files are split only with
    ``csv_one_line=True``, the word that no quoted field holds a line break
    (a record that does span lines then fails the pipeline; never a wrong
    record); otherwise, and for compressed files, one file is one unit of
    work. ``split_bytes=0`` never splits.

    The arguments are ``WriteTFRecords``'s, plus ``format``, ``split_bytes``
    and ``csv_one_line``. ``features`` is required for JSONL and CSV; for
    ``"text"``, and with ``group_to``, the schema is the ``text_column``
    alone (as in ``infeed convert``: other columns are ignored).
    ``group_to`` blocks are the CLI's: ``group_block`` consecutive records
    of one file, so a file's grouped records are the CLI's too, and files
    are not split. The output is ``WriteTFRecords``'s one-element summary.
    """

    def __init__(
        self,
        output: str,
        *,
        features: Sequence[str] | None = None,
        format: str = "jsonl",
        split_bytes: int = 64 << 20,
        csv_one_line: bool = False,
        prefix: str = "train",
        tfds: str | None = None,
        split: str = "train",
        shard_bytes: int = 100_000_000,
        records_per_shard: int | None = None,
        compression: str = "none",
        tokenizer: str | None = None,
        text_column: str = "text",
        max_length: int | None = None,
        group_to: int | None = None,
        group_block: int = 1000,
        add_special_tokens: bool = True,
        null_omit: bool = False,
        ignore_unknown: bool = False,
    ) -> None:
        fmt = format.lower()
        if fmt not in ("jsonl", "json", "ndjson", "csv", "tsv", "text", "txt"):
            raise ValueError(f"format {format!r}: use jsonl, csv, tsv or text")
        if split_bytes < 0:
            raise ValueError(f"split_bytes {split_bytes}: a size in bytes, or 0 (never split)")
        text_only = fmt in ("text", "txt") or (tokenizer is not None and group_to is not None)
        if text_only:
            features, ignore_unknown = [f"{text_column}:bytes"], True
        elif features is None:
            raise ValueError(f"ConvertFiles needs features for {fmt} (the --feature words)")
        super().__init__(
            output,
            features=features,
            prefix=prefix,
            tfds=tfds,
            split=split,
            shard_bytes=shard_bytes,
            records_per_shard=records_per_shard,
            compression=compression,
            tokenizer=tokenizer,
            text_column=text_column,
            max_length=max_length,
            group_to=group_to,
            group_block=group_block,
            add_special_tokens=add_special_tokens,
            null_omit=null_omit,
            ignore_unknown=ignore_unknown,
        )
        self._format = fmt
        # Grouped blocks count records from a file's start: files stay whole.
        self._split_bytes = 0 if group_to is not None else split_bytes
        self._csv_one_line = csv_one_line

    def expand(self, paths: beam.PCollection) -> beam.PCollection:
        features = list(self._features or ())
        convert = _ConvertBundle(
            self._output, self._stem, features, self._writer_options, self._format
        )
        split = _SplitFiles(self._format, self._split_bytes, self._csv_one_line)
        return (
            paths
            | "Split" >> beam.ParDo(split)
            # Units to workers one by one (fileio.MatchFiles emits every file
            # from one element, and the ranges of a file come out together:
            # without this they would stay on one worker).
            | "Spread" >> beam.Reshuffle()
            | "ConvertFiles" >> beam.ParDo(convert)
            | "Collect" >> beam.combiners.ToList()
            | "Finalize"
            >> beam.Map(
                _finalize,
                features,
                self._output,
                self._stem,
                self._finalize_options,
                writer="infeed.beam.ConvertFiles",
            )
        )
