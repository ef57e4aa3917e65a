"""Types of ``infeed._infeed``, the Rust half of the package (python/src/*.rs).

A pipeline crosses into it as its description (the engine's
``infeed::pipeline::Description``) in JSON, as :class:`infeed.Pipeline`
keeps it.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Final, final

import numpy.typing as npt

# The alignment, in bytes, of every buffer a batch's arrays view.
ALIGN: Final[int]

# The package's version: python/Cargo.toml's, compiled in.
__version__: Final[str]

def list_files(pattern: str) -> list[str]:
    """The files a glob matches (local paths or gs://, s3://, az:// URLs), sorted."""

def describe(description: str) -> str:
    """The description (JSON) checked, with its defaults filled in; a bad
    value raises ``SpecError`` naming its place."""

def files_of(description: str) -> tuple[list[str], dict[str, list[str]]]:
    """The files the described pipeline reads, before host sharding, and each
    glob's files (what a run takes as ``listed``)."""

def positions_of(
    rows: int, files: list[str], records: bytes, pieces: bytes | None = None
) -> list[Any]:
    """The rows ``Batches.provenance()`` gave, listed as ``positions()``
    lists them."""

def pooled_empty(nbytes: int) -> npt.NDArray[Any]:
    """``nbytes`` bytes (uint8, whatever they held) in a buffer that returns
    to infeed's pool when the last array viewing it is collected."""

def unpad_rows(
    values: npt.NDArray[Any], mask: npt.NDArray[Any], one: bytes, size: int
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]] | None:
    """A padded feature's rows (bytes) without their padding, and their
    lengths; ``None`` unless its mask is ones then zeros and its padding
    zeros (``infeed.ray``'s transfer)."""

def repad_rows(
    out: npt.NDArray[Any],
    at: int,
    lengths: npt.NDArray[Any],
    size: int,
    values: npt.NDArray[Any] | None = None,
    one: bytes | None = None,
) -> None:
    """Writes rows sent by :func:`unpad_rows` (or, without ``values``, their
    mask) into rows ``at..`` of ``out`` (bytes)."""

def merge_states(states: Sequence[bytes], ended: Sequence[bool] | None = None) -> bytes:
    """The states of several hosts of one job, taken at the same step, merged
    into one that any host of the job on another host count restores from.
    ``ended[i]``: every stream of state ``i``'s host has ended, so its state
    of an earlier step stands for this one (``infeed.ray``'s actors)."""

def records_of(
    description: str,
    wanted: list[int],
    state: bytes | None = None,
    listed: Mapping[str, list[str]] | None = None,
) -> dict[int, list[list[tuple[str, int]]]]:
    """The records of global steps ``wanted``: per step, per global row, the
    ``(file, offset)`` of its records."""

def record_indexes(
    positions: list[tuple[str, int]], index_dir: str | None = None
) -> list[int | None]:
    """The index in its file of the record at each ``(file, offset)``."""

def limit_of(
    seconds: float,
    batches: int,
    consumer_wait: float,
    stages: list[tuple[float, float]],
) -> tuple[str, str | None, float | None]:
    """What limits a pipeline over a stretch: its word, the busiest stage and
    the share behind it (the engine's rule)."""

def shapes(
    description: str, listed: Mapping[str, list[str]] | None = None
) -> list[list[tuple[str, str, list[int]]]]:
    """Every batch shape the described pipeline can emit: a list of lists of
    ``(name, numpy dtype name, shape)``."""

def tfds_files(dir: str, split: str) -> list[str]:
    """The files a TFDS split string selects in the dataset directory, in
    reading order."""

def tfds_spec(
    dir: str,
) -> list[tuple[tuple[str, str, str, list[int], list[Any] | None], str]]:
    """The spec of a TFDS dataset's own features (features.json): entries
    ``(name, kind, dtype, shape, default)``, each with the TFDS feature it
    comes from (``"Text"``, ``"Image"``, ...)."""

@final
class Buffer:
    """The owner of one tensor's buffer: the ``base`` of the numpy array
    viewing it. Made by the engine only (it has no constructor)."""

    @property
    def address(self) -> int:
        """Address of the first byte (a multiple of :data:`ALIGN`)."""
    @property
    def nbytes(self) -> int:
        """Bytes of data."""
    @property
    def capacity(self) -> int:
        """Bytes allocated (the pool's capacity class)."""
    @property
    def pooled(self) -> bool:
        """Whether the buffer goes back to a pool when dropped."""

