"""What the Python binding costs: the same pipeline through `infeed bench` (Rust)
and through the Python package, consumed in a Python loop into numpy arrays.

    python python/benches/binding_cost.py --infeed target/release/infeed \\
        [--glob testdata/lm-sample.tfrecord] [--epochs 400] [--batch 32] [--rounds 3]

Both run the README's lm pipeline (shuffle 1000, then repeat, parse, pad to a
multiple of 64, max length 512, int32, batch) with seed 1, alternating
Rust, Python, Rust, Python...; prints records/s of each round and the best
ratio. Build both in release (`maturin build --release` or `pip install ./python`,
and `cargo build --release`) for meaningful figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time

import infeed

SPEC = "input_ids:var_len:int64,attention_mask:var_len:int64"


def python_run(args: argparse.Namespace) -> tuple[float, int]:
    p = (
        infeed.Pipeline.from_glob(args.glob)
        .seed(1)
        .shuffle(1000)
        .repeat(args.epochs)
        .parse(SPEC)
        .pad_to_multiple_of(64)
        .max_length(512)
        .cast("int32")
        .batch(args.batch, drop_remainder=False)
    )
    records = 0
    start = time.perf_counter()
    for batch in p:
        records += batch["input_ids"].shape[0]
    return records / (time.perf_counter() - start), records


def rust_run(args: argparse.Namespace) -> tuple[float, int]:
    out = subprocess.run(
        [
            args.infeed,
            "bench",
            args.glob,
            "--spec",
            SPEC,
            "--shuffle",
            "1000",
            "--epochs",
            str(args.epochs),
            "--pad-to-multiple-of",
            "64",
            "--max-length",
            "512",
            "--cast",
            "int32",
            "--batch",
            str(args.batch),
            "--seed",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return report["records_per_sec"], report["records"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--infeed", required=True, help="the infeed binary (release)")
    ap.add_argument("--glob", default="testdata/lm-sample.tfrecord")
    ap.add_argument("--epochs", type=int, default=400)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    best = {"rust": 0.0, "python": 0.0}
    for r in range(args.rounds):
        for side, run in (("rust", rust_run), ("python", python_run)):
            rate, records = run(args)
            best[side] = max(best[side], rate)
            print(f"round {r} {side:6s} {rate:12,.0f} records/s ({records} records)")
    print(
        f"best: infeed bench {best['rust']:,.0f} records/s, Python {best['python']:,.0f} "
        f"records/s: {100 * best['python'] / best['rust']:.1f}%"
    )


if __name__ == "__main__":
    main()
