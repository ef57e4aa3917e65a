"""Checks and tabulates the results of scripts/compare-tfdata.sh.

    python report.py RESULTS.jsonl META.json

Each line of RESULTS is one run: {"workload", "files" (plain|gzip), "cores",
"stage", "side" (infeed|tf.data|cat; copy: examples/copy_bandwidth
beside each infeed full run; infeed-gcs beside infeed-local for the
emulator runs, and client: examples/range_read on the same objects),
"round", "result": the JSON line the run printed}. For each cell the best round (highest records/s) of
each side is kept, and its other figures are that round's. MB/s and CPU
seconds per GB count serialized record bytes (uncompressed, as in the shards'
Examples), the same amount for both sides.

The floor of a full pipeline: a record must read its serialized bytes R and
write its share of the output tensors W (infeed's `output_bytes` / records);
at the copy traffic (bytes read + written per second) measured for a buffer of
the batch's size on the same cores, that allows traffic / (R + W) records/s.
"floor" is infeed's records/s as a fraction of that.

Exits 1 if the two sides of a cell disagree on records emitted, records per
epoch, or the shapes of their batches (compared on tf.data's tensor names;
infeed may emit masks besides).
"""

import json
import sys
from collections import defaultdict

STAGES = ("raw", "parse", "full")
HELPERS = ("cat", "copy", "copy-dram", "client")  # measurements beside the pipelines, not pipelines


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def project(shapes, names):
    return sorted(json.dumps({k: v for k, v in s.items() if k in names}, sort_keys=True)
                  for s in shapes)


def check(cell, runs, meta):
    """Messages for each way the runs of one cell disagree."""
    problems = []
    tf_runs = [r for r in runs if r["side"] == "tf.data"]
    names = {k for r in tf_runs for s in r["result"]["shapes"] for k in s}
    expected = meta["workloads"][cell[0]]["records_per_epoch"]
    for r in runs:
        if r["side"] in HELPERS:
            continue
        res = r["result"]
        if res.get("records_per_epoch") != expected:
            problems.append(f"{r['side']}: {res.get('records_per_epoch')} records per epoch, "
                            f"the shards hold {expected}")
    reference = tf_runs[0]["result"] if tf_runs else None
    for r in runs:
        if reference is None or r["side"] in HELPERS + ("tf.data",):
            continue
        res = r["result"]
        if res["records"] != reference["records"]:
            problems.append(f"{r['side']} emitted {res['records']} records, "
                            f"tf.data {reference['records']}")
        if project(res["shapes"], names) != project(reference["shapes"], names):
            problems.append(f"{r['side']} shapes {project(res['shapes'], names)} != "
                            f"tf.data {project(reference['shapes'], names)}")
    return problems


def fmt_int(x):
    return f"{x:,.0f}".replace(",", " ")


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "–"


def side_figures(res, per_record):
    """One side's best run as the table shows it (None if it did not run)."""
    if res is None:
        return None
    gb = res["records"] * per_record / 1e9
    return {"rps": res["records_per_sec"], "mbps": res["records_per_sec"] * per_record / 1e6,
            "first": res["first_batch_ms"], "rss": res["peak_rss_bytes"] / 1e6,
            "rss_growth": (res["peak_rss_bytes"] - res["baseline_rss_bytes"]) / 1e6
            if "baseline_rss_bytes" in res else None,
            "cpu_gb": res["cpu_seconds"] / gb if gb and res.get("cpu_seconds") is not None else None}