@final
class Batches:
    """A running pipeline (:class:`infeed.Iterator` wraps it)."""

    def __init__(
        self,
        description: str,
        state: bytes | None = None,
        digests: bool = False,
        listed: Mapping[str, list[str]] | None = None,
    ) -> None:
        """Starts the pipeline ``description`` (JSON) describes, from
        ``state`` (bytes from :meth:`state`) when given; with ``digests``,
        takes each batch's digest; on the files its globs matched before
        (``listed``, by pattern), listing none of those again."""
    def next(self) -> dict[str, npt.NDArray[Any]] | None:
        """The next batch as a dict name -> numpy array, or ``None`` at the end."""
    def state(self) -> bytes:
        """The state after the last batch :meth:`next` returned."""
    @property
    def source_counts(self) -> list[tuple[str, int]]: ...
    @property
    def shape_schedule(self) -> int:
        """A digest of the schedule by which batches take their shapes when
        hosts must agree on them (0 when each batch's shape is its own)."""
    @property
    def digest(self) -> str | None:
        """The last batch's digest, as ``infeed bench --digests`` lists it."""
    @property
    def real_rows(self) -> int | None:
        """Rows of the last batch that hold data (the rest are padding rows)."""
    def positions(self) -> list[Any]:
        """Where each row of the last batch came from: ``(file, offset)`` per
        row, ``None`` for padding, a list of them for a packed row."""
    def provenance(self) -> tuple[int, list[str], bytes, bytes | None] | None:
        """What ``positions()`` lists, as data that pickles small
        (:func:`positions_of` lists it)."""
    @property
    def batches_delivered(self) -> int:
        """Batches delivered so far, counting those before a restore."""
    def stats(self) -> dict[str, int | str | None]:
        """Figures so far: ``batches``, ``consumer_wait_ns``, ``first_batch_ns``
        (``None`` before the first batch) and, per stage, its figures as text;
        empty once closed."""
    def figures(self) -> dict[str, Any]:
        """The figures so far as numbers (seconds, counts), per stage too."""
    def close(self) -> None:
        """Stops the pipeline's threads; :meth:`state` still answers."""

# The Beam writer (python/src/writer.rs; features `beam` and `tokenize`).

@final
class RowWriter:
    """Writes one bundle attempt's rows (dicts) into shards under temporary
    names unique to ``attempt``."""

    def __init__(
        self,
        output: str,
        stem: str,
        attempt: str,
        features: Sequence[str],
        *,
        compression: str = "none",
        shard_bytes: int | None = None,
        records_per_shard: int | None = None,
        tokenizer: str | None = None,
        text_column: str = "text",
        max_length: int | None = None,
        group_to: int | None = None,
        group_block: int = 1000,
        add_special_tokens: bool = True,
        null_omit: bool = False,
        ignore_unknown: bool = False,
    ) -> None: ...
    def write(self, rows: Sequence[Any]) -> None:
        """Checks, encodes and writes the rows; a bad row raises
        ``infeed.errors.ConvertError`` (``record``: its index, ``feature``)."""
    def write_file(
        self, path: str, format: str, start: int | None = None, end: int | None = None
    ) -> tuple[str, str, int, int]:
        """Reads a file (a path or a ``gs://``, ``s3://``, ``az://``,
        ``http(s)://`` URL; ``jsonl``, ``csv``, ``tsv``, ``text``; gzip or
        zstd by its first bytes) with ``infeed convert``'s readers and writes
        its records without the GIL: the whole file, or the lines that start
        in bytes ``[start, end)`` (a range of ``split_file``). Gives
        ``(path, format, bytes of the file, records)``."""
    def finish(self) -> list[tuple[str, int, int, int]]:
        """The attempt's shards: ``(temp name, records, bytes, crc32c)``."""
    def abort(self) -> None:
        """Removes what the attempt wrote."""
    @property
    def output_spec(self) -> str:
        """The features written, as a spec string."""

def split_file(
    path: str, format: str, split_bytes: int, *, csv_one_line: bool = False
) -> list[tuple[int, int]] | None:
    """The byte ranges of about ``split_bytes`` that ``RowWriter.write_file``
    may read of ``path`` on different workers, or ``None`` when it is read
    whole (compressed, CSV/TSV unless ``csv_one_line``, or not larger than
    one range)."""

def finalize(
    output: str,
    stem: str,
    features: Sequence[str],
    closed: Sequence[tuple[str, int, int, int]],
    *,
    compression: str = "none",
    tokenizer: str | None = None,
    text_column: str = "text",
    max_length: int | None = None,
    group_to: int | None = None,
    group_block: int = 1000,
    tfds: tuple[str, str] | None = None,
    records_read: int = 0,
    writer: str = "infeed.beam.WriteTFRecords",
    files: Sequence[tuple[str, str, int]] = (),
) -> tuple[str, list[tuple[str, int, int]]]:
    """Commits the shards of the attempts that succeeded, writes the manifest
    (and TFDS files), removes every other attempt's files: ``(manifest,
    [(shard name, records, bytes)])``."""

def resolve_feature(name: str, seen: dict[str, Any]) -> str:
    """A ``--feature`` word from what schema inference saw, by ``infeed
    convert``'s rules."""

def can_tokenize() -> bool:
    """Whether this build can tokenize."""

class RecordSource:
    """Records of shards by their index (``infeed.grain.TFRecordSource``)."""

    def __new__(
        cls, files: Sequence[str], index_dir: str | None = None, spec: str | None = None
    ) -> RecordSource: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Any:
        """The record at ``index``: bytes, or a dict of numpy arrays."""
    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """The records at ``indices``, in order."""
    def get_many(self, indices: Sequence[int]) -> list[Any]:
        """The records at ``indices``: bytes, or dicts of numpy arrays."""

def build_index(
    files: Sequence[str], output: str | None = None, span: int = 1 << 20
) -> list[tuple[str, str, int]]:
    """Writes each shard's index: ``(shard, index, records)`` per shard."""
