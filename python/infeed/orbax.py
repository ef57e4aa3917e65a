"""Orbax checkpointing of an :class:`infeed.Iterator` beside the model.

::

    import orbax.checkpoint as ocp
    import infeed.orbax

    mngr = ocp.CheckpointManager(directory)
    mngr.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(train_state),
        data=infeed.orbax.CheckpointSave(iterator),
    ))
    ...
    restored = mngr.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state),
        data=infeed.orbax.CheckpointRestore(iterator),   # continues where it was saved
    ))

Each process writes its own iterator's state (a few KB) as
``process_<index>-of-<count>.infeed`` in the item's directory. A restore
reads every process's file and merges them (:func:`infeed.merge_states`), so
each process takes the logical streams it runs: on the same process count,
its own; on another (a pipeline with ``streams(n)``, on a process count that
divides ``n``), those of its new slice.
"""

from __future__ import annotations

import dataclasses

import orbax.checkpoint as ocp
from etils import epath

from infeed._infeed import merge_states
from infeed.pipeline import Iterator


def _process() -> tuple[int, int]:
    try:
        import jax
    except ImportError:
        return 0, 1
    return jax.process_index(), jax.process_count()


def _state_file(directory: epath.PathLike) -> epath.Path:
    index, count = _process()
    return epath.Path(directory) / f"process_{index}-of-{count}.infeed"


def _iterator(
    item: Iterator | None, args: CheckpointSave | CheckpointRestore | None
) -> Iterator:
    """The iterator given as ``item`` (Orbax's older API) or in ``args``."""
    if item is not None:
        return item
    if args is None:
        raise ValueError("infeed.orbax.CheckpointHandler needs the iterator: item or args")
    return args.item


class CheckpointHandler(ocp.CheckpointHandler):
    """Saves and restores an :class:`infeed.Iterator`'s state."""

    def save(
        self,
        directory: epath.Path,
        item: Iterator | None = None,
        args: CheckpointSave | None = None,
    ) -> None:
        iterator = _iterator(item, args)
        directory = epath.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        _state_file(directory).write_bytes(iterator.get_state())

    def restore(
        self,
        directory: epath.Path,
        item: Iterator | None = None,
        args: CheckpointRestore | None = None,
    ) -> Iterator:
        iterator = _iterator(item, args)
        saved = sorted(epath.Path(directory).glob("process_*-of-*.infeed"))
        if not saved:
            raise FileNotFoundError(f"no infeed iterator state in {directory}")
        iterator.set_state(merge_states([path.read_bytes() for path in saved]))
        return iterator


@ocp.args.register_with_handler(CheckpointHandler, for_save=True)
@dataclasses.dataclass
class CheckpointSave(ocp.args.CheckpointArgs):
    """Saves ``item`` (an :class:`infeed.Iterator`)."""

    item: Iterator


@ocp.args.register_with_handler(CheckpointHandler, for_restore=True)
@dataclasses.dataclass
class CheckpointRestore(ocp.args.CheckpointArgs):
    """Restores into ``item`` (an iterator of the same pipeline)."""

    item: Iterator


__all__ = ["CheckpointHandler", "CheckpointRestore", "CheckpointSave"]
