"""infeed's packing strategies row for row beside Grain's packers, the
reference their names come from, on the same documents."""

from __future__ import annotations

import grain
import grain.experimental as gx
import numpy as np
import pytest
from records import example, write_tfrecord

import infeed

ROW, BINS = 64, 8


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    """300 documents of 1..64 tokens; document ``d``'s tokens are all
    ``d + 1``, so a row shows which documents it holds, cut where."""
    lengths = np.random.default_rng(7).integers(1, ROW + 1, 300)
    tokens = [[d + 1] * int(n) for d, n in enumerate(lengths)]
    path = tmp_path_factory.mktemp("pack") / "docs.tfrecord"
    write_tfrecord(path, [example({"ids": t}) for t in tokens])
    return path, tokens


def ours(path, strategy: str, cap: int | None) -> list[tuple[np.ndarray, np.ndarray]]:
    p = (
        infeed.Pipeline.from_files([str(path)])
        .parse({"ids": infeed.VarLen("int64")})
        .pack(ROW, strategy=strategy, max_segments=cap)
        .batch(BINS, drop_remainder=False)
    )
    rows = []
    for b in p:
        for ids, seg in zip(b["ids"], b["segment_ids"], strict=True):
            if seg.any():
                rows.append((ids, seg))
    return rows


def theirs(tokens, strategy: str, cap: int | None) -> list[tuple[np.ndarray, np.ndarray]]:
    ds = grain.MapDataset.source([{"ids": np.array(t, np.int64)} for t in tokens])
    ds = ds.to_iter_dataset()
    if strategy == "concat_split":
        packed = gx.ConcatThenSplitIterDataset(ds, length_struct={"ids": ROW})
    else:
        kind = {"first_fit": gx.FirstFitPackIterDataset, "best_fit": gx.BestFitPackIterDataset}
        packed = kind[strategy](
            ds,
            length_struct={"ids": ROW},
            num_packing_bins=BINS,
            shuffle_bins=False,
            max_sequences_per_bin=cap,
        )
    return [(e["ids"], e["ids_segment_ids"]) for e in packed]


@pytest.mark.parametrize(
    "strategy,cap",
    [
        ("first_fit", None),
        ("best_fit", None),
        ("best_fit", 3),
        ("first_fit", 2),
        ("concat_split", None),
    ],
)
def test_rows_equal_grains(docs, strategy, cap):
    path, tokens = docs
    a, b = ours(path, strategy, cap), theirs(tokens, strategy, cap)
    assert len(a) == len(b)
    for i, ((ids, seg), (gids, gseg)) in enumerate(zip(a, b, strict=True)):
        np.testing.assert_array_equal(ids, gids, err_msg=f"row {i}")
        np.testing.assert_array_equal(seg, gseg, err_msg=f"row {i}")
    if strategy == "concat_split":
        # No padding but in the last row.
        assert all(seg.all() for _, seg in a[:-1])
