"""The pipeline builder and its iterator."""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from infeed import _infeed
from infeed.errors import MapError, SpecError

Batch = dict[str, np.ndarray]
# A pipeline's description (the engine's `infeed::pipeline::Description`):
# plain JSON data, handed to the engine in one call.
Description = dict[str, Any]
# A feature of a spec: (name, kind, dtype, shape, default).
SpecEntry = tuple[str, str, str, list[int], list[Any] | None]


def _mask_name(dtype: Any) -> str:
    """A mask type: ``None`` is ``"none"``, else as :func:`_dtype_name`."""
    return "none" if dtype is None else _dtype_name(dtype)


def _dtype_name(dtype: Any) -> str:
    """A dtype given as a string or numpy dtype, by its numpy name
    (``"float"`` and ``"bytes"`` as the spec strings say them)."""
    if isinstance(dtype, str):
        return dtype
    return np.dtype(dtype).name


@dataclass(frozen=True)
class VarLen:
    """A feature of any number of values per record (``tf.io.VarLenFeature``):
    padded per batch, with a ``<name>_mask``. ``dtype``: ``"int64"``,
    ``"int32"``, ``"float32"`` or ``"bytes"``."""

    dtype: Any

    def _entry(self, name: str) -> SpecEntry:
        return (name, "var_len", _dtype_name(self.dtype), [], None)


@dataclass(frozen=True)
class FixedLen:
    """A feature of ``prod(shape)`` values per record
    (``tf.io.FixedLenFeature``); ``default`` (a scalar or one value per
    element) when a record may lack it."""

    shape: Sequence[int]
    dtype: Any
    default: Any = None

    def _entry(self, name: str) -> SpecEntry:
        default = self.default
        if default is not None:
            default = list(np.atleast_1d(np.asarray(default)).ravel().tolist())
        return (name, "fixed_len", _dtype_name(self.dtype), list(self.shape), default)


@dataclass(frozen=True)
class Image:
    """An image feature: one PNG or JPEG per record (a ``BytesList`` of one
    value), decoded on the engine's workers into uint8 ``[H, W, C]``
    (batches: ``[B, H, W, C]``). ``channels``: 1, 3 or 4, converted as
    ``tf.io.decode_image(channels=...)`` does. ``mode``:

    - ``"fixed"``: every image is ``height x width`` already;
    - ``"eval"``: the shorter side resized to ``resize`` (bilinear, as
      ``tf.image.resize``), then the centered ``height x width``;
    - ``"train"``: a random resized crop (8-100% of the area, aspect ratio
      3/4-4/3) resized to ``height x width``.

    ``flip``: a random horizontal flip. The spec string form is
    ``"name:image[H,W,C]:MODE"`` with MODE ``fixed``, ``eval=S`` or
    ``train``, each optionally followed by ``+flip``."""

    height: int
    width: int
    channels: int = 3
    mode: str = "fixed"
    resize: int | None = None
    flip: bool = False

    def _entry(self, name: str) -> SpecEntry:
        if self.mode == "eval":
            if self.resize is None:
                raise SpecError(f"feature {name!r}: mode 'eval' needs resize=S", feature=name)
            mode = f"eval={int(self.resize)}"
        elif self.mode in ("fixed", "train"):
            mode = self.mode
        else:
            raise SpecError(
                f"feature {name!r}: image mode {self.mode!r}: expected fixed, eval or train",
                feature=name,
            )
        if self.flip:
            mode += "+flip"
        text = f"image[{int(self.height)},{int(self.width)},{int(self.channels)}]:{mode}"
        return (name, "image", text, [], None)


Spec = Mapping[str, VarLen | FixedLen | Image] | str


def _json(description: Any) -> str:
    """A description (or a part of one) as the engine takes it: JSON, with
    numpy's numbers and paths as their plain values."""

    def plain(value: Any) -> Any:
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
        if isinstance(value, os.PathLike):
            return os.fspath(value)
        raise TypeError(f"{type(value).__name__} {value!r} is not a setting's value")

    return json.dumps(description, default=plain)


def _feature(entry: SpecEntry) -> dict[str, Any]:
    """A spec entry as a description's feature."""
    name, kind, dtype, shape, default = entry
    if kind == "image":
        # The image's text form rides in the dtype slot.
        return {"name": name, "kind": "image", "image": dtype}
    feature: dict[str, Any] = {"name": name, "kind": kind, "dtype": dtype}
    if kind == "fixed_len":
        feature["shape"] = list(shape)
    if default is not None:
        feature["default"] = [_default_item(v) for v in default]
    return feature


def _function_name(fn: Callable[..., Any]) -> str:
    """How a description names a Python function."""
    module = getattr(fn, "__module__", None) or "?"
    return f"python:{module}.{getattr(fn, '__qualname__', repr(fn))}"


def _default_item(value: Any) -> Any:
    """A default value as a description holds it: bytes as their text
    (UTF-8) or as a list of numbers, a float that JSON has no number for as
    ``"nan"``, ``"inf"`` or ``"-inf"``."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return list(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _features(spec: str | list[SpecEntry]) -> str | list[dict[str, Any]]:
    """A spec (its text form, or entries) as a description's features."""
    return spec if isinstance(spec, str) else [_feature(e) for e in spec]