def main():
    runs = load(sys.argv[1])
    with open(sys.argv[2]) as f:
        meta = json.load(f)
    cells = defaultdict(list)
    for r in runs:
        cells[(r["workload"], r["files"], r["cores"], r["stage"])].append(r)
    failures = []
    rows = []
    gcs_rows = []
    floor_rows = []
    cat = {}
    for cell in sorted(cells, key=lambda c: (c[0] != "lm", c[1] != "plain", -c[2], STAGES.index(c[3]))):
        workload, files, cores, stage = cell
        for problem in check(cell, cells[cell], meta):
            failures.append(f"{workload}/{files}/{cores} cores/{stage}: {problem}")
        w = meta["workloads"][workload]
        per_record = w["payload_bytes_per_epoch"] / w["records_per_epoch"]
        best = {}
        for r in cells[cell]:
            res = r["result"]
            if r["side"] == "cat":
                if "cat" not in best or res["seconds"] < best["cat"]["seconds"]:
                    best["cat"] = res
            elif r["side"] in ("copy", "copy-dram"):
                side = r["side"]
                if side not in best or res["traffic_bytes_per_sec"] > best[side]["traffic_bytes_per_sec"]:
                    best[side] = res
            elif r["side"] == "client":
                if "client" not in best or res["bytes_per_sec"] > best["client"]["bytes_per_sec"]:
                    best["client"] = res
            elif r["side"] not in best or res["records_per_sec"] > best[r["side"]]["records_per_sec"]:
                best[r["side"]] = res

        def figures(side, best=best, per_record=per_record):
            return side_figures(best.get(side), per_record)

        a, b = figures("infeed"), figures("tf.data")
        if "cat" in best and files == "plain":
            cat[(workload, files, cores)] = best["cat"]["bytes"] / best["cat"]["seconds"] / 1e6
        floor = None
        if a and best.get("copy") and best["infeed"].get("output_bytes") and best["infeed"]["records"]:
            res = best["infeed"]
            write = res["output_bytes"] / res["records"]
            floor_rps = best["copy"]["traffic_bytes_per_sec"] / (per_record + write)
            floor = a["rps"] / floor_rps
            dram = best.get("copy-dram")
            dram_gbps = "–" if dram is None else f"{dram['traffic_bytes_per_sec'] / 1e9:.1f}"
            dram_floor = "–" if dram is None else \
                f"{a['rps'] * (per_record + write) / dram['traffic_bytes_per_sec']:.1%}"
            floor_rows.append(f"| {workload} | {files} | {cores} | {per_record:.0f} | {write:.0f} "
                              f"| {best['copy']['buffer_bytes'] / 1e6:.2f} "
                              f"| {best['copy']['traffic_bytes_per_sec'] / 1e9:.1f} "
                              f"| {fmt_int(floor_rps)} | {fmt_int(a['rps'])} | {floor:.1%} "
                              f"| {dram_gbps} | {dram_floor} |")
        if a and b:
            rows.append(f"| {workload} | {files} | {cores} | {stage} "
                        f"| {fmt_int(a['rps'])} | {fmt_int(b['rps'])} | **{ratio(a['rps'], b['rps'])}** "
                        f"| {a['mbps']:.0f} / {b['mbps']:.0f} "
                        f"| {a['first']:.0f} / {b['first']:.0f} "
                        f"| {a['rss']:.0f} / {b['rss']:.0f} (+{b['rss_growth']:.0f}) "
                        f"| {a['cpu_gb']:.2f} / {b['cpu_gb']:.2f} "
                        f"| {'–' if floor is None else f'{floor:.0%}'} |")
        g, local = figures("infeed-gcs"), figures("infeed-local")
        if g and local:
            client = best.get("client")
            # File bytes (compressed for GZIP) per second: what the client counts.
            g_mbps = client["bytes"] / best["infeed-gcs"]["seconds"] / 1e6 if client else None
            c_mbps = client["bytes_per_sec"] / 1e6 if client else None
            gcs_rows.append(f"| {workload} | {files} | {cores} | {stage} | {fmt_int(g['rps'])} "
                            f"| {fmt_int(local['rps'])} | {ratio(g['rps'], local['rps'])} "
                            f"| {'–' if c_mbps is None else f'{g_mbps:.0f} / {c_mbps:.0f}'} "
                            f"| {ratio(g_mbps, c_mbps)} "
                            f"| {g['first']:.0f} / {local['first']:.0f} |")
    rounds = max((r["round"] for r in runs), default=0)
    loads = [r["load"] for r in runs if "load" in r]
    if loads:
        print(f"1-minute load average during the runs: {min(loads):.2f} to {max(loads):.2f} "
              f"(median {sorted(loads)[len(loads) // 2]:.2f}).\n")
    print(f"Best of {rounds} round(s) per side (by records/s); cells are infeed / tf.data. "
          "tf.data's peak RSS includes what TensorFlow holds after its import; (+N) is its "
          "growth beyond that.\n")
    print("| workload | files | cores | stage | infeed rec/s | tf.data rec/s | ratio "
          "| MB/s | first batch ms | peak RSS MB | CPU s/GB | infeed / floor |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    if floor_rows:
        print("\nFloors of the full pipelines: bytes each record must read (serialized) and write "
              "(output tensors as emitted), this machine's copy traffic (read + written) for a "
              "buffer of the batch's size on the same cores (it stays in cache), the records/s it "
              "allows, and the same for 256 MiB buffers (DRAM):\n")
        print("| workload | files | cores | read B/rec | write B/rec | batch MB | copy GB/s "
              "| floor rec/s | infeed rec/s | infeed / floor | DRAM copy GB/s | infeed / DRAM floor |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        print("\n".join(floor_rows))
    if cat:
        print("\nPage cache floor (`cat` of the same files, MB/s of file bytes) beside infeed's raw "
              "read+CRC (MB/s of record bytes):\n")
        print("| workload | files | cores | cat MB/s | infeed raw MB/s | infeed / cat |")
        print("| --- | --- | --- | ---: | ---: | ---: |")
        for (workload, files, cores), mbps in sorted(cat.items()):
            raw = best_raw = None
            for r in cells.get((workload, files, cores, "raw"), []):
                if r["side"] == "infeed" and (best_raw is None or r["result"]["records_per_sec"] > best_raw):
                    best_raw = r["result"]["records_per_sec"]
            if best_raw:
                w = meta["workloads"][workload]
                raw = best_raw * w["payload_bytes_per_epoch"] / w["records_per_epoch"] / 1e6
            print(f"| {workload} | {files} | {cores} | {mbps:.0f} | "
                  f"{'–' if raw is None else f'{raw:.0f}'} | {ratio(raw, mbps)} |")
    buffer_rows = []
    for cell in sorted(cells, key=lambda c: (c[0] != "lm", c[1] != "plain", -c[2])):
        workload, files, cores, stage = cell
        # The record thread's figures hold the shuffle buffer's; results kept
        # before the stage was named "records" call it "shuffle".
        buffers = [r["result"]["stages"].get("records") or r["result"]["stages"]["shuffle"]
                   for r in cells[cell] if r["side"] == "infeed" and "stages" in r["result"]]
        if stage != "full" or not buffers:
            continue
        # The round whose buffer was fullest; storage and payload are each run's peaks.
        s = max(buffers, key=lambda st: st["buffer_payload_bytes"] + st.get("buffer_mapped_bytes", 0))
        payload, mapped = s["buffer_payload_bytes"], s.get("buffer_mapped_bytes", 0)
        if payload or mapped:
            per = f"{s['buffer_bytes'] / payload:.3f}×" if payload else "–"
            buffer_rows.append(f"| {workload} | {files} | {cores} "
                               f"| {s['buffer_bytes'] / 1e6:.1f} | {payload / 1e6:.1f} "
                               f"| {per} | {mapped / 1e6:.1f} |")
    if buffer_rows:
        print("\ninfeed's shuffle buffer (10 000 records) in the full runs: peak storage beside "
              "the peak of the serialized records it stored, and of the records it held as views "
              "of the mapped shards (--mmap: records of 1 KiB and more, not copied):\n")
        print("| workload | files | cores | storage MB | payload MB | storage / payload | mapped MB |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
        print("\n".join(buffer_rows))
    if gcs_rows:
        print("\ninfeed reading gs:// from fake-gcs-server on loopback beside the same files on local disk:\n")
        print("The client is examples/range_read: plain object_store get_range, 16 in flight, "
              "8 MiB each, on the same objects and cores (raw rows; MB/s of file bytes).\n")
        print("| workload | files | cores | stage | gcs rec/s | local rec/s | gcs / local "
              "| MB/s gcs / client | gcs / client | first batch ms (gcs / local) |")
        print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        print("\n".join(gcs_rows))
    if failures:
        print("\nThe two sides disagree:", *failures, sep="\n  ", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
