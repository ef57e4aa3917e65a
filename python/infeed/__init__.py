"""infeed: TFRecord input pipelines for XLA training, from Python.

The builder has the words of the Rust one::

    import infeed

    pipeline = (
        infeed.Pipeline.from_glob("data/train-*.tfrecord")
        .shuffle(10_000)
        .repeat()
        .parse({"input_ids": infeed.VarLen("int64")})
        .pad_to_multiple_of(64)
        .max_length(512)
        .cast("int32")
        .batch(256)
    )
    pipeline.shapes()        # every shape it can emit, before the first batch
    for batch in pipeline:   # dict name -> numpy array over infeed's buffers
        ...

Batches are dicts of numpy arrays that view infeed's 64-byte aligned pooled
buffers (no copy); a buffer returns to its pool when the last array viewing
it is collected. The engine runs on its own threads and never takes the GIL.
"""

from infeed._infeed import (
    __version__,  # python/Cargo.toml's, compiled in
    merge_states,
)
from infeed.errors import (
    BatchError,
    CorruptRecordError,
    EmptyEpochError,
    Error,
    ImageError,
    MapError,
    ParseError,
    ShardIndexError,
    SourceError,
    SpecError,
    StateError,
    TfdsError,
    TokenizerError,
    WorkerError,
)
from infeed.index import build_index, record_indexes
from infeed.pipeline import FixedLen, Image, Iterator, Pipeline, VarLen

__all__ = [
    "BatchError",
    "CorruptRecordError",
    "EmptyEpochError",
    "Error",
    "FixedLen",
    "Image",
    "ImageError",
    "Iterator",
    "MapError",
    "ParseError",
    "ShardIndexError",
    "Pipeline",
    "SourceError",
    "SpecError",
    "StateError",
    "TfdsError",
    "TokenizerError",
    "VarLen",
    "WorkerError",
    "__version__",
    "build_index",
    "record_indexes",
    "merge_states",
]
