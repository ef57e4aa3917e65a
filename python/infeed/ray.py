"""A pipeline's logical streams on Ray actors: the CPU work leaves the trainer.

::

    import ray, infeed, infeed.ray

    ray.init(address="auto")
    pipeline = (infeed.Pipeline.from_glob("gs://bucket/train-*.tfrecord")
                .shard(jax.process_index(), jax.process_count()).streams(16)
                .seed(1).shuffle(10_000).repeat()
                .parse(SPEC).pad_to_multiple_of(64).max_length(512).batch(256))
    remote = infeed.ray.remote(pipeline, actors=4, num_cpus=8)
    for batch in remote:                       # the same batches as `for batch in pipeline`
        ...

How it is exact: a training process that is host ``i`` of ``n`` runs the
streams ``i·L/n .. (i+1)·L/n`` of ``streams(L)``. Its ``N`` actors are hosts
``i·N + j`` of ``n·N`` of the same job, each taking ``batch / N`` of every
step's rows; a step's global batch is the same on any host count that
divides ``L`` (docs/many-hosts.md), so the ``N`` parts of a step, joined in
actor order, are exactly the host's batch. An actor runs its streams end to
end (read, parse, decode, pad, assemble); the trainer joins the parts (one
copy into the host batch) and runs :meth:`Pipeline.map_batch` functions.

Each part carries its actor's state after it; the merge of the parts of the
last step returned is the host's state (:meth:`RemoteIterator.get_state`),
which restores on any number of actors or on a local ``pipeline.iter``. An
actor that dies is started again from its state after the last part the
trainer received, so nothing is lost or repeated. An actor makes its parts
only when asked, at most ``in_flight`` calls of up to ``batches_per_call``
steps each ahead of the trainer, so a slow trainer holds the actors back.
docs/python.md, "On Ray actors", has the rest.
"""

from __future__ import annotations

import collections
import copy
import os
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

try:
    import ray
    import ray.exceptions
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
except ImportError as e:
    raise ImportError(
        f"infeed.ray needs Ray ({e}): pip install 'infeed[ray]' (the Ray version it is "
        "tested with)"
    ) from e

from infeed._infeed import (
    merge_states,
    pooled_empty,
    positions_of,
    repad_rows,
    unpad_rows,
)
from infeed.errors import Error
from infeed.pipeline import Batch, Pipeline, _mapped


class RayError(Error):
    """Ray is not running in this process, or an actor could not be placed."""


def remote(
    pipeline: Pipeline,
    actors: int,
    *,
    num_cpus: float = 1,
    resources: Mapping[str, float] | None = None,
    scheduling_strategy: Any = None,
    placement_group: Any = None,
    in_flight: int = 2,
    batches_per_call: int = 64,
    bytes_per_call: int = 16 << 20,
    placement_timeout: float = 60.0,
) -> RemotePipeline:
    """``pipeline``'s streams on ``actors`` Ray actors.

    ``pipeline`` must declare its logical streams (``streams(L)``) with ``L``
    a multiple of ``actors`` × its host count, and every batch size
    (``batch``, ``bucket_by_length``'s) a multiple of ``actors``. Each actor
    asks Ray for ``num_cpus`` CPUs and ``resources`` (custom resources, to
    land on CPU nodes), or follows ``scheduling_strategy``, or takes bundle
    ``j`` of ``placement_group`` (actor ``j``; the group needs a bundle per
    actor), and runs its pipeline with that many threads (at least 1).
    Each call to an actor returns ``batches_per_call`` steps' parts as one
    object (Ray's cost is mostly per object: on lm, 16 steps a call gave
    ~190 K records/s, 64 ~255 K), fewer once they hold ``bytes_per_call``,
    which bounds the bytes in flight with ``in_flight``, the calls per
    actor asked for ahead of the trainer.
    Actors not placed within ``placement_timeout`` seconds are an error
    (their pipelines' start, which may read, is not timed).
    Ray must be initialized (``ray.init``) in this process first."""
    return RemotePipeline(
        pipeline,
        actors,
        num_cpus=num_cpus,
        resources=dict(resources or {}),
        scheduling_strategy=scheduling_strategy,
        placement_group=placement_group,
        in_flight=in_flight,
        batches_per_call=batches_per_call,
        bytes_per_call=bytes_per_call,
        placement_timeout=placement_timeout,
    )


