"""An infeed pipeline as a Ray Data datasource: TFRecord shards in, blocks of
parsed, batched records out (CRCs checked, indexes and the global shuffle
available), beside ``ray.data.read_tfrecords``.

::

    import ray, infeed, infeed.ray_data

    pipeline = (infeed.Pipeline.from_glob("gs://bucket/train-*.tfrecord")
                .parse(SPEC).fixed_length(512).batch(1024))
    ds = infeed.ray_data.read(pipeline)            # a ray.data.Dataset
    for batch in ds.iter_batches(batch_size=256): ...

Read task ``t`` of ``T`` runs ``pipeline.shard(t, T)`` (a host's share, as
in docs/many-hosts.md: every ``T``-th file, or every ``T``-th record of the
files read together when there are fewer files than tasks) and makes
each of its batches a block (an Arrow table; tensors as Ray's tensor
columns, bytes as binary). ``T`` is the parallelism Ray Data asks for, at
most the number of files, or ``tasks``. With Ray Data's ``preserve_order``
the blocks come task after task, each task's in its pipeline's order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

try:
    import ray.data
    from ray.data.block import Block, BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask
except ImportError as e:
    raise ImportError(
        f"infeed.ray_data needs Ray Data ({e}): pip install 'infeed[ray-data]' (the Ray "
        "version it is tested with)"
    ) from e

from infeed.pipeline import Pipeline


class InfeedDatasource(Datasource):
    """``pipeline``'s batches as blocks, one read task per host shard."""

    def __init__(self, pipeline: Pipeline, tasks: int | None = None) -> None:
        super().__init__()
        description = pipeline.describe()
        if not any("batch" in s or "pack" in s for s in description.get("batches", [])):
            raise ValueError(
                "infeed.ray_data: the pipeline makes no batches (parse and batch it): its "
                "batches are the blocks"
            )
        if pipeline._maps:
            raise ValueError(
                "infeed.ray_data: map_batch functions do not run in read tasks; map the "
                "dataset instead (ds.map_batches)"
            )
        if "shard" in description.get("options", {}):
            raise ValueError(
                "infeed.ray_data: the read tasks shard the pipeline; give it unsharded"
            )
        if tasks is not None and tasks < 1:
            raise ValueError(f"infeed.ray_data: tasks is {tasks}, not at least 1")
        self._pipeline = pipeline
        self._tasks = tasks

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any = None,
    ) -> list[ReadTask]:
        files = self._pipeline.files
        count = self._tasks or max(1, min(parallelism, len(files)))
        # Task t reads exactly files t, t + count, ... only when one source
        # is sharded by file; otherwise (fewer files than tasks, logical
        # streams, the global shuffle, a mixture's sources sharded each on
        # its own) every file is listed, a superset of what it reads.
        d = self._pipeline.describe()
        by_file = (
            count <= len(files)
            and "mix" not in d.get("source", {})
            and "streams" not in d.get("options", {})
            and not any("global_shuffle" in step for step in d.get("records", []))
        )
        return [
            ReadTask(
                _reader(self._pipeline.shard(t, count)),
                BlockMetadata(
                    num_rows=None,
                    size_bytes=None,
                    exec_stats=None,
                    input_files=tuple(files[t::count] if by_file else files),
                ),
                per_task_row_limit=per_task_row_limit,
            )
            for t in range(count)
        ]


def _reader(pipeline: Pipeline) -> Any:
    def read() -> Iterable[Block]:
        with pipeline.iter() as it:
            for batch in it:
                real = it.real_rows
                if real is not None and real < len(next(iter(batch.values()))):
                    batch = {name: value[:real] for name, value in batch.items()}
                yield BlockAccessor.batch_to_block(batch)

    return read


def read(pipeline: Pipeline, *, tasks: int | None = None, **read_args: Any) -> ray.data.Dataset:
    """``pipeline``'s batches as a ``ray.data.Dataset`` (``read_args`` go to
    ``ray.data.read_datasource``, e.g. ``concurrency``)."""
    return ray.data.read_datasource(InfeedDatasource(pipeline, tasks), **read_args)


__all__ = ["InfeedDatasource", "read"]
