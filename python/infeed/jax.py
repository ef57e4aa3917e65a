"""Global ``jax.Array`` batches from an infeed pipeline, prefetched onto the devices.

::

    import jax, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import infeed, infeed.jax

    mesh = Mesh(np.array(jax.devices()), ("data",))
    sharding = NamedSharding(mesh, P("data"))
    pipeline = (infeed.Pipeline.from_glob("gs://bucket/train-*.tfrecord")
                .shard(jax.process_index(), jax.process_count())
                ...
                .batch(per_host_batch))
    for batch in infeed.jax.device_iterator(pipeline, sharding):
        state, loss = train_step(state, batch)   # batch: dict of global jax.Arrays

Each host gives its own rows (``.shard(index, count)``; add
``.equal_batches(...)`` for a finite run) and
``jax.make_array_from_process_local_data`` puts them together into arrays of
``process_count × per_host_batch`` rows laid out by the sharding: every host
emits the same number of equal batches, so no per-step allgather of sizes is
needed. A background thread makes the arrays ``prefetch`` batches ahead;
:attr:`DeviceIterator.wait_seconds` says how long the step waited for them.

A bytes or text feature (a numpy array of ``bytes`` objects) cannot go to
a device: it stays a numpy array of this process's rows, in the same dict.

JAX holds 32-bit integers unless ``jax_enable_x64`` is set: give the
pipeline ``.cast("int32")`` rather than letting JAX narrow int64 arrays.
"""

from __future__ import annotations

import atexit
import json
import logging
import queue
import threading
import time
import weakref
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Union, cast

import jax
import numpy as np

from infeed import _infeed
from infeed.pipeline import Iterator, Pipeline

if TYPE_CHECKING:
    from infeed.ray import RemoteIterator, RemotePipeline

# A pipeline, local or on Ray actors (infeed.ray), or one's iterator.
Source = Union[Pipeline, Iterator, "RemotePipeline", "RemoteIterator"]

_END = object()
_LOG = logging.getLogger("infeed")
# A per-host report's limit words, as numbers for the all-gather.
_WORDS = ["consumer", "read", "records", "batch", "unclear", "unknown"]


class ShapeDisagreement(ValueError):
    """The processes of a multi-host run would feed steps of different
    shapes: their pipelines' shapes or shape schedules differ."""


def _check_processes_agree(pipeline: Pipeline, host: Iterator) -> None:
    """Once, at the start: every process's pipeline must give the same
    shapes by the same schedule (docs/many-hosts.md), or the steps would
    enter the same collectives with programs of different shapes. One
    all-gather of two integers, not one per step."""
    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils

    shapes = json.dumps(
        [
            sorted((name, [list(dims), str(dtype)]) for name, (dims, dtype) in shape.items())
            for shape in pipeline.shapes()
        ]
    )
    digest = zlib.crc32(shapes.encode()) & 0x7FFFFFFF
    schedule = host.shape_schedule & 0x7FFFFFFF
    mine = np.array([digest, schedule], np.int32)
    every = np.asarray(multihost_utils.process_allgather(mine))
    if not (every == every[0]).all():
        raise ShapeDisagreement(
            "the processes' pipelines would give batches of different shapes at the "
            "same step (per process [shapes digest, schedule digest]: "
            f"{every.tolist()}); give every process the same files, spec, padding and "
            "batch settings, differing only in shard(index, count) and seed (and not in seed "
            "either with equal_batches over buckets (pad_to_multiple_of included), pack or "
            "filters, whose batch counts every process finds by running every host's grouping)"
        )


