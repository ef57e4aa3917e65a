"""Checks and tabulates the results of scripts/compare-python.sh.

    python report_python.py RESULTS.jsonl META.json

Each line of RESULTS is one run: {"workload", "files", "cores", "side" (infeed,
infeed-py, tf.data-numpy, grain), "round", "result"}. For each cell the best round
(highest records/s) of each side is kept. Exits 1 if a side's records per epoch differ
from what the shards hold, or if the sides disagree on records emitted or on the shapes
of the tensors tf.data emits (infeed may emit masks besides).
"""

import json
import sys
from collections import defaultdict

SIDES = ("infeed", "infeed-py", "tf.data-numpy", "grain")


def shapes_of(result, names):
    return sorted(
        json.dumps({k: v for k, v in s.items() if k in names}, sort_keys=True)
        for s in result["shapes"]
    )


def main():
    with open(sys.argv[1]) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    with open(sys.argv[2]) as f:
        meta = json.load(f)
    cells = defaultdict(dict)
    for r in runs:
        best = cells[(r["workload"], r["files"], r["cores"])]
        if (
            r["side"] not in best
            or r["result"]["records_per_sec"] > best[r["side"]]["records_per_sec"]
        ):
            best[r["side"]] = r["result"]
    failures = []
    print(
        "Best of each side's rounds; records/s, consumed into numpy arrays in a Python loop "
        "(`infeed bench`: in Rust).\n"
    )
    print(
        "| workload | files | cores | infeed bench | infeed-py | py / bench | tf.data numpy "
        "| py / tf.data | Grain | py / Grain |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for cell in sorted(cells, key=lambda c: (c[0] != "lm", c[1] != "plain", -c[2])):
        workload, files, cores = cell
        best = cells[cell]
        expected = meta["workloads"][workload]["records_per_epoch"]
        reference = best.get("tf.data-numpy")
        names = {k for s in reference["shapes"] for k in s} if reference else set()
        for side, res in best.items():
            where = f"{workload}/{files}/{cores} cores: {side}"
            if side != "infeed" and res.get("records_per_epoch") != expected:
                failures.append(
                    f"{where} counted {res.get('records_per_epoch')} records per epoch, "
                    f"the shards hold {expected}"
                )
            if reference and side != "tf.data-numpy":
                # Grain's mp_prefetch workers each batch their own slice of the
                # records and drop their own remainder: up to one batch fewer
                # per extra worker.
                short = reference["records"] - res["records"]
                batch = max(s[n][0] for s in reference["shapes"] for n in s)
                allowed = batch * max(res.get("workers", 0) - 1, 0)
                whole_batches_short = 0 < short <= allowed and short % batch == 0
                if short != 0 and not whole_batches_short:
                    failures.append(
                        f"{where} emitted {res['records']} records, tf.data {reference['records']}"
                    )
                if shapes_of(res, names) != shapes_of(reference, names):
                    failures.append(
                        f"{where} shapes {shapes_of(res, names)} != {shapes_of(reference, names)}"
                    )
        rate = {s: best[s]["records_per_sec"] if s in best else None for s in SIDES}

        def cell_of(x):
            return "–" if x is None else f"{x:,.0f}".replace(",", " ")

        def ratio(a, b):
            return "–" if not a or not b else f"{a / b:.2f}×"

        py = rate["infeed-py"]
        print(
            f"| {workload} | {files} | {cores} | {cell_of(rate['infeed'])} | {cell_of(py)} "
            f"| {ratio(py, rate['infeed'])} | {cell_of(rate['tf.data-numpy'])} "
            f"| **{ratio(py, rate['tf.data-numpy'])}** | {cell_of(rate['grain'])} | {ratio(py, rate['grain'])} |"
        )
    if failures:
        print("\nThe sides disagree:", *failures, sep="\n  ", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
