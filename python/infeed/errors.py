"""The exceptions infeed raises.

Every error of the Rust engine arrives as a subclass of :class:`Error`, with
the fields the Rust error carries as attributes (``None`` where it has none):

- ``path``: the file or URL at fault;
- ``offset``: the byte offset of the record (or of the read that failed);
- ``feature``: the feature concerned;
- ``record``: the record's index in its file (``None`` where unknown).
"""

from __future__ import annotations


class Error(Exception):
    """Base class of infeed's errors."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        feature: str | None = None,
        record: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.offset = offset
        self.feature = feature
        self.record = record


class CorruptRecordError(Error):
    """A record's framing or CRC is wrong, the file is truncated, or its
    GZIP/ZLIB stream is corrupt (``path``, ``offset``)."""


class ParseError(Error, ValueError):
    """A record does not match the feature spec (``path``, ``offset``,
    ``feature``, ``record``)."""


class BatchError(Error, ValueError):
    """A record's values do not fit the batch plan: too long under the
    ``"error"`` truncation policy, an int32 overflow, a wrong byte count."""


class ImageError(Error, ValueError):
    """An image feature's value could not be decoded into its static shape:
    corrupt, truncated, CMYK, neither PNG nor JPEG, too large, or (fixed
    size) of another size (``path``, ``offset``, ``feature``, ``record``)."""


class SpecError(Error, ValueError):
    """The pipeline is described wrongly: a bad spec, step, dtype or value
    (``feature`` when one is at fault)."""


class StateError(Error, ValueError):
    """A checkpointed state that cannot be restored: another pipeline's,
    corrupt, or from an unknown version."""


class SourceError(Error, OSError):
    """Shards could not be listed, opened or read (``path``, and ``offset``
    for a read)."""


class TfdsError(Error, ValueError):
    """A TFDS dataset directory could not be read as asked: a missing split
    (the message lists the dataset's), a bad split string, a file format other
    than TFRecord, an unknown feature type, malformed JSON (``path``: the
    directory or file; ``feature`` when one is at fault)."""


class ShardIndexError(Error, ValueError):
    """A shard's index is missing, stale (the shard changed since it was
    indexed: the message says what), of another shard, damaged, or places a
    record where the shard has none (``path``: the shard, or the index file
    when it cannot be read as one)."""


class TokenizerError(Error, ValueError):
    """A tokenizer that cannot be read or loaded (not a ``tokenizer.json``
    or SentencePiece model, a kind this build cannot run), or that lacks the
    beginning- or end-of-sequence token asked for (``path``: the file)."""


class ConvertError(Error, ValueError):
    """A row that cannot be written (``record``: its index in the rows handed
    to the writer; ``feature``: the column at fault), a schema that cannot be
    inferred, or an output that cannot be written (``path``)."""


class MapError(Error):
    """A ``map_batch`` function failed inside the engine."""


class EmptyEpochError(Error):
    """A whole epoch produced no record, so ``repeat()`` would never end."""


class WorkerError(Error):
    """A pipeline thread died, or the system would not start one."""


__all__ = [
    "BatchError",
    "CorruptRecordError",
    "EmptyEpochError",
    "ImageError",
    "Error",
    "MapError",
    "ParseError",
    "ShardIndexError",
    "SourceError",
    "SpecError",
    "StateError",
    "TfdsError",
    "WorkerError",
]