class DeviceIterator:
    """Yields dicts name → global ``jax.Array`` placed by ``sharding``.

    ``sharding`` is one ``jax.sharding.Sharding`` for every array, or a dict
    name → sharding. :meth:`get_state` is the state after the last batch
    this iterator returned (not the ones prefetched), so checkpoints stay
    exact; :meth:`set_state` restarts from one.

    ``report_every=N`` gathers, every ``N`` steps, each process's wait for
    input over those steps and what limited its pipeline (the engine's rule
    over its per-stage figures: ``consumer`` when the pipeline kept ahead,
    so the time went to Python ``map_batch`` functions or the transfer; a
    stage; ``unclear``), with one small all-gather on the host between
    steps, and reports the slowest process: :attr:`reports` and a log line
    on the ``infeed`` logger. Every process must pass the same ``N``. Each
    wait also shows in a ``jax.profiler`` trace as ``infeed.wait``.

    ``cache_batches=N`` measures headspace: the first ``N`` batches are
    kept on the device, the pipeline is then stopped, and the iterator
    replays them in turn for ever, so a training loop runs at the step rate
    of perfect input; against a normal run it shows what faster input would
    gain. Its state stays that after batch ``N``: not for real training.
    """

    def __init__(
        self,
        source: Source,
        sharding: Any,
        prefetch: int = 2,
        cache_batches: int = 0,
        report_every: int = 0,
    ) -> None:
        if cache_batches < 0:
            raise ValueError(f"cache_batches: {cache_batches} is negative")
        if report_every < 0:
            raise ValueError(f"report_every: {report_every} is negative")
        self._report_every = int(report_every)
        self.reports: list[dict[str, Any]] = []
        self.last_wait = 0.0
        self._window_wait = 0.0
        self._cache_size = int(cache_batches)
        self._cache: list[dict[str, jax.Array]] = []
        # An iterator (local or remote), or what starts one; the remote ones
        # have the local ones' face, so they are typed as those here.
        if isinstance(source, Iterator) or hasattr(source, "__next__"):
            host = cast(Iterator, source)
            self._pipeline, self._host = host.pipeline, host
        else:
            pipeline = cast(Pipeline, source)
            self._pipeline, self._host = pipeline, pipeline.iter()
        self._sharding = sharding
        self._prefetch = max(1, int(prefetch))
        self._state = self._host.get_state()
        self.wait_seconds = 0.0
        self.steps = 0
        self._window_start = (time.perf_counter(), self._host.figures())
        _check_processes_agree(self._pipeline, self._host)
        self._start_thread()

    # The producer ---------------------------------------------------------

    def _start_thread(self) -> None:
        _LIVE.add(self)
        self._queue: queue.Queue = queue.Queue(maxsize=self._prefetch)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._produce, args=(self._host, self._queue, self._stop), daemon=True
        )
        self._thread.start()

    def _sharding_for(self, name: str) -> Any:
        if isinstance(self._sharding, Mapping):
            return self._sharding[name]
        return self._sharding

    def _produce(self, host: Iterator, out: queue.Queue, stop: threading.Event) -> None:
        try:
            for batch in host:
                # Bytes and text (dtype object) stay on the host: this process's rows.
                arrays = {
                    name: value
                    if value.dtype == object
                    else jax.make_array_from_process_local_data(self._sharding_for(name), value)
                    for name, value in batch.items()
                }
                item = (arrays, host.get_state())
                while not stop.is_set():
                    try:
                        out.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            item = _END
        except BaseException as e:  # handed to the consumer, raised there
            item = e
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    # The consumer ---------------------------------------------------------

    def __iter__(self) -> DeviceIterator:
        return self

    def __next__(self) -> dict[str, jax.Array]:
        if self._cache_size and len(self._cache) == self._cache_size:
            # Headspace: the cached batches in turn, no input work at all.
            arrays = self._cache[self.steps % self._cache_size]
            self.steps += 1
            return arrays
        start = time.perf_counter()
        with jax.profiler.TraceAnnotation("infeed.wait"):
            while True:
                try:
                    item = self._queue.get(timeout=0.05)
                    break
                except queue.Empty:
                    if not self._thread.is_alive() and self._queue.empty():
                        raise StopIteration from None
        self.last_wait = time.perf_counter() - start
        self.wait_seconds += self.last_wait
        self._window_wait += self.last_wait
        if item is _END:
            self._queue.put(_END)
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        arrays, self._state = item
        self.steps += 1
        if self._report_every and self.steps % self._report_every == 0:
            self._report()
        if self._cache_size:
            self._cache.append(arrays)
            if len(self._cache) == self._cache_size:
                # Every later step replays these: the pipeline can stop.
                self._stop_producer()
        return arrays

    def _report(self) -> None:
        """Gathers every process's last stretch and reports the slowest."""
        with jax.profiler.TraceAnnotation("infeed.report"):
            began, before = self._window_start
            now, after = time.perf_counter(), self._host.figures()
            self._window_start = (now, after)
            wait, self._window_wait = self._window_wait, 0.0
            word, stage, share = "unknown", None, None
            if before and after:
                stages = [
                    (after[s]["busy"] - before[s]["busy"], after[s]["wait"] - before[s]["wait"])
                    for s in ("read", "records", "batch")
                ]
                word, stage, share = _infeed.limit_of(
                    after["elapsed"] - before["elapsed"],
                    after["batches"] - before["batches"],
                    after["consumer_wait"] - before["consumer_wait"],
                    stages,
                )
            mine = np.array(
                [wait, _WORDS.index(word), -1 if share is None else share, now - began],
                dtype=np.float64,
            )
            if jax.process_count() > 1:
                from jax.experimental import multihost_utils

                everyone = np.asarray(multihost_utils.process_allgather(mine))
            else:
                everyone = mine[None, :]
            slowest = int(np.argmax(everyone[:, 0]))
            row = everyone[slowest]
            report = {
                "step": self.steps,
                "process": slowest,
                "wait_seconds": float(row[0]),
                "limit": _WORDS[int(row[1])],
                "share": None if row[2] < 0 else float(row[2]),
                "seconds": float(row[3]),
                "waits": [float(w) for w in everyone[:, 0]],
            }
            if slowest == jax.process_index():
                report["stage"] = stage
            self.reports.append(report)
            _LOG.info(
                "infeed: steps to %d: slowest process %d waited %.3f s of %.3f s for input "
                "(limit: %s)",
                report["step"],
                slowest,
                report["wait_seconds"],
                report["seconds"],
                report["limit"],
            )

    def get_state(self) -> bytes:
        """The host pipeline's state after the last batch returned."""
        return self._state

    def set_state(self, state: bytes) -> None:
        """Continues from ``state`` (from :meth:`get_state`)."""
        self.close()
        self._host = self._pipeline.iter(state=state)
        self._state = bytes(state)
        self._start_thread()

    def state_dict(self) -> dict[str, bytes]:
        return {"infeed_state": self.get_state()}

    def load_state_dict(self, state_dict: Mapping[str, bytes]) -> None:
        self.set_state(state_dict["infeed_state"])

    def close(self) -> None:
        """Stops the prefetch thread and the pipeline."""
        _LIVE.discard(self)
        self._stop_producer()

    def _stop_producer(self) -> None:
        self._stop.set()
        self._host.close()
        self._thread.join()

    def __enter__(self) -> DeviceIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Device iterators whose prefetch thread may still run. At exit they are
# closed before the interpreter finalizes: a daemon thread stopped there in
# the middle of XLA or infeed code aborts the process ("exception not
# rethrown") instead of letting it exit.
_LIVE: weakref.WeakSet[DeviceIterator] = weakref.WeakSet()


@atexit.register
def _close_live() -> None:
    for it in list(_LIVE):
        it.close()


def device_iterator(
    source: Source,
    sharding: Any,
    prefetch: int = 2,
    cache_batches: int = 0,
    report_every: int = 0,
) -> DeviceIterator:
    """A :class:`DeviceIterator` over ``source`` (a pipeline or its iterator);
    ``cache_batches=N`` replays its first ``N`` batches for ever (headspace);
    ``report_every=N`` reports the slowest process every ``N`` steps."""
    return DeviceIterator(source, sharding, prefetch, cache_batches, report_every)


__all__ = ["DeviceIterator", "device_iterator"]
