"""Indexes of TFRecord shards: what random access (``infeed.grain``) and
``Pipeline.global_shuffle`` read."""

from __future__ import annotations

import os
from collections.abc import Iterable

from infeed import _infeed


def files_of(files: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[str]:
    """A glob's shards (sorted), or the files given."""
    if isinstance(files, (str, os.PathLike)):
        return list(_infeed.list_files(os.fspath(files)))
    return [os.fspath(f) for f in files]


def build_index(
    files: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    output: str | os.PathLike[str] | None = None,
    span: int = 1 << 20,
) -> list[tuple[str, str, int]]:
    """Writes each shard's index (what :class:`TFRecordSource` and
    ``Pipeline.global_shuffle`` read) into the folder ``.infeed-index``
    beside it (hidden, where no shard glob of TensorFlow's or Beam's reaches
    it) or into ``output`` (a folder or a gs://, s3://, az:// prefix), in
    one pass over the shard that checks every record; for GZIP and ZLIB
    shards with an access point every ``span`` bytes of output. Returns
    ``(shard, index, records)`` per shard."""
    out = None if output is None else os.fspath(output)
    return list(_infeed.build_index(files_of(files), out, int(span)))


def record_indexes(
    positions: Iterable[tuple[str, int]],
    index_dir: str | os.PathLike[str] | None = None,
) -> list[int | None]:
    """The index in its file of the record at each ``(file, offset)`` (as
    ``Iterator.positions`` and ``Pipeline.records_of`` name them), from each
    file's index (in ``.infeed-index`` beside it, or beside it as versions
    before wrote it, or in ``index_dir``; built in memory by reading
    the file where there is none); ``None`` where no record starts."""
    d = None if index_dir is None else os.fspath(index_dir)
    return list(_infeed.record_indexes([(str(f), int(o)) for f, o in positions], d))
