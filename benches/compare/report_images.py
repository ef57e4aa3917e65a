"""The table of scripts/compare-images.sh, from its results file (one JSON line per run).

    python report_images.py RESULTS.jsonl

For each pipeline (train, eval) and core count: the median images/s of tf.data, of infeed and of
the floor (libjpeg-turbo decoding every picture whole, one thread per core) over the rounds, the
median of each round's infeed / tf.data ratio (the two ran back to back in that round), each
side's images/s per core beside the floor's, and the medians of CPU time per image and of the
cores each side kept busy (CPU seconds over wall seconds; below the core count when other work
on the machine took its share). Exits 1 if tf.data and infeed emitted different
numbers of images or batch shapes in any round.
"""

import json
import statistics
import sys
from collections import defaultdict


def rate(result):
    return result.get("records_per_sec") or result.get("images_per_sec")


def n(x):
    """A whole number with thin groups: 12 345."""
    return f"{x:,.0f}".replace(",", " ")


def shapes(result):
    return sorted(json.dumps(s, sort_keys=True) for s in result["shapes"])


def main():
    with open(sys.argv[1]) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    by = defaultdict(dict)  # (pipeline, cores) -> round -> side -> result
    floors = defaultdict(dict)  # cores -> round -> result
    for run in runs:
        if run["side"] == "floor":
            floors[run["cores"]][run["round"]] = run["result"]
        else:
            by[(run["pipeline"], run["cores"])].setdefault(run["round"], {})[run["side"]] = run["result"]

    failed = False
    print("| pipeline | cores | tf.data images/s | infeed images/s | infeed / tf.data (each round) "
          "| libjpeg-turbo decode-only images/s | per core: floor / tf.data / infeed "
          "| CPU ms per image: tf.data / infeed | CPU busy: tf.data / infeed | load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |")
    order = {"train": 0, "eval": 1}
    for (pipeline, cores), rounds in sorted(by.items(), key=lambda kv: (-kv[0][1], order.get(kv[0][0], 9))):
        pairs = []
        for r, sides in sorted(rounds.items()):
            tf, infeed = sides.get("tf.data"), sides.get("infeed")
            if tf is None or infeed is None:
                continue
            if tf["records"] != infeed["records"] or shapes(tf) != shapes(infeed):
                print(f"report_images: {pipeline} on {cores} core(s), round {r}: tf.data emitted "
                      f"{tf['records']} images as {shapes(tf)}, infeed {infeed['records']} as "
                      f"{shapes(infeed)}", file=sys.stderr)
                failed = True
            pairs.append((tf, infeed))
        if not pairs:
            continue
        med = statistics.median
        tf_rate, infeed_rate = med(rate(t) for t, _ in pairs), med(rate(i) for _, i in pairs)
        ratios = [rate(i) / rate(t) for t, i in pairs]
        floor_rates = [rate(f) for f in floors.get(cores, {}).values()]
        floor = med(floor_rates) if floor_rates else None
        # CPU time per image and cores kept busy (CPU seconds / wall seconds), from each side's
        # own count: what the load of a shared machine changes least, and what it changes most.
        cpu = [med(x["cpu_seconds"] / x["records"] * 1e3 for x in side) for side in zip(*pairs)]
        busy = [med(x["cpu_seconds"] / x["seconds"] for x in side) for side in zip(*pairs)]
        loads = [run["load"] for run in runs if run.get("cores") == cores]
        per_core = [floor] if floor else []
        print(f"| {pipeline} | {cores} | {n(tf_rate)} | {n(infeed_rate)} | "
              f"**{med(ratios):.2f}×** ({', '.join(f'{x:.2f}' for x in ratios)}) | "
              f"{n(floor) if floor else '–'} | "
              f"{' / '.join(n(x / cores) for x in per_core + [tf_rate, infeed_rate])} | "
              f"{cpu[0]:.2f} / {cpu[1]:.2f} | {busy[0]:.2f} / {busy[1]:.2f} | "
              f"{min(loads):.1f}–{max(loads):.1f} |")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
