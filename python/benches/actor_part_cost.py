"""What an infeed.ray actor's work on a part costs, without Ray: actor 0 of
``--actors``' pipeline (ray_transport.py's lm or jpeg workload) in this
process, on one thread as an actor of one CPU runs it.

    taskset -c 0 python python/benches/actor_part_cost.py \\
        --lm 'bench-data/scale-1/lm/*.tfrecord' [--actors 2] [--rounds 2]

Prints, per part (the actor's batch), the pipeline alone, then with each
thing an actor adds to a part before Ray stores it: the unpadding of
padded features (``_unpadded``), the state after the part (``get_state``),
the part's positions (``provenance``), all three; then the actor's
``next`` as Ray calls it (64 parts a call) and the pickling of its result
(protocol 5, buffers in band: about what Ray's serializer does before its
copy into the object store). What the actors spend beyond these through
Ray is Ray's (ray_transport.py measures that).
"""

from __future__ import annotations

import argparse
import pickle
import time
from collections.abc import Callable
from typing import Any

from ray_transport import pipelines

import infeed
import infeed.ray as remote_streams


def per_part(run: Callable[[], int]) -> float:
    start = time.perf_counter()
    parts = run()
    return (time.perf_counter() - start) / max(parts, 1) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lm")
    parser.add_argument("--jpeg")
    parser.add_argument("--jpeg-epochs", type=int, default=1)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for round_ in range(args.rounds):
        for name, p in pipelines(args).items():
            d = p.describe()
            description = remote_streams._actor_description(d, args.actors, 0)
            description.setdefault("options", {})["threads"] = 1

            def parts(
                *extra: str, description: dict[str, Any] = description, p: Any = p
            ) -> int:
                it = infeed.Pipeline(description, p._files, listed=p._listed).iter()
                n = 0
                for batch in it:
                    n += 1
                    if "unpad" in extra:
                        remote_streams._unpadded(batch)
                    if "state" in extra:
                        it.get_state()
                    if "provenance" in extra:
                        it._batches.provenance()
                return n

            figures = {
                "alone": per_part(parts),
                "+unpad": per_part(lambda: parts("unpad")),
                "+state": per_part(lambda: parts("state")),
                "+provenance": per_part(lambda: parts("provenance")),
                "+all three": per_part(lambda: parts("unpad", "state", "provenance")),
            }
            actor = remote_streams._Streams(description, p._files, p._listed, None)
            actor.start()
            n, pickling, start = 0, 0.0, time.perf_counter()
            while True:
                got = actor.next(64, 16 << 20)
                n += len(got)
                began = time.perf_counter()
                pickle.dumps(got, protocol=5)
                pickling += time.perf_counter() - began
                if got[-1].batch is None:
                    break
            total = time.perf_counter() - start
            figures["actor next"] = (total - pickling) / n * 1e6
            figures["pickling"] = pickling / n * 1e6
            print(
                f"{name} round {round_}, us a part: "
                + ", ".join(f"{k} {v:.0f}" for k, v in figures.items()),
                flush=True,
            )


if __name__ == "__main__":
    main()
