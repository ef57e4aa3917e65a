"""Padding left by each packing strategy, infeed beside Grain, on the same lengths.

    python python/benches/pack_padding.py [--docs 20000] [--json OUT]

The lengths: the lm reference workload's (``benches/compare/gen_data.py``:
uniform in 8..512), seeded, ``--docs`` of them, written once as a TFRecord file
of one ``input_ids`` feature. For rows of 512 and of 1024 values, 64 rows a
batch (Grain: 64 packing bins, not shuffled):

- infeed: ``parse`` → ``pack(row, strategy=...)`` → ``batch(64)`` for
  ``first_fit``, ``best_fit``, ``concat_split`` and ``best_fit`` with
  ``max_segments=4``;
- Grain: ``FirstFitPackIterDataset``, ``BestFitPackIterDataset`` (the same,
  ``max_sequences_per_bin=4``) and ``ConcatThenSplitIterDataset`` over the
  same lengths.

Padding is the share of values of the rows emitted that hold no token
(segment id 0), the last batch (a partial one at the end of the input) left
out of both, so the figure is the steady run's. Every token is counted, to
check that both packed all of them.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import grain
import grain.experimental as gx
import numpy as np

import infeed

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE / "python" / "tests"))
from records import example, write_tfrecord  # noqa: E402

BINS = 64
SPEC = {"input_ids": infeed.VarLen("int64")}


def padding(segment_ids: list[np.ndarray]) -> tuple[float, int]:
    """The padding share of the rows of all but the last batch, and the
    tokens of all of them."""
    tokens = sum(int((s > 0).sum()) for s in segment_ids)
    steady = np.concatenate([s.reshape(-1, s.shape[-1]) for s in segment_ids[:-1]])
    return float((steady == 0).mean()), tokens


def infeed_rows(path: Path, row: int, strategy: str, cap: int | None) -> list[np.ndarray]:
    p = (
        infeed.Pipeline.from_files([str(path)])
        .parse(SPEC)
        .pack(row, strategy=strategy, max_segments=cap)
        .batch(BINS, drop_remainder=False)
    )
    return [b["segment_ids"] for b in p]


def grain_rows(lengths: np.ndarray, row: int, how: str, cap: int | None) -> list[np.ndarray]:
    docs = [{"input_ids": np.ones(n, np.int32)} for n in lengths.tolist()]
    ds = grain.MapDataset.source(docs).to_iter_dataset()
    length = {"input_ids": row}
    if how == "concat_split":
        packed = gx.ConcatThenSplitIterDataset(ds, length_struct=length)
    else:
        kind = gx.FirstFitPackIterDataset if how == "first_fit" else gx.BestFitPackIterDataset
        packed = kind(
            ds,
            length_struct=length,
            num_packing_bins=BINS,
            shuffle_bins=False,
            max_sequences_per_bin=cap,
        )
    segs = [e["input_ids_segment_ids"] for e in packed]
    # Grain's rows in batches of 64 as infeed's, the last one partial.
    return [np.stack(segs[i : i + BINS]) for i in range(0, len(segs), BINS)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    lengths = np.random.default_rng(0).integers(8, 513, args.docs)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lm.tfrecord"
        write_tfrecord(path, [example({"input_ids": [1] * int(n)}) for n in lengths])
        total = int(lengths.sum())
        print(f"{args.docs} documents, {total} tokens, lengths uniform in 8..512")
        print("| row | strategy | infeed padding | Grain padding |")
        print("| ---: | --- | ---: | ---: |")
        for row in (512, 1024):
            for strategy, cap in (
                ("first_fit", None),
                ("best_fit", None),
                ("best_fit", 4),
                ("concat_split", None),
            ):
                ours, our_tokens = padding(infeed_rows(path, row, strategy, cap))
                theirs, their_tokens = padding(grain_rows(lengths, row, strategy, cap))
                assert our_tokens == total, (strategy, our_tokens, total)
                assert their_tokens == total, (strategy, their_tokens, total)
                name = strategy + (f", max_segments={cap}" if cap else "")
                print(f"| {row} | {name} | {ours:.2%} | {theirs:.2%} |")
                results.append({"row": row, "strategy": name, "infeed": ours, "grain": theirs})
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