def _actor_description(description: dict[str, Any], actors: int, j: int) -> dict[str, Any]:
    """The description of actor ``j``'s pipeline: host ``i·actors + j`` of
    ``n·actors``, with ``1/actors`` of each batch size."""
    d = copy.deepcopy(description)
    options = d.setdefault("options", {})
    i, n = options.get("shard") or (0, 1)
    options["shard"] = [i * actors + j, n * actors]
    options.pop("cpu_affinity", None)  # the trainer's cores, not the actor's
    for step in d.get("batches", []):
        if (at := _rows_of(step)) is not None:
            settings, key = at
            sizes = settings[key]
            settings[key] = (
                sizes // actors if isinstance(sizes, int) else [s // actors for s in sizes]
            )
    return d


def _rows_of(step: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Where a step of the description keeps its batches' rows (``batch``'s
    size, ``bucket_by_length``'s sizes): its settings and the key."""
    for name, key in (("batch", "size"), ("bucket_by_length", "batch_sizes")):
        if name in step:
            return step[name], key
    return None


def _check(description: dict[str, Any], actors: int) -> None:
    """Refuses what cannot run on ``actors`` actors, naming why."""
    if actors < 1:
        raise ValueError(f"infeed.ray.remote: actors is {actors}, not at least 1")
    options = description.get("options", {})
    streams = options.get("streams")
    _, hosts = options.get("shard") or (0, 1)
    if streams is None or streams % (hosts * actors):
        raise ValueError(
            f"infeed.ray.remote: {actors} actors on {hosts} host(s) need the pipeline's "
            f"logical streams (.streams(L)) with L a multiple of {hosts * actors}; it has "
            f"{'none' if streams is None else streams}. The streams are what moves to the "
            "actors (docs/python.md, On Ray actors)"
        )
    for step in description.get("batches", []):
        if (at := _rows_of(step)) is None:
            continue
        settings, key = at
        sizes = settings[key]
        for size in [sizes] if isinstance(sizes, int) else sizes:
            if size % actors:
                raise ValueError(
                    f"infeed.ray.remote: a batch of {size} rows does not split over "
                    f"{actors} actors; give batch sizes that are multiples of {actors}"
                )


class _Unpadded(NamedTuple):
    """A padded feature sent without its padding (Ray's cost is per byte
    too, and a padded batch with its masks is several times its values):
    each row's values one after another, how many each row has, and the
    padded shape and dtype to rebuild."""

    values: np.ndarray
    lengths: np.ndarray
    shape: tuple[int, ...]
    dtype: np.dtype


class _MaskOf(NamedTuple):
    """The mask of an :class:`_Unpadded` feature: ones up to each row's
    length, rebuilt from the lengths."""

    lengths: np.ndarray
    shape: tuple[int, ...]
    dtype: np.dtype


Column = np.ndarray | _Unpadded | _MaskOf


def _unpadded(batch: Batch) -> dict[str, Column]:
    """``batch`` with each padded feature that its mask says is its values
    then zeros (``<name>_mask`` ones then zeros, row by row) sent as its
    values and lengths; any other column as it is."""
    out: dict[str, Column] = dict(batch)
    for name, value in batch.items():
        mask = batch.get(f"{name}_mask")
        if (
            mask is None
            or value.ndim != 2
            or mask.shape != value.shape
            or value.dtype.hasobject
            or not (value.flags.c_contiguous and mask.flags.c_contiguous)
        ):
            continue
        found = unpad_rows(_bytes(value), _bytes(mask), _one(mask.dtype), value.dtype.itemsize)
        if found is None:
            continue
        values, lengths = found
        out[name] = _Unpadded(values.view(value.dtype), lengths, value.shape, value.dtype)
        out[f"{name}_mask"] = _MaskOf(lengths, mask.shape, mask.dtype)
    return out


def _bytes(array: np.ndarray) -> np.ndarray:
    """A C-contiguous 2-D array's rows as bytes."""
    return array.view(np.uint8)


def _one(dtype: np.dtype) -> bytes:
    return np.ones(1, dtype).tobytes()


def _nbytes(column: Column) -> int:
    if isinstance(column, _Unpadded):
        return column.values.nbytes + column.lengths.nbytes
    return column.lengths.nbytes if isinstance(column, _MaskOf) else column.nbytes


def _put(out: np.ndarray, at: int, take: int, column: Column) -> None:
    """Writes the first ``take`` rows of ``column`` into rows ``at..`` of
    ``out`` (C-contiguous, as wide as the column or wider), whole: padded
    after the column's values where ``out`` is wider."""
    if isinstance(column, np.ndarray):
        region = out[at : at + take]
        if column.shape[1:] != out.shape[1:]:
            _blank(region)
        region[(slice(None),) + tuple(map(slice, column.shape[1:]))] = column[:take]
        return
    size = out.dtype.itemsize
    lengths = column.lengths[:take]
    if isinstance(column, _Unpadded):
        repad_rows(_bytes(out), at, lengths, size, values=column.values.view(np.uint8))
    else:
        repad_rows(_bytes(out), at, lengths, size, one=_one(out.dtype))


def _empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A joined feature's array, whose every element the join writes: in a
    pooled buffer where it can be (strings are Python objects)."""
    if dtype.hasobject:
        return np.empty(shape, dtype)
    return pooled_empty(int(np.prod(shape)) * dtype.itemsize).view(dtype).reshape(shape)


def _blank(region: np.ndarray) -> None:
    """Fills ``region`` with padding: zeros, or empty strings."""
    region.fill(b"" if region.dtype.hasobject else 0)


def _padding_row(parts: list[Part], name: str) -> np.ndarray | None:
    """A padding row of feature ``name`` as an actor made it (a normalized
    feature's padding is not zeros), if a part has one."""
    for part in parts:
        column = None if part.batch is None else part.batch[name]
        if (
            isinstance(column, np.ndarray)
            and part.real_rows is not None
            and part.real_rows < column.shape[0]
        ):
            return column[part.real_rows]
    return None


class Part(NamedTuple):
    """One actor's part of a step: its rows (``None`` once its streams have
    all ended), its state after them, its real rows, and their records as
    ``Batches.provenance()`` gives them (a list of a tuple per row cost the
    actor and the trainer as much as the state; it is listed only when
    asked)."""

    batch: dict[str, Column] | None
    state: bytes
    real_rows: int | None
    provenance: tuple[int, list[str], bytes, bytes | None] | None


class _Streams:
    """One actor: its share of the host's streams, run to batch parts."""

    def __init__(
        self,
        description: dict[str, Any],
        files: list[str],
        listed: dict[str, list[str]],
        state: bytes | None,
    ) -> None:
        # The pipeline starts in `start`: an error there reaches the trainer
        # as the pipeline's error, where one in a constructor is an actor's
        # death.
        self._args = (description, files, listed, state)
        self._error: BaseException | None = None
        self.served = 0

    def start(self) -> bytes:
        """Starts the pipeline: its state before its first part."""
        description, files, listed, state = self._args
        self._iterator = Pipeline(description, files, listed=listed).iter(state)
        return self._iterator.get_state()

    def next(self, count: int, max_bytes: int) -> list[Part]:
        """The next ``count`` parts, or fewer once they hold ``max_bytes``
        (and at the end, whose last part has no batch): one object in Ray's
        store for several steps, since its cost is mostly per object, but
        not so large that a few fill the store. An error after some parts
        is raised by the next call, so the parts before it arrive."""
        if self._error is not None:
            raise self._error
        it = self._iterator
        parts: list[Part] = []
        held = 0
        while len(parts) < count and held < max_bytes:
            self.served += 1
            try:
                batch = next(it)
            except StopIteration:
                parts.append(Part(None, it.get_state(), 0, None))
                break
            except Exception as e:
                if not parts:
                    raise
                self._error = e
                break
            columns = _unpadded(batch)
            parts.append(Part(columns, it.get_state(), it.real_rows, it._batches.provenance()))
            held += sum(_nbytes(column) for column in columns.values())
        return parts

    def parts_served(self) -> int:
        return self.served

    def figures(self) -> dict[str, Any]:
        """Its pipeline's figures (asked in a concurrency group of its own,
        so that the question does not wait behind the parts asked for)."""
        return self._iterator.figures()

    def where(self) -> tuple[int, str]:
        """Its process id and Ray node id (for tests of placement and of a
        killed actor)."""
        return os.getpid(), ray.get_runtime_context().get_node_id()


# `next` runs one call at a time; `figures` beside it, in a group of its own
# (a setting of the class only; Ray's type stubs do not list it).
_StreamsActor = ray.remote(concurrency_groups={"figures": 1})(_Streams)  # type: ignore[call-overload]


def _sum_figures(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """The actors' figures added up, key by key (numbers, and dicts of
    them)."""
    out: dict[str, Any] = {}
    for key, first in figures[0].items():
        values = [f[key] for f in figures if key in f]
        out[key] = _sum_figures(values) if isinstance(first, dict) else sum(values)
    return out


class RemotePipeline:
    """What :func:`remote` returns: to a training loop, what a
    :class:`Pipeline` is (``iter``, ``iter(state=...)``, ``shapes()``)."""

    def __init__(
        self,
        pipeline: Pipeline,
        actors: int,
        *,
        num_cpus: float,
        resources: dict[str, float],
        scheduling_strategy: Any,
        placement_group: Any,
        in_flight: int,
        batches_per_call: int,
        bytes_per_call: int,
        placement_timeout: float,
    ) -> None:
        if not ray.is_initialized():
            raise RayError(
                "infeed.ray: Ray is not initialized in this process; call "
                "ray.init(address=...) first (infeed does not start a cluster)"
            )
        for name, value in (
            ("in_flight", in_flight),
            ("batches_per_call", batches_per_call),
            ("bytes_per_call", bytes_per_call),
        ):
            if value < 1:
                raise ValueError(f"infeed.ray.remote: {name} is {value}, not at least 1")
        self.pipeline = pipeline
        description = pipeline.describe()
        # map_batch functions run here, on the joined batch: not in the actors'.
        description["batches"] = [
            s for s in description.get("batches", []) if "map_delivered" not in s
        ]
        _check(description, actors)
        self.actors = actors
        self._descriptions = [_actor_description(description, actors, j) for j in range(actors)]
        for d in self._descriptions:
            # The actor's cores, not the trainer's `threads` setting.
            d.setdefault("options", {})["threads"] = max(1, int(num_cpus))
        self._options: dict[str, Any] = {
            "num_cpus": num_cpus,
            "resources": resources,
            "max_restarts": 0,  # a dead actor is started again from its state, here
        }
        if scheduling_strategy is not None:
            self._options["scheduling_strategy"] = scheduling_strategy
        if placement_group is not None:
            if scheduling_strategy is not None:
                raise ValueError(
                    "infeed.ray.remote: give a scheduling_strategy or a placement_group, not both"
                )
            bundles = placement_group.bundle_specs
            if len(bundles) < actors:
                raise ValueError(
                    f"infeed.ray.remote: the placement group has {len(bundles)} bundles; each "
                    f"of the {actors} actors takes one"
                )
            asked = {"CPU": num_cpus, **resources}
            for j, bundle in enumerate(bundles[:actors]):
                if any(bundle.get(name, 0) < amount for name, amount in asked.items()):
                    raise ValueError(
                        f"infeed.ray.remote: bundle {j} of the placement group holds "
                        f"{bundle}; an actor asks for {asked}"
                    )
        self._group = placement_group
        self.in_flight = in_flight
        self.batches_per_call = batches_per_call
        self.bytes_per_call = bytes_per_call
        self.placement_timeout = placement_timeout
        self._packed = any("pack" in s for s in description.get("batches", []))

    def shapes(self) -> list[dict[str, tuple[tuple[int, ...], np.dtype]]]:
        """The host pipeline's shapes: the joined batches'."""
        return self.pipeline.shapes()

    def iter(self, state: bytes | None = None) -> RemoteIterator:
        """Starts the actors, from ``state`` (a host state: this iterator's,
        a local iterator's of the same pipeline, or merged) when given."""
        return RemoteIterator(self, state)

    def __iter__(self) -> RemoteIterator:
        return self.iter()

    def _start_actors(
        self, which: list[int], states: list[bytes | None]
    ) -> tuple[list[Any], list[bytes]]:
        """Actors ``which`` started from ``states``, and what their
        ``start`` returned; a clear error when they are not placed in time or
        their pipeline does not start (the actors are then stopped)."""
        p = self.pipeline
        actors: list[Any] = []
        try:
            for j, state in zip(which, states, strict=True):
                actor = _StreamsActor.options(**self._options_of(j))
                actors.append(actor.remote(self._descriptions[j], p._files, p._listed, state))
            # Placed first, within the timeout (`__ray_ready__`: a method
            # Ray gives every actor); then started, untimed: a start may read
            # (equal_batches' count pass, indexing shards).
            ray.get([a.__ray_ready__.remote() for a in actors], timeout=self.placement_timeout)
            started = ray.get([a.start.remote() for a in actors])
        except ray.exceptions.GetTimeoutError:
            _kill(actors)
            raise RayError(
                f"infeed.ray: {len(actors)} actors of {self._options['num_cpus']} CPUs and "
                f"resources {self._options['resources']} were not placed in "
                f"{self.placement_timeout} s; the cluster has {ray.available_resources()} free"
            ) from None
        except ray.exceptions.RayTaskError as e:
            _kill(actors)
            raise e.cause from None
        except ray.exceptions.RayActorError as e:
            _kill(actors)
            raise RayError(f"infeed.ray: an actor died as it started: {e}") from None
        except ray.exceptions.RayError as e:  # e.g. its placement group removed
            _kill(actors)
            raise RayError(f"infeed.ray: the actors could not be started: {e}") from None
        except BaseException:  # an interrupt: no actor left holding its resources
            _kill(actors)
            raise
        return actors, started

    def _options_of(self, j: int) -> dict[str, Any]:
        """Actor ``j``'s options: bundle ``j`` of the placement group, if any."""
        if self._group is None:
            return self._options
        strategy = PlacementGroupSchedulingStrategy(self._group, placement_group_bundle_index=j)
        return {**self._options, "scheduling_strategy": strategy}


def _kill(actors: list[Any]) -> None:
    for actor in actors:
        ray.kill(actor)


# Deaths of one actor in a row, with no part received between, before the
# run fails: a step that kills its actor every time would loop for ever.
MAX_DEATHS = 3


class RemoteIterator:
    """The joined batches of a :class:`RemotePipeline`'s actors, with the
    host's state after each; an :class:`infeed.Iterator` to
    ``infeed.jax.device_iterator``, Orbax and PyTorch."""

    def __init__(self, remote: RemotePipeline, state: bytes | None) -> None:
        self._remote = remote
        self._actors: list[Any] = []
        self._pending: list[collections.deque[Any]] = []
        self._start(None if state is None else bytes(state))
        self.real_rows: int | None = None
        # The last batch's rows' records: (a part's provenance or None for
        # padding, how many of its rows), in row order.
        self._positions: list[tuple[Any, int]] = []
        self.restarts = 0
        # The bytes of the parts' columns received from the actors.
        self.bytes_received = 0

    @property
    def pipeline(self) -> RemotePipeline:
        return self._remote

    def _start(self, state: bytes | None) -> None:
        r = self._remote
        self._actors, started = r._start_actors(list(range(r.actors)), [state] * r.actors)
        self._states = list(started)  # each actor's after the last step returned
        self._schedule: int | None = None
        self._ended = [False] * r.actors
        # Per actor: calls in flight, parts received and not yet joined, the
        # state after the last part received (where a replacement starts)
        # and whether that part was its end.
        self._pending = [collections.deque() for _ in self._actors]
        self._received: list[collections.deque[Part]] = [collections.deque() for _ in self._actors]
        self._resume = list(self._states)
        self._done = [False] * r.actors
        self._began, self._batches, self._waited = time.perf_counter(), 0, 0.0
        # Each actor's figures as last seen (with its handle), and those of
        # actors that died.
        self._seen: list[tuple[Any, dict[str, Any]] | None] = [None] * r.actors
        self._retired: list[dict[str, Any]] = []
        self._deaths = [0] * r.actors
        for j in range(r.actors):
            self._ask(j)

    @property
    def shape_schedule(self) -> int:
        """The host pipeline's shape-schedule digest (an actor's is of its
        own batch sizes), as :attr:`infeed.Iterator.shape_schedule` gives
        it: found once by starting the pipeline here and stopping it."""
        if self._schedule is None:
            with self._remote.pipeline.iter() as local:
                self._schedule = local.shape_schedule
        return self._schedule

    def _ask(self, j: int) -> None:
        r = self._remote
        while not self._done[j] and len(self._pending[j]) < r.in_flight:
            call = self._actors[j].next.remote(r.batches_per_call, r.bytes_per_call)
            self._pending[j].append(call)

    def _fill(self, j: int) -> None:
        """Receives actor ``j``'s next call unless parts are waiting. A
        call stays asked for until its parts are received, so an interrupt
        (Ctrl-C) here loses nothing. An actor that died, or whose node did
        with its parts, is replaced, started from its state after the last
        part received, and asked again: the parts received before stay,
        those it was making are made again."""
        while not self._received[j]:
            if not self._pending[j]:
                # Its replacement did not start (an error, an interrupt):
                # again, from the same state.
                self._replace(j)
                continue
            try:
                began = time.perf_counter()
                try:
                    parts: list[Part] = ray.get(self._pending[j][0])
                finally:
                    self._waited += time.perf_counter() - began
            except ray.exceptions.RayTaskError as e:
                raise e.cause from None
            except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as e:
                self._deaths[j] += 1
                if self._deaths[j] > MAX_DEATHS:
                    raise RayError(
                        f"infeed.ray: actor {j} died {MAX_DEATHS + 1} times in a row at "
                        f"the same step: {e}"
                    ) from None
                self._pending[j].clear()
                self._replace(j)
                continue
            self._pending[j].popleft()
            self._deaths[j] = 0
            self._received[j].extend(parts)
            self.bytes_received += sum(
                _nbytes(column) for part in parts if part.batch for column in part.batch.values()
            )
            self._resume[j] = parts[-1].state
            self._done[j] = parts[-1].batch is None
            self._ask(j)

    def _replace(self, j: int) -> None:
        """Starts actor ``j`` again from its state after the last part
        received, and asks it. The one it replaces is killed first (dead,
        or left without calls by an interrupt), freeing its resources."""
        dead = self._actors[j]
        ray.kill(dead)
        (self._actors[j],), _ = self._remote._start_actors([j], [self._resume[j]])
        self.restarts += 1
        seen = self._seen[j]
        if seen is not None and seen[0] is dead:
            self._retired.append(seen[1])
            self._seen[j] = None
        self._ask(j)

    def __iter__(self) -> RemoteIterator:
        return self

    def __next__(self) -> Batch:
        if not self._actors:
            raise RayError(
                "infeed.ray: this iterator is closed (its actors are stopped); "
                "start another with iter(state=...)"
            )
        if all(self._ended):
            raise StopIteration
        live = [j for j in range(self._remote.actors) if not self._ended[j]]
        for j in live:
            self._fill(j)
        # Taken only once every actor's part of the step is here.
        parts = [
            self._received[j].popleft() if j in live else Part(None, self._states[j], 0, None)
            for j in range(self._remote.actors)
        ]
        self._states = [part.state for part in parts]
        self._ended = [part.batch is None for part in parts]
        if all(self._ended):
            raise StopIteration
        batch = self._join(parts)
        self._batches += 1
        for j in range(len(parts)):
            self._ask(j)
        for fn in self._remote.pipeline._maps:
            batch = _mapped(fn, fn(batch))
        return batch

    def _join(self, parts: list[Part]) -> Batch:
        """The step's host batch from its parts, in actor order, laid out as
        a local host lays out its streams' groups (``threads/streams.rs``):
        packed rows stay in their streams' places, a part whose streams ended
        leaving padding rows; other rows are each part's real rows one after
        another, then padding to the host's batch size, each feature as long
        as the longest part's (a stream's short last group has its own
        length bucket). One copy, into the host batch."""
        live = [part.batch for part in parts if part.batch is not None]
        rows_each = next(iter(live[0].values())).shape[0]
        host_rows = rows_each * len(parts)
        # (first row in the host batch, the part's batch, how many of its rows)
        pieces: list[tuple[int, dict[str, Column], int]] = []
        positions: list[tuple[Any, int]] = []
        row = real = 0
        for part in parts:
            if self._remote._packed:
                if part.batch is not None:
                    pieces.append((row, part.batch, rows_each))
                    if part.real_rows:
                        real = row + part.real_rows
                positions.append((part.provenance, rows_each))
                row += rows_each
            elif part.batch is not None and part.real_rows != 0:
                take = rows_each if part.real_rows is None else part.real_rows
                pieces.append((row, part.batch, take))
                positions.append((part.provenance, take))
                row += take
                real = row
        positions.append((None, host_rows - sum(n for _, n in positions)))
        shaped = [batch for _, batch, _ in pieces] or live
        # The rows no part writes: padding.
        gaps, at = [], 0
        for start, _, take in pieces:
            gaps.append((at, start))
            at = start + take
        gaps.append((at, host_rows))
        joined: Batch = {}
        for name, first in shaped[0].items():
            dims = zip(*(batch[name].shape[1:] for batch in shaped), strict=True)
            out = _empty((host_rows, *(max(d) for d in dims)), first.dtype)
            for start, batch, take in pieces:
                _put(out, start, take, batch[name])
            pad = _padding_row(parts, name)  # a normalized feature's is not 0
            for start, stop in gaps:
                if start < stop:
                    _blank(out[start:stop])
                    if pad is not None:
                        out[(slice(start, stop),) + tuple(map(slice, pad.shape))] = pad
            joined[name] = out
        self.real_rows = real
        self._positions = positions
        return joined

    def positions(self) -> list[Any]:
        """Where each row of the last batch came from, as
        :meth:`infeed.Iterator.positions` gives it."""
        out: list[Any] = []
        for provenance, rows in self._positions:
            listed = [] if provenance is None else positions_of(*provenance)[:rows]
            out.extend(listed + [None] * (rows - len(listed)))
        return out

    def in_flight(self) -> int:
        """Calls asked for and not yet received, over every actor."""
        return sum(len(p) for p in self._pending)

    def parts_served(self) -> list[int]:
        """How many steps each actor has begun making (for tests of the
        backpressure)."""
        return ray.get([a.parts_served.remote() for a in self._actors])

    def get_state(self) -> bytes:
        """The host's state after the last batch returned: its actors'
        states merged."""
        return merge_states(self._states, self._ended)

    def set_state(self, state: bytes) -> None:
        """Continues from ``state`` on fresh actors."""
        self.close()
        self._start(bytes(state))

    def state_dict(self) -> dict[str, bytes]:
        """PyTorch's ``Stateful`` protocol: ``{"infeed_state": bytes}``."""
        return {"infeed_state": self.get_state()}

    def load_state_dict(self, state_dict: Mapping[str, bytes]) -> None:
        self.set_state(state_dict["infeed_state"])

    def figures(self) -> dict[str, Any]:
        """:meth:`infeed.Iterator.figures` for the host: the actors' stages,
        workers, ready batches and record accounts added up, with those of
        actors that died as last seen here (so the counts do not fall);
        ``elapsed``, ``batches`` and ``consumer_wait`` (seconds ``next``
        waited for parts) are this iterator's. Empty once closed, and while
        an actor is dead or being replaced (``device_iterator`` calls this
        from its own thread while the next batch is being made)."""
        actors = list(self._actors)
        if not actors:
            return {}
        asked = [a.figures.options(concurrency_group="figures").remote() for a in actors]
        try:
            answers = ray.get(asked, timeout=self._remote.placement_timeout)
        except (
            ray.exceptions.RayActorError,
            ray.exceptions.ObjectLostError,
            ray.exceptions.GetTimeoutError,
        ):
            return {}
        now = list(self._actors)  # replaced or closed meanwhile: not seen
        for j, (actor, answer) in enumerate(zip(actors, answers, strict=True)):
            if j < len(now) and now[j] is actor:
                self._seen[j] = (actor, answer)
        out = _sum_figures(list(self._retired) + answers)
        out["elapsed"] = time.perf_counter() - self._began
        out["batches"] = self._batches
        out["consumer_wait"] = self._waited
        return out

    def actor_handles(self) -> list[Any]:
        """The actors (to kill one in a test of recovery)."""
        return list(self._actors)

    def close(self) -> None:
        """Stops the actors."""
        _kill(self._actors)
        self._actors = []
        self._pending = []

    def __enter__(self) -> RemoteIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if ray.is_initialized():
                self.close()
        except Exception:
            pass


__all__ = ["Part", "RayError", "RemoteIterator", "RemotePipeline", "remote"]
