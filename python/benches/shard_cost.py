"""What a host of several costs, from Python: the lm pipeline as one host and
as host 0 of 2 (`shard(0, 2)`, whose length-dependent shapes follow the shared
bucket schedule), consumed in a Python loop; alternating rounds, medians.
Host 0 of 2 runs twice: with the same epochs (half the records, so the fixed
start and end weigh twice as much) and with twice the epochs (as many
records as one host: the steady state of a long job).

    python python/benches/shard_cost.py [--glob '/tmp/benchdata/lm/*.tfrecord'] \\
        [--epochs 4] [--rounds 5]

Build the package in release (`maturin develop --release` or `pip install
./python`) for meaningful figures; scripts/shard-cost.sh measures the same
through `infeed bench`.
"""

from __future__ import annotations

import argparse
import statistics
import time

import infeed

SPEC = "input_ids:var_len:int64,attention_mask:var_len:int64"


SETTINGS = {
    "one host": (False, 1),
    "host 0 of 2, same epochs": (True, 1),
    "host 0 of 2, same records": (True, 2),
}


def run(args: argparse.Namespace, setting: str) -> float:
    sharded, epochs_times = SETTINGS[setting]
    p = infeed.Pipeline.from_glob(args.glob)
    if sharded:
        p = p.shard(0, 2)
    p = (
        p.seed(1)
        .shuffle_files()
        .interleave(4)
        .shuffle(10_000)
        .repeat(args.epochs * epochs_times)
        .read_options(mmap=True)
        .parse(SPEC)
        .pad_to_multiple_of(64)
        .max_length(512)
        .cast("int32")
        .batch(256, drop_remainder=True)
        .threads(2)
    )
    records = 0
    start = time.perf_counter()
    for batch in p:
        records += batch["input_ids"].shape[0]
    return records / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glob", default="/tmp/benchdata/lm/*.tfrecord")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rates: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for r in range(args.rounds):
        for setting in SETTINGS:
            rate = run(args, setting)
            rates[setting].append(rate)
            print(f"round {r} {setting:26s} {rate:12,.0f} records/s")
    one = statistics.median(rates["one host"])
    print(f"medians: one host {one:,.0f} records/s")
    for setting in list(SETTINGS)[1:]:
        host = statistics.median(rates[setting])
        print(f"  {setting}: {host:,.0f} records/s, {host / one:.2f} of one host")

if __name__ == "__main__":
    main()
