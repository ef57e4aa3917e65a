"""The lm pipeline on 1, 2, 4, ... cores: where more workers stop paying.

    python python/benches/core_scaling.py --infeed target/release/infeed \\
        --lm testdata/lm-sample.tfrecord [--seconds 3] [--copies 40] [--json OUT]

``infeed bench`` of the lm reference pipeline (``beside_step.py``'s) with
``--cpu-affinity`` on the first 1, 2, 4, ... of the cores this process may
use (and all of them), endless input, for each of:

- ``one_file``: the ``--lm`` file read over and over (one shard thread);
- ``many_files``: ``--copies`` copies of it (made in a temporary folder);

each framed by the shards' headers (``plain``) and by their indexes
(``indexed``: ``infeed index`` writes them into a temporary folder first,
given as ``--index-dir``); the workers read the records either way. Prints
one JSON object of records/s, by input, then mode, then cores; ``--json``
also writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from beside_step import bench


def budgets() -> list[list[int]]:
    """The first 1, 2, 4, ... allowed cores, and all of them."""
    allowed = sorted(os.sched_getaffinity(0))
    counts = [n for n in (1, 2, 4, 8, 16, 32, 64) if n < len(allowed)] + [len(allowed)]
    return [allowed[:n] for n in counts]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--infeed", required=True, help="the infeed binary")
    ap.add_argument("--lm", required=True, help="one lm-shaped TFRecord file")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--json", help="also write the report to this file")
    a = ap.parse_args()
    report: dict[str, dict[str, dict[int, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.copies):
            shutil.copyfile(a.lm, Path(tmp) / f"copy-{i:03}.tfrecord")
        copies = sorted(str(p) for p in Path(tmp).glob("*.tfrecord"))
        indexes = str(Path(tmp) / "indexes")
        subprocess.run(
            [a.infeed, "index", a.lm, *copies, "-o", indexes], check=True, capture_output=True
        )
        inputs = {"one_file": a.lm, "many_files": str(Path(tmp) / "*.tfrecord")}
        for name, files in inputs.items():
            report[name] = {}
            for mode, extra in (("plain", ()), ("indexed", ("--index-dir", indexes))):
                report[name][mode] = {
                    len(cores): round(
                        bench(a.infeed, files, "lm", cores, a.seconds, extra)["records_per_sec"]
                    )
                    for cores in budgets()
                }
    text = json.dumps(report)
    if a.json:
        Path(a.json).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
