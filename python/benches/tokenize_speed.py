"""Tokenization in the pipeline beside the reference libraries alone, in one run.

    python python/benches/tokenize_speed.py [--lines 60000] [--rounds 3] [--json OUT]

The text: lines of the Python standard library's sources (prose and code,
many distinct words), written once as a TFRecord file of one ``text``
feature per line. For each tokenizer of ``testdata/tokenizer/`` (the BPE
``tokenizer.json``, the SentencePiece unigram and BPE models; small
vocabularies, trained on testdata's corpus):

- ``reference``: the library alone, in this process, one line at a time
  (``tokenizers``' ``encode(line, add_special_tokens=False)``,
  ``sentencepiece``'s ``encode(line)``): one core;
- ``infeed``: parse, ``tokenize`` (eos added), ``pack(1024)`` (split), batch
  64, with the pipeline's threads on the cores this process may use;
- ``pretokenized``: the same ids written as an int32 feature: parse, pack,
  batch (what tokenizing ahead of time leaves);
- ``grain``: Grain's ``MapDataset`` over the lines, ``.map`` calling the
  reference library, then the ids packed end to end into rows of 1024 in
  Python and batched by 64 (one process, Grain's default).

Tokens per second, the median of ``--rounds``. Run under ``taskset -c 0`` for
one core and as it is for two; build the package in release first
(``maturin develop --release``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

import infeed

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE / "python" / "tests"))
from records import example, write_tfrecord  # noqa: E402

TOKENIZERS = HERE / "testdata" / "tokenizer"
ROW, BATCH = 1024, 64


def stdlib_lines(n: int) -> list[str]:
    """``n`` non-empty lines of the standard library's sources, in a fixed order."""
    out: list[str] = []
    for path in sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            out += [line.strip() for line in f if line.strip()]
        if len(out) >= n:
            break
    return out[:n]


def reference(kind: str, path: Path) -> Callable[[str], list[int]]:
    if kind == "json":
        import tokenizers

        t = tokenizers.Tokenizer.from_file(str(path))
        return lambda s: t.encode(s, add_special_tokens=False).ids
    import sentencepiece as spm  # type: ignore[import-untyped]

    sp = spm.SentencePieceProcessor(model_file=str(path))
    return lambda s: sp.encode(s)


def timed(run: Callable[[], int], rounds: int) -> float:
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        tokens = run()
        rates.append(tokens / (time.perf_counter() - start))
    return statistics.median(rates)


def pipeline_tokens(p: infeed.Pipeline) -> int:
    return sum(int((b["segment_ids"] > 0).sum()) for b in p)


def packed_rows(ids: Iterable[list[int]]) -> Iterable[np.ndarray]:
    """Ids end to end, cut into rows of ``ROW``, ``BATCH`` rows a batch."""
    buf: list[int] = []
    rows: list[np.ndarray] = []
    for seq in ids:
        buf += seq
        while len(buf) >= ROW:
            rows.append(np.asarray(buf[:ROW], np.int32))
            del buf[:ROW]
            if len(rows) == BATCH:
                yield np.stack(rows)
                rows = []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=60_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    lines = stdlib_lines(args.lines)
    tmp = Path(tempfile.mkdtemp())
    text_file = tmp / "text.tfrecord"
    write_tfrecord(text_file, [example({"text": [line.encode()]}) for line in lines])
    results: list[dict[str, object]] = []
    for name, kind in [
        ("tokenizer.json", "json"),
        ("spm-unigram.model", "spm"),
        ("spm-bpe.model", "spm"),
    ]:
        path = TOKENIZERS / name
        encode = reference(kind, path)
        ids = [encode(line) + [2] for line in lines]
        total = sum(len(x) for x in ids)
        def alone(encode: Callable[[str], list[int]] = encode) -> int:
            return sum(len(encode(line)) + 1 for line in lines)

        ref = timed(alone, args.rounds)

        def ours(path: Path = path) -> int:
            text_spec = {"text": infeed.FixedLen([], "bytes")}
            p = (
                infeed.Pipeline.from_files([text_file])
                .parse(text_spec)
                .tokenize("text", path)
                .pack(ROW)
                .pack_overflow("split")
                .batch(BATCH, drop_remainder=False)
                .threads(cores)
            )
            return pipeline_tokens(p)

        pre_file = tmp / f"pre-{name}.tfrecord"
        write_tfrecord(pre_file, [example({"text": x}) for x in ids])

        def pretokenized(pre_file: Path = pre_file) -> int:
            p = (
                infeed.Pipeline.from_files([pre_file])
                .parse({"text": infeed.VarLen("int64")})
                .cast("int32")
                .pack(ROW)
                .pack_overflow("split")
                .batch(BATCH, drop_remainder=False)
                .threads(cores)
            )
            return pipeline_tokens(p)

        def grain_loop(encode: Callable[[str], list[int]] = encode) -> int:
            import grain

            ds = grain.MapDataset.source(lines).map(lambda s: encode(s) + [2])
            return sum(int(b.size) for b in packed_rows(iter(ds)))

        rate = {
            "infeed": timed(ours, args.rounds),
            "pretokenized": timed(pretokenized, args.rounds),
            "grain": timed(grain_loop, args.rounds),
        }
        results.append(
            {"tokenizer": name, "cores": cores, "lines": len(lines), "tokens": total}
            | {"reference": ref}
            | rate
        )
        print(
            f"{name:18} {cores} core(s)  reference {ref / 1e6:6.2f} M tok/s  "
            f"infeed {rate['infeed'] / 1e6:6.2f} ({rate['infeed'] / ref:4.2f}x)  "
            f"pretokenized {rate['pretokenized'] / 1e6:6.2f}  "
            f"grain {rate['grain'] / 1e6:6.2f} (infeed {rate['infeed'] / rate['grain']:4.2f}x)",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
