"""infeed as a Grain source and dataset.

- :class:`TFRecordSource`: Grain's random-access data source over TFRecord
  shards as they are (local or gs://, s3://, az://; plain, GZIP or ZLIB),
  through their indexes (:func:`infeed.build_index`): ``len``, ``[i]`` and
  the batched ``__getitems__`` Grain calls, returning each record's bytes or,
  with ``spec``, a dict of numpy arrays parsed in Rust::

      source = infeed.grain.TFRecordSource("data/train-*.tfrecord.gz")
      ds = grain.MapDataset.source(source).shuffle(seed=1).map(decode).batch(256)

- :class:`IterDataset`: a whole infeed pipeline as a Grain ``IterDataset``,
  whose iterator's ``get_state``/``set_state`` carry infeed's state, so
  Grain's checkpointing (and its Orbax handler) saves and restores it.

Records are read with the GIL released; neighbours in a request are read
together and the rest in parallel; every record's CRCs are checked.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from typing import Any, cast

from infeed import _infeed
from infeed.index import build_index, files_of
from infeed.pipeline import Iterator, Pipeline, Spec, _features, _json, spec_entries

try:  # Grain is needed only for IterDataset.
    import grain as _grain
except ImportError:  # pragma: no cover - grain is in the test requirements
    _grain = None


class TFRecordSource(_infeed.RecordSource):
    """Grain's ``RandomAccessDataSource`` over TFRecord shards.

    ``files``: a glob or a list of shards; record ``i`` is the ``i``-th of
    them all, in order. ``index``: the folder of the shards' indexes
    (default: ``.infeed-index`` beside the shards, or beside each shard as
    versions before wrote them; a shard without one is indexed in memory
    when the source opens, and a line on standard error says so). ``spec``:
    parse each record into a dict name → numpy array (a variable-length
    feature as its values, a fixed-length one in its shape, bytes as an
    object array); without it, each record is its serialized bytes.
    ``len``, ``[i]`` and ``__getitems__`` are the Rust class's own (no
    Python frame per record: Grain calls ``[i]`` once per record).
    """

    _args: tuple[list[str], str | None, Spec | None]

    def __new__(
        cls,
        files: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        index: str | os.PathLike[str] | None = None,
        spec: Spec | None = None,
    ) -> TFRecordSource:
        listed = files_of(files)
        index_dir = None if index is None else os.fspath(index)
        features = None if spec is None else _json(_features(spec_entries(spec)))
        self = cast(TFRecordSource, super().__new__(cls, listed, index_dir, features))
        self._args = (listed, index_dir, spec)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        # Grain's worker processes get the source pickled: it opens again.
        return (TFRecordSource, self._args)

    def __repr__(self) -> str:
        return f"TFRecordSource({len(self._args[0])} files, {len(self)} records)"


if _grain is not None:

    class _Iterator(_grain.DatasetIterator):
        """An infeed iterator as a Grain ``DatasetIterator``."""

        def __init__(self, pipeline: Pipeline, state: bytes | None = None) -> None:
            super().__init__()
            self._pipeline = pipeline
            self._it: Iterator = pipeline.iter(state)

        def __next__(self) -> dict[str, Any]:
            return next(self._it)

        def get_state(self) -> dict[str, Any]:
            # Grain's checkpoints are JSON: the state's bytes in base64.
            return {"infeed_state": base64.b64encode(self._it.get_state()).decode("ascii")}

        def set_state(self, state: dict[str, Any]) -> None:
            self._it.close()
            self._it = self._pipeline.iter(base64.b64decode(state["infeed_state"]))

        def close(self) -> None:
            self._it.close()

    class IterDataset(_grain.IterDataset):
        """An infeed :class:`~infeed.Pipeline` as a Grain ``IterDataset``:
        Grain's transformations and checkpointing apply to its batches, and
        its iterator's state is infeed's (a few KB, exact)."""

        def __init__(self, pipeline: Pipeline) -> None:
            super().__init__()
            self._pipeline = pipeline

        def __iter__(self) -> _Iterator:
            return _Iterator(self._pipeline)

        def __str__(self) -> str:
            return f"infeed.grain.IterDataset({self._pipeline!r})"

else:  # pragma: no cover

    class IterDataset:  # type: ignore[no-redef]
        def __init__(self, pipeline: Pipeline) -> None:
            raise ImportError("infeed.grain.IterDataset needs the grain package")


__all__ = ["IterDataset", "TFRecordSource", "build_index"]