def spec_entries(spec: Spec) -> str | list[SpecEntry]:
    """A spec as the engine takes it: the string as it is, a dict as its
    entries (a feature of any other type is a TypeError naming it)."""
    if isinstance(spec, str):
        return spec
    entries = []
    for name, feature in spec.items():
        if not isinstance(feature, (VarLen, FixedLen, Image)):
            raise TypeError(
                f"feature {name!r}: expected infeed.VarLen, infeed.FixedLen or "
                f"infeed.Image, got {type(feature).__name__}"
            )
        entries.append(feature._entry(name))
    return entries


class Pipeline:
    """A description of an input pipeline; iterating it starts it.

    Each step returns a new ``Pipeline`` (the builder is immutable, so one
    description can start many iterators). The steps and their meaning are
    those of the Rust builder: record-level steps run in the fixed order
    host shard → file order → interleave → record shard → skip/take →
    shuffle → parse → pad → batch, whatever the order of the calls;
    ``repeat`` before ``shuffle`` mixes epochs in the buffer, after it
    drains the buffer at each epoch's end.
    """

    def __init__(
        self,
        description: Description,
        files: Sequence[str],
        maps: tuple[Callable[[Batch], Batch], ...] = (),
        tfds: tuple[str, str] | None = None,
        listed: Mapping[str, list[str]] | None = None,
    ) -> None:
        self._description = description
        self._files = list(files)
        self._maps = tuple(maps)
        # (dataset directory, split string) of a pipeline from from_tfds, for
        # parse() without a spec.
        self._tfds = tfds
        # Each glob's files as listed when the pipeline was made: every run
        # takes them (the description keeps the glob), so a bucket is listed
        # once per pipeline, not at every iter().
        self._listed = dict(listed or {})

    # Sources -------------------------------------------------------------

    @classmethod
    def _over(cls, source: dict[str, Any], files: Sequence[str], **kw: Any) -> Pipeline:
        return cls({"version": 1, "source": source}, files, **kw)

    @classmethod
    def from_glob(cls, pattern: str | os.PathLike[str]) -> Pipeline:
        """The shards matching a glob (``*``, ``?``, ``[…]``) of local paths or
        gs://, s3://, az:// URLs, in sorted order; a comma separates several
        patterns. Raises :class:`infeed.SourceError` when nothing matches."""
        pattern = os.fspath(pattern)
        files = _infeed.list_files(pattern)
        return cls._over({"glob": pattern}, files, listed={pattern: files})

    @classmethod
    def from_files(cls, files: Iterable[str | os.PathLike[str]]) -> Pipeline:
        """These files, read in this order (before any shuffle)."""
        paths = [os.fspath(f) for f in files]
        return cls._over({"files": paths}, paths)

    @classmethod
    def from_description(
        cls,
        description: Description | str | os.PathLike[str],
        functions: Mapping[str, Callable[[Batch], Batch]] | None = None,
    ) -> Pipeline:
        """The pipeline a description gives: a dict (as :meth:`describe`
        returns it), or a JSON file's path (as ``infeed bench
        --print-pipeline`` writes it, and ``infeed bench --pipeline`` runs
        it). The same description gives the same batches here, in Rust
        (``ParsedPipeline::from_description``) and on the command line.
        A :meth:`map_batch` function is named in a description, not held:
        ``functions`` gives each by its name there (``"python:module.name"``);
        one not given raises :class:`infeed.SpecError` naming it."""
        if not isinstance(description, dict):
            with open(description, encoding="utf-8") as f:
                description = json.load(f)
        description = copy.deepcopy(description)
        steps = description.get("batches", [])
        named = [s["map_delivered"]["callable"] for s in steps if "map_delivered" in s]
        description["batches"] = [s for s in steps if "map_delivered" not in s]
        functions = functions or {}
        missing = [name for name in named if name not in functions]
        if missing:
            raise SpecError(
                f"the description names Python functions it does not hold: {missing}; "
                "give them with functions={name: function}"
            )
        checked = json.loads(_infeed.describe(_json(description)))
        tfds = checked["source"].get("tfds")
        where = None if tfds is None else (tfds["dir"], tfds["split"])
        maps = tuple(functions[name] for name in named)
        files, listed = _infeed.files_of(_json(checked))
        return cls(checked, files, maps, tfds=where, listed=listed)

    def describe(self) -> Description:
        """The pipeline as one value, checked and with its defaults filled
        in: plain data (JSON's), what :meth:`from_description` and ``infeed
        bench --pipeline`` take. A :meth:`map_batch` function is named in it
        (``{"map_delivered": {"callable": "python:module.name"}}``), not
        held: another face refuses it, and :meth:`from_description` takes it
        back from ``functions``."""
        described = json.loads(_infeed.describe(_json(self._description)))
        for fn in self._maps:
            step = {"map_delivered": {"callable": _function_name(fn)}}
            described.setdefault("batches", []).append(step)
        return described

    @classmethod
    def mix(
        cls,
        sources: Mapping[str, Pipeline],
        weights: Mapping[str, float],
        by: str = "random",
        on_exhausted: str = "stop",
        schedule: Sequence[tuple[int, Mapping[str, float]]] = (),
        interpolate: bool = False,
        records_per_step: int | None = None,
        by_tokens: bool = False,
    ) -> Pipeline:
        """A mixture of record-level pipelines in set proportions, each with
        its own files, shard, file shuffle, interleave, shuffle buffer and
        repeat: ``weights[name]`` of the records come from ``sources[name]``.
        The result takes ``seed`` (of its draws), then ``parse``, padding,
        bucketing, packing and batching as any pipeline. ``by``: ``"random"``
        (a draw per record, a pure function of the seed and the record's
        number) or ``"stratified"`` (every batch holds each source's share;
        plain ``batch`` only). ``on_exhausted``: ``"stop"`` (the default: the
        mixture ends with the first source that runs out), ``"drop"`` (the
        others go on, reweighted) or ``"fail"``. A state restores with new
        weights or sources, keyed by name (docs/pipeline.md, Mixtures).

        ``schedule``: ``[(step, {name: weight}), ...]``, steps increasing: the
        weights from each step on (a zero turns a source off), held until the
        next point or, with ``interpolate``, moving linearly to it. A step is
        the records a host's batch takes (its rows under plain ``batch``;
        with ``pack`` or buckets give ``records_per_step``). Every host draws
        alike; a state restores exactly, or under a new schedule from its
        step on.

        ``by_tokens``: the weights count tokens (the length ``pack`` or
        ``bucket_by_length`` measures, after ``tokenize``), not records: each
        source is drawn by its weight over its mean tokens per record,
        measured at the start on a sample every host reads alike.

        Shard the mixture itself (``.shard(i, n).streams(12)``, sources
        unsharded) and it runs as logical streams: its state moves between
        host counts as a single corpus's does."""
        if set(weights) != set(sources):
            raise SpecError(
                f"mix: weights for {sorted(weights)}, sources {sorted(sources)}: give one "
                "weight per source"
            )
        parts = []
        for name, p in sources.items():
            if p._maps:
                raise SpecError(f"mix: source {name!r} has map_batch: put it on the mixture")
            parts.append({"name": name, "pipeline": p._description})
        points = []
        for at, point in schedule:
            if set(point) != set(sources):
                raise SpecError(
                    f"mix: schedule step {at}: weights for {sorted(point)}, sources "
                    f"{sorted(sources)}: give one weight per source"
                )
            points.append((at, [float(point[n]) for n in sources]))
        mix: dict[str, Any] = {
            "sources": parts,
            "weights": [float(weights[n]) for n in sources],
            "by": by,
            "on_exhausted": on_exhausted,
            "interpolate": bool(interpolate),
            "by_tokens": bool(by_tokens),
        }
        if points:
            mix["schedule"] = points
        if records_per_step is not None:
            mix["records_per_step"] = records_per_step
        files = [f for p in sources.values() for f in p._files]
        listed = {g: fs for p in sources.values() for g, fs in p._listed.items()}
        return cls._over({"mix": mix}, files, listed=listed)

    @classmethod
    def from_tfds(cls, dir: str | os.PathLike[str], split: str = "train") -> Pipeline:
        """A split of a prepared TensorFlow Datasets directory
        (``{data_dir}/{name}[/{config}]/{version}``, local or gs://, s3://,
        az://), read without TensorFlow. ``split`` is a TFDS split string:
        ``"train"``, ``"train[:80%]"``, ``"train[10%:]+test"``,
        ``"train[-1000:]"``, ``"all"``, with TFDS's rounding; the selected
        records come in shard order. :meth:`parse` with no spec parses by the
        dataset's own features. Raises :class:`infeed.TfdsError` for a
        missing split (naming the dataset's), a file format other than
        TFRecord or bad JSON."""
        dir = os.fspath(dir)
        source = {"tfds": {"dir": dir, "split": split}}
        return cls._over(source, _infeed.tfds_files(dir, split), tfds=(dir, split))

    @property
    def files(self) -> list[str]:
        """The files the pipeline reads, before host sharding."""
        return list(self._files)

    def _changed(self, change: Callable[[Description], None]) -> Pipeline:
        """A new pipeline: this one's description, changed."""
        description = copy.deepcopy(self._description)
        change(description)
        # The engine reads it now, so that a bad value is refused by the
        # call that gives it (the one check, the engine's).
        _infeed.describe(_json(description))
        return Pipeline(description, self._files, self._maps, self._tfds, self._listed)

    def _record(self, step: str, **fields: Any) -> Pipeline:
        """Pushes a step on serialized records."""
        return self._changed(lambda d: d.setdefault("records", []).append({step: fields}))

    def _batches(self, step: str, **fields: Any) -> Pipeline:
        """Pushes a step that makes batches."""
        return self._changed(lambda d: d.setdefault("batches", []).append({step: fields}))

    def _option(self, **fields: Any) -> Pipeline:
        """Sets options of the run."""
        return self._changed(lambda d: d.setdefault("options", {}).update(fields))

    # Record-level steps --------------------------------------------------

    def seed(self, seed: int) -> Pipeline:
        """The seed of every random choice (file order, shuffle buffer).
        Under record-level ``shard`` the file order comes instead from a seed
        all hosts share, so hosts may be seeded differently."""
        return self._option(seed=int(seed))

    def shard(self, index: int, count: int) -> Pipeline:
        """Reads only host ``index`` of ``count``'s part: every ``count``-th
        file when there are at least ``count`` files, else every
        ``count``-th record of the interleaved stream, whose file order is
        then drawn from a seed all hosts share. Either way the parts are
        disjoint and cover the data every epoch, whatever each host's
        ``seed``; the hosts must agree on the files and the interleave.

        With ``count > 1``, shapes that depend on record lengths
        (``pad_to_multiple_of`` with ``max_length``, ``bucket_by_length``) are
        the same on every host at every step: the length buckets follow a
        schedule all hosts compute alike (docs/many-hosts.md)."""
        return self._option(shard=[int(index), int(count)])

    def streams(self, count: int) -> Pipeline:
        """Splits the data into ``count`` logical streams, fixed for the life
        of the job, so that its state moves between host counts. Each stream
        is the part ``shard(s, count)`` would give, with its own file order,
        interleave, shuffle buffer and seed (derived from ``seed``, which must
        then be the same on every process). Process ``i`` of ``n`` runs
        streams ``i*count/n`` to ``(i+1)*count/n`` and each step takes
        ``batch_size / (count/n)`` rows from each, in stream order, so a
        step's global batch is the same on any process count that divides
        ``count``; the states of all processes, merged
        (:func:`infeed.merge_states`; ``infeed.orbax`` does it), restore on
        any such count. Without it a job has one stream per process and
        restores on the same process count only (docs/many-hosts.md)."""
        return self._option(streams=int(count))

    def shuffle_files(self) -> Pipeline:
        """Shuffles the file order, anew each epoch."""
        return self._record("shuffle_files")

    def interleave(self, cycle_length: int, block_length: int = 1) -> Pipeline:
        """Reads ``cycle_length`` files at once, ``block_length`` records from
        each in turn."""
        return self._record(
            "interleave", cycle_length=int(cycle_length), block_length=int(block_length)
        )

    def skip(self, n: int) -> Pipeline:
        """Skips the first ``n`` records of each epoch."""
        return self._record("skip", records=int(n))

    def take(self, n: int) -> Pipeline:
        """Keeps at most ``n`` records of each epoch."""
        return self._record("take", records=int(n))

    def global_shuffle(self, block_bytes: int | None = None) -> Pipeline:
        """Reads each epoch's records in a permutation of every record of the
        dataset (Grain's global shuffle), through the shards' indexes
        (:func:`infeed.build_index`; a shard without one is indexed in memory
        first). The permutation depends on :meth:`seed` (the same on every
        host) and the epoch; each host takes every ``n``-th position of it,
        so every record is read once per epoch on any host count. With
        ``block_bytes``, blocks of records of about that size are permuted
        and shuffled eight at a time (large reads, for gs://, s3://, az://).
        Takes the place of :meth:`shuffle_files` and :meth:`interleave`."""
        if block_bytes is None:
            return self._record("global_shuffle")
        return self._record("global_shuffle", block_bytes=int(block_bytes))

    def index_dir(self, dir: str | os.PathLike[str]) -> Pipeline:
        """Where the shards' indexes are (a folder or a gs://, s3://, az://
        prefix, as :func:`infeed.build_index` wrote them); default: the
        folder ``.infeed-index`` beside the shards (or, for an index written
        by a version before it, beside each shard)."""
        return self._option(index_dir=os.fspath(dir))

    def worker_reads(self) -> Pipeline:
        """Accepted, and changes nothing: the workers read the records of
        every plain local shard by default, wherever no step before them
        needs the bytes, each shard framed by its index where one is found
        (:func:`infeed.build_index`, as :meth:`index_dir` says), else by a
        walk of its headers on the first pass. Programs that give it (it
        once asked for that) still run."""
        return self

    def shuffle(self, buffer_size: int) -> Pipeline:
        """Shuffles records through a buffer of ``buffer_size`` serialized
        records."""
        return self._record("shuffle", buffer=int(buffer_size))

    def repeat(self, epochs: int | None = None) -> Pipeline:
        """Reads the data ``epochs`` times (``None``: forever)."""
        return self._record("repeat", epochs=None if epochs is None else int(epochs))

    def read_options(
        self,
        compression: str = "auto",
        verify_crc: bool = True,
        skip_corrupt: bool = False,
        max_record_size: int | None = None,
        mmap: bool = False,
    ) -> Pipeline:
        """How shards are read: ``compression`` (``"auto"``: from the name and
        first bytes, ``"none"``, ``"gzip"``, ``"zlib"``), whether payload CRCs
        are checked, whether corrupt records are skipped (and counted)
        rather than raised as :class:`infeed.CorruptRecordError`, and whether
        local files are mapped into memory (``mmap=True``: faster, and a
        shuffle buffer holds records of 1 KiB and more as views of the
        mapped pages rather than copies; a file cut short while read is an
        error naming it, as without it, on Linux)."""
        read: dict[str, Any] = {
            "compression": compression,
            "verify_crc": bool(verify_crc),
            "on_corrupt": "skip" if skip_corrupt else "fail",
            "mmap": bool(mmap),
        }
        if max_record_size is not None:
            read["max_record_size"] = max_record_size
        return self._option(read=read)

    def source_options(
        self,
        *,
        max_retries: int | None = None,
        retry_timeout: float | None = None,
        request_timeout: float | None = None,
        retry_backoff: float | None = None,
        max_backoff: float | None = None,
        chunk_size: int | None = None,
        readahead: int | None = None,
        retry_unknown_errors: bool | None = None,
    ) -> Pipeline:
        """How cloud shards (gs://, s3://, az://) are fetched; times are in
        seconds, and a setting left ``None`` keeps its default:

        - ``max_retries``: retries of one request without progress before
          the read fails (default 8; 0: none);
        - ``retry_timeout``: no retry starts later than this after a
          request's first failure (default: no deadline);
        - ``request_timeout``: the longest wait for a response or for the
          next piece of its body before the request is retried (default 30);
        - ``retry_backoff``, ``max_backoff``: the first wait before a retry,
          doubling with jitter up to the longest (defaults 0.1 and 5);
        - ``chunk_size``: bytes per range read (default 8 MiB);
        - ``readahead``: range reads in flight per shard (default 4);
        - ``retry_unknown_errors``: also retry failures with no HTTP status
          and no known network error (default ``False``).

        Every read of the pipeline uses them (not the listing of
        :meth:`from_glob`). A read that fails for good raises
        :class:`infeed.SourceError` with the shard as ``path`` and the byte
        as ``offset``. Each retry is logged through Rust's ``tracing``
        (not Python's ``logging``). A bad value raises
        :class:`infeed.SpecError` here."""

        given = {
            "max_retries": max_retries,
            "retry_timeout": retry_timeout,
            "request_timeout": request_timeout,
            "retry_backoff": retry_backoff,
            "max_backoff": max_backoff,
            "chunk_size": chunk_size,
            "readahead": readahead,
            "retry_unknown_errors": retry_unknown_errors,
        }
        return self._option(source={k: v for k, v in given.items() if v is not None})

    def threads(self, n: int) -> Pipeline:
        """Worker threads that parse and assemble batches (default: one per
        core). The batches do not depend on it."""
        return self._option(threads=int(n))

    def cpu_affinity(self, cores: Iterable[int]) -> Pipeline:
        """Keeps the pipeline's threads on these cores (a CPU budget: the
        training step's threads keep the rest). Without :meth:`threads`, one
        worker per core given. Cores the process may not run on are refused
        when the pipeline starts; the batches do not depend on it."""
        return self._option(cpu_affinity=[int(c) for c in cores])

    def prefetch(self, batches: int) -> Pipeline:
        """Batches prepared ahead of the consumer (default 2)."""
        return self._option(prefetch=int(batches))

    def unordered(self) -> Pipeline:
        """Delivers each batch as soon as a worker finishes it, not in order."""
        return self._option(unordered=True)

    def skip_steps(self, ranges: Iterable[tuple[int, int]]) -> Pipeline:
        """Leaves out the global batches of steps ``a`` to ``b - 1`` for each
        ``(a, b)``, numbered as an uninterrupted run numbers them: every
        process leaves out its own batch of those steps and the run goes on
        with the next ones (typically with a restored state, past a loss
        spike). The ranges are part of the state, so a later restore keeps
        leaving them out. Their records are still read, not delivered."""
        given = [[int(a), int(b)] for a, b in ranges]
        return self._changed(
            lambda d: d.setdefault("options", {}).setdefault("skip_steps", []).extend(given)
        )

    def equal_batches(self, how: str) -> Pipeline:
        """Every host of :meth:`shard` emits the same number of batches over a
        finite run: ``"drop"`` (as many as the poorest host) or ``"pad"``
        (as many as the richest; the others add fully masked batches; every
        record is delivered, a last partial batch kept whatever
        ``drop_remainder`` says), for every grouping. Where the count depends
        on the records (buckets, also those ``pad_to_multiple_of`` schedules
        across hosts, ``pack``, ``filter_rows``) every process finds it by
        running every host's grouping once, so every process must give the
        same ``seed`` (docs/many-hosts.md)."""
        return self._option(equal_batches=how)

    # Parsing and batching ------------------------------------------------

    def parse(self, spec: Spec | None = None, *, features: Sequence[str] | None = None) -> Pipeline:
        """Parses records by ``spec``: a dict name → :class:`VarLen` /
        :class:`FixedLen` / :class:`Image`, or the spec string the CLI takes
        (``"input_ids:var_len:int64,label:fixed_len[]:int64"``,
        ``"image:image[224,224,3]:train+flip,label:fixed_len[]:int64"``).

        For a pipeline from :meth:`from_tfds`, ``spec`` may be left out: the
        records are parsed by the dataset's own features (features.json;
        nested names joined with ``/``), or by those named in ``features``,
        in that order. An Image of static size (MNIST's ``(28, 28, 1)``) is
        decoded to uint8 ``[H, W, C]``; a Text feature comes as a numpy array
        of ``bytes`` objects (dtype object), one per row (``b""`` in padding
        rows). An Image of unknown size is refused by name: give a spec with
        an :class:`Image` entry that says its output size (``mode="eval"``
        or ``"train"``), or leave it out with ``features=``.

        Bytes features (``FixedLen(..., "bytes")``, ``VarLen("bytes")``)
        without :meth:`decode_raw` come the same way, after the numeric
        arrays of the batch: host data, left out of :meth:`shapes` (a device
        program takes numbers); a variable-length one is padded like the
        others, with ``b""``, and its ``<name>_mask`` is a numeric array."""
        if spec is None:
            entries: str | list[SpecEntry] = self._tfds_entries(features)
        elif features is not None:
            raise TypeError("parse: give a spec or features=, not both")
        else:
            entries = spec_entries(spec)
        return self._changed(lambda d: d.update(parse={"features": _features(entries)}))

    def _tfds_entries(self, features: Sequence[str] | None) -> list[SpecEntry]:
        """The dataset's own spec, or the part of it ``features`` names; an
        Image the spec cannot decode is refused by name."""
        if self._tfds is None:
            raise SpecError(
                "parse() without a spec needs a pipeline from Pipeline.from_tfds "
                "(a TFDS dataset describes its own features)"
            )
        pairs = _infeed.tfds_spec(self._tfds[0])
        by_name = {entry[0]: (entry, tfds_type) for entry, tfds_type in pairs}
        names = [entry[0] for entry, _ in pairs] if features is None else list(features)
        picked: list[SpecEntry] = []
        for name in names:
            if name not in by_name:
                raise SpecError(
                    f"the dataset has no feature {name!r}; it has {sorted(by_name)}",
                    feature=name,
                )
            entry, tfds_type = by_name[name]
            if tfds_type == "Image" and entry[1] != "image":
                raise SpecError(
                    f"feature {name!r} is a TFDS Image that the dataset's spec cannot "
                    "decode (its size is not fixed, or it is a sequence of frames, or "
                    "not uint8): give a spec with an infeed.Image entry for it that says "
                    "the output size (mode='eval' or 'train'), or leave it out with "
                    "features=",
                    feature=name,
                )
            picked.append(entry)
        return picked

    def batch(self, batch_size: int, drop_remainder: bool = True) -> Pipeline:
        """Batches of ``batch_size`` records (with :meth:`pack`: rows). The
        last, smaller batch is dropped with ``drop_remainder``, else padded
        with fully masked rows (the iterator's ``real_rows`` says how many
        are real)."""
        return self._batches("batch", size=int(batch_size), drop_remainder=bool(drop_remainder))

    def drop_remainder(self, drop: bool = True) -> Pipeline:
        """Whether partial last batches (of each bucket) are dropped."""
        return self._batches("drop_remainder", drop=bool(drop))

    def pad_to_multiple_of(self, n: int) -> Pipeline:
        """Pads variable-length features to the longest row of the batch,
        rounded up to a multiple of ``n``; ``<name>_mask`` marks real values."""
        return self._batches("pad_to_multiple_of", multiple=int(n))

    def max_length(self, length: int) -> Pipeline:
        """Caps the padded length; longer rows follow :meth:`truncation`."""
        return self._batches("max_length", length=int(length))

    def fixed_length(self, length: int) -> Pipeline:
        """Pads (or truncates) every variable-length feature to ``length``."""
        return self._batches("fixed_length", length=int(length))

    def truncation(self, policy: str) -> Pipeline:
        """A row longer than the cap: ``"error"`` (default), ``"keep_start"``
        or ``"keep_end"``."""
        return self._batches("truncation", policy=policy)

    def masks(self, dtype: Any) -> Pipeline:
        """The dtype of every ``<name>_mask``: ``"auto"`` (default: the
        feature's integer dtype), ``"uint8"`` / ``bool`` (one byte 0/1, 1/8
        of an int64 mask), ``"int32"``, ``"int64"``, ``"float32"``, or
        ``None`` / ``"none"`` for no masks (an lm's ``attention_mask`` already
        is the mask of ``input_ids``). Part of the state's fingerprint."""
        return self._batches("masks", mask=_mask_name(dtype))

    def mask(self, name: str, dtype: Any) -> Pipeline:
        """The mask of variable-length feature ``name`` only, over
        :meth:`masks` (same words), e.g. ``mask("input_ids", None)``."""
        return self._batches("mask", feature=name, mask=_mask_name(dtype))

    def cast(self, dtype: Any) -> Pipeline:
        """Casts every integer feature to ``dtype`` (``"int32"``; an overflow
        is an error)."""
        return self._batches("cast", dtype=_dtype_name(dtype))

    def decode_raw(self, name: str, shape: Sequence[int]) -> Pipeline:
        """Decodes fixed-length bytes feature ``name`` as raw uint8 of
        ``shape`` per record (e.g. an image of ``[32, 32, 3]``)."""
        return self._batches("decode_raw", feature=name, shape=[int(d) for d in shape])

    def normalize(
        self,
        name: str,
        mean: float | Sequence[float],
        std: float | Sequence[float],
        dtype: Any = "float32",
    ) -> Pipeline:
        """Emits feature ``name`` (an image, or a fixed-length numeric
        feature) as ``(x - mean) / std``, computed on the engine's workers:
        ``mean`` and ``std`` are scalars or one value per channel (the last
        dimension). ``dtype``: ``"float32"`` or ``"bfloat16"`` (arrays of
        ``ml_dtypes.bfloat16``, JAX's)."""
        means = [float(m) for m in np.atleast_1d(np.asarray(mean, dtype=np.float64))]
        stds = [float(s) for s in np.atleast_1d(np.asarray(std, dtype=np.float64))]
        return self._batches(
            "normalize", feature=name, mean=means, std=stds, dtype=_dtype_name(dtype)
        )

    def bucket_by_length(
        self, feature: str, boundaries: Sequence[int], batch_sizes: Sequence[int]
    ) -> Pipeline:
        """Groups records by the length of ``feature``: bucket ``i`` takes
        lengths up to ``boundaries[i]``, ``batch_sizes[i]`` rows a batch, one
        shape per bucket (leave out :meth:`batch`)."""
        return self._batches(
            "bucket_by_length",
            feature=feature,
            boundaries=[int(b) for b in boundaries],
            batch_sizes=[int(b) for b in batch_sizes],
        )

    def tokenize(
        self,
        feature: str,
        tokenizer: str | os.PathLike[str],
        add_bos: bool = False,
        add_eos: bool = True,
    ) -> Pipeline:
        """Tokenizes the text feature ``feature`` (bytes) on the workers with
        ``tokenizer``: a Hugging Face ``tokenizer.json`` or a SentencePiece
        ``.model`` (MaxText's, T5's, Gemma's), at a path or a gs://, s3://,
        az:// URL, read once when the pipeline starts. The feature becomes a
        variable-length int32 feature of token ids that padding, buckets,
        :meth:`pack` and casts take as any other. The ids are those of the
        ``tokenizers`` package (``encode(text, add_special_tokens=False)``)
        or the ``sentencepiece`` package (``encode(text)``); ``add_bos`` and
        ``add_eos`` put the tokenizer's beginning- and end-of-sequence ids
        around each text (a SentencePiece model's ``bos_id``/``eos_id``; the
        tokens a ``tokenizer.json``'s post-processor puts around a
        sequence). A tokenizer that does not load, or lacks a token asked
        for, raises ``TokenizerError`` (``path``); a feature that is not text
        ``SpecError``."""
        return self._batches(
            "tokenize",
            feature=str(feature),
            tokenizer=os.fspath(tokenizer),
            add_bos=bool(add_bos),
            add_eos=bool(add_eos),
        )

    def pack(
        self,
        row_length: int,
        strategy: str = "first_fit",
        max_segments: int | None = None,
    ) -> Pipeline:
        """Packs sequences end to end into rows of ``row_length`` with
        ``segment_ids`` and ``positions``; :meth:`batch` gives rows a batch.
        ``strategy``: ``"first_fit"`` (the first row with room),
        ``"best_fit"`` (the row the sequence fills most) or
        ``"concat_split"`` (sequences end to end, cut at row ends and carried
        into the next row: no padding; each piece its own segment, positions
        from 0). ``max_segments`` caps the sequences (or pieces) of a row.
        Every strategy restores exactly and moves between host counts."""
        packed = self._batches("pack", row_length=int(row_length))
        packed = packed._batches("pack_strategy", strategy=str(strategy))
        if max_segments is None:
            return packed
        return packed._batches("pack_max_segments", segments=int(max_segments))

    def inputs_targets(self, feature: str, bos: int = 0) -> Pipeline:
        """Next-token ``inputs`` and ``targets`` of the integer token feature
        ``feature``, made after packing or padding so that a training step
        shifts nothing: the targets are the tokens, the inputs the tokens
        shifted right by one within each segment (a packed row's sequence or
        piece, a padded row's values), ``bos`` first (T5X's and MaxText's
        convention). With them ``targets_mask`` (1 on a real target) and
        ``segment_ids`` and ``positions`` (which a padded batch gets here);
        ``feature`` and its mask leave the batch."""
        return self._batches("inputs_targets", feature=str(feature), bos=int(bos))

    def pack_overflow(self, policy: str) -> Pipeline:
        """A record longer than a packed row: ``"error"`` (default),
        ``"keep_start"``, ``"keep_end"`` or ``"split"``."""
        return self._batches("pack_overflow", overflow=policy)

    def filter_length(self, feature: str, min: int = 0, max: int = 2**64 - 1) -> Pipeline:
        """Keeps only the records whose variable-length ``feature`` holds
        from ``min`` to ``max`` values (tokens, after :meth:`tokenize`),
        before they are grouped, so batches stay full. Unlike a Python
        function it is part of :meth:`describe` (any face or machine runs
        it) and of the state's fingerprint."""
        return self._batches("filter_length", feature=str(feature), min=int(min), max=int(max))

    def map_batch(self, fn: Callable[[Batch], Batch]) -> Pipeline:
        """Applies ``fn`` (dict name → numpy array in, dict out) to every
        batch, in order.

        ``fn`` is Python: it runs **with the GIL held**, on the thread that
        iterates, after the engine has made the batch (the engine's own steps
        never take the GIL). It must be deterministic so that a restored
        iterator gives the same batches. :meth:`shapes` describes the
        batches before ``fn``.
        """
        if not callable(fn):
            raise TypeError("map_batch needs a callable")
        maps = self._maps + (fn,)
        return Pipeline(self._description, self._files, maps, self._tfds, self._listed)

    # Running ---------------------------------------------------------------

    def shapes(self) -> list[dict[str, tuple[tuple[int, ...], np.dtype]]]:
        """Every shape a batch can have, known before the first batch: one
        dict name → (shape, numpy dtype) per shape."""
        return [
            {name: (tuple(shape), np.dtype(dtype)) for name, dtype, shape in tensors}
            for tensors in _infeed.shapes(_json(self._description), self._listed)
        ]

    def records_of(self, steps: Iterable[int], state: bytes | None = None) -> dict[int, list[Any]]:
        """The records of the global steps ``steps``: ``{step: rows}``, every
        process's rows of the job in global-batch order (process 0's first),
        each row a ``(file, offset)`` tuple, ``None`` for padding, a list of
        tuples for a packed row (as :meth:`Iterator.positions` gives them on
        each process). Found on this machine from this pipeline (any
        process's), from ``state`` (merged states of every process, or one
        process's when each runs one stream) or the start, by running the
        record ops and grouping up to the last step, nothing parsed."""
        found = _infeed.records_of(_json(self._description), list(steps), state, self._listed)
        packed = any("pack" in b for b in self._description.get("batches", []))

        def row(records: list[tuple[str, int]]) -> Any:
            if not records:
                return None
            return records if packed else records[0]

        return {step: [row(r) for r in rows] for step, rows in found.items()}

    def iter(self, state: bytes | None = None, *, digests: bool = False) -> Iterator:
        """Starts the pipeline; from ``state`` (from
        :meth:`Iterator.get_state` of the same pipeline) when given. With
        ``digests``, each batch's digest is taken (:attr:`Iterator.digest`;
        it reads every byte of the batch)."""
        return Iterator(self, state, digests=digests)

    def __iter__(self) -> Iterator:
        return self.iter()

    def __repr__(self) -> str:
        return f"Pipeline({_json(self._description)})"


def _mapped(fn: Callable[[Batch], Batch], out: object) -> Batch:
    """``fn``'s output, which must be a batch: a dict of name → array (an
    object with ``shape`` and ``dtype``, as numpy's and JAX's are)."""
    name = getattr(fn, "__name__", repr(fn))
    if not isinstance(out, dict):
        raise MapError(
            f"map_batch {name}: returned {type(out).__name__}, not a dict of name -> array"
        )
    for key, value in out.items():
        if not isinstance(key, str) or not (hasattr(value, "shape") and hasattr(value, "dtype")):
            raise MapError(
                f"map_batch {name}: entry {key!r} is a {type(value).__name__}, not an array "
                "(a batch is a dict of name -> array)",
                feature=key if isinstance(key, str) else None,
            )
    return out


class Iterator:
    """A running pipeline: yields dicts name → numpy array.

    The arrays view infeed's pooled buffers; keep them as long as you like
    (a buffer is reused only once every array viewing it is gone). Its
    state (:meth:`get_state`, :meth:`state_dict`) continues with exactly
    the batches an uninterrupted run gives. Close it (or drop it) to stop
    its threads.
    """

    def __init__(
        self, pipeline: Pipeline, state: bytes | None = None, *, digests: bool = False
    ) -> None:
        self._pipeline = pipeline
        self._digests = digests
        self._batches = _infeed.Batches(
            _json(pipeline._description),
            None if state is None else bytes(state),
            digests,
            pipeline._listed,
        )

    def __iter__(self) -> Iterator:
        return self

    def __next__(self) -> Batch:
        batch = self._batches.next()
        if batch is None:
            raise StopIteration
        for fn in self._pipeline._maps:
            batch = _mapped(fn, fn(batch))
        return batch

    @property
    def pipeline(self) -> Pipeline:
        return self._pipeline

    @property
    def digest(self) -> str | None:
        """The last batch's digest, as ``infeed bench --digests`` lists it
        (the engine's batch, before :meth:`Pipeline.map_batch` functions);
        ``None`` unless the iterator was started with ``digests=True``."""
        return self._batches.digest

    @property
    def real_rows(self) -> int | None:
        """Rows of the last batch that hold data (the rest are padding)."""
        return self._batches.real_rows

    def figures(self) -> dict[str, Any]:
        """The figures so far as numbers: ``elapsed``, ``batches``,
        ``consumer_wait`` (seconds ``next`` waited), ``workers``, ``ready``
        (batches waiting), and per stage (``read``, ``records``, ``batch``)
        ``records``, ``bytes``, ``busy``, ``wait``, ``skipped_records``,
        ``skipped_bytes``, ``retries``; and ``record_account``: what became of
        the records this host took in, ``read``, ``delivered`` and
        ``left_out`` by cause (``dropped``, ``sliced``, ``skipped_steps``,
        ``filtered``, ``corrupt``, ``empty``, ``mixture_end``; for a run read
        to its end, read = delivered + all left out: docs/many-hosts.md);
        empty once closed."""
        return dict(self._batches.figures())

    def positions(self) -> list[Any]:
        """Where each row of the last batch came from: a ``(file, offset)``
        tuple per row (the byte offset of the record's frame), ``None`` for a
        padding row; a packed row gives the list of its sequences' tuples (a
        sequence cut over rows is in each)."""
        return list(self._batches.positions())

    @property
    def batches_delivered(self) -> int:
        """Batches delivered so far, counting those before a restore."""
        return self._batches.batches_delivered

    def stats(self) -> dict[str, int | str | None]:
        """Figures so far, e.g. ``consumer_wait_ns``: time spent waiting."""
        return self._batches.stats()

    def get_state(self) -> bytes:
        """The state after the last batch returned: positions and counters,
        not data (a few KB)."""
        return self._batches.state()

    @property
    def source_counts(self) -> dict[str, int]:
        """A mixture's sources with the records taken from each up to the
        last batch returned (as that batch's state counts them: the same on
        every run); empty without a mixture."""
        return dict(self._batches.source_counts)

    @property
    def shape_schedule(self) -> int:
        """A digest of the schedule by which batches take their shapes when
        hosts must agree on them (``shard(i, n)`` with ``n > 1`` and
        length-dependent shapes); 0 when each batch's shape is its own.
        Processes with different digests would feed steps of different
        shapes (``infeed.jax.device_iterator`` compares them once)."""
        return int(self._batches.shape_schedule)

    def set_state(self, state: bytes) -> None:
        """Continues from ``state`` (from :meth:`get_state` of an iterator of
        the same pipeline)."""
        p = self._pipeline
        batches = _infeed.Batches(_json(p._description), bytes(state), self._digests, p._listed)
        self._batches.close()
        self._batches = batches

    def state_dict(self) -> dict[str, bytes]:
        """PyTorch's ``Stateful`` protocol: ``{"infeed_state": bytes}``."""
        return {"infeed_state": self.get_state()}

    def load_state_dict(self, state_dict: Mapping[str, bytes]) -> None:
        """PyTorch's ``Stateful`` protocol: continues from
        :meth:`state_dict`'s output."""
        self.set_state(state_dict["infeed_state"])

    def close(self) -> None:
        """Stops the pipeline's threads; :meth:`get_state` still answers."""
        self._batches.close()

    def __enter__(self) -> Iterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
