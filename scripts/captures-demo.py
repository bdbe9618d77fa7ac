#!/usr/bin/env python3
"""The demo end to end on real captures: the held-out check that a change kept the estimates.

For each pcap in CAPTURES_DIR this runs `wirelat demo --source <pcap> --bounds
tests/data/demo-bounds.toml` (the demo's default scenario: Weibull-0.6 delays of mean 50 us, 1 %
uniform loss, B's clock -3 us, 100-ms epochs), then joins the peer's records with the trace
pair's truth.json and prints one row per capture:

- frames: the frames point A replays (both of its ports);
- RDA: epochs whose estimated mean equals the truth's same-epoch mean (relative difference at
  most 1e-9: RDA is exact), out of all RDA epochs with a mean, and of the others how many had
  repeated packet ids (RDA excludes repeated ids, the truth does not; docs/rda.md);
- LDA: epochs whose 98 % interval holds the truth's same-epoch mean, out of those with an
  interval;
- fridge: the largest |log2(estimate / truth)| over its quantiles (the demo's own check);
- the demo's exit code (1 when a bound of the bundled trace fails, which real captures do: the
  bounds are the synthetic trace's).

The captures are not part of the project (../shared/data/captures beside the project root), so
this is not a test; the tables it printed are in BENCHMARKS.md.

Usage: scripts/captures-demo.py WIRELAT_BINARY CAPTURES_DIR [--write FILE.tsv] [--expect FILE.tsv]

--write stores the rows; --expect compares against rows stored before and exits 1 when a
capture has fewer exact RDA epochs, fewer covered LDA epochs, a fridge error more than 10 %
(and 0.001) larger, or is missing. `wirelat` must be a full build (`cargo build --release`:
the demo needs DPDK).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

EXACT = 1e-9
COLUMNS = ("capture", "frames", "rda_exact", "rda_epochs", "rda_repeats", "lda_covered", "lda_intervals",
           "fridge_log2_max", "exit")


def same_epoch_means(truth):
    means = {}
    for d in truth["directions"]:
        for e in d["epochs"]:
            s = e["same_epoch"]
            if s["count"] > 0:
                means[(d["direction"], e["epoch"])] = s["mean_ns"]
    return means


def score(out_dir, summary_path, code):
    with open(os.path.join(out_dir, "pair", "truth.json")) as f:
        truth = json.load(f)
    means = same_epoch_means(truth)
    row = {k: 0 for k in COLUMNS}
    row["frames"] = sum(f["frames"] for f in truth["files"] if f["tap"].startswith("a_"))
    with open(os.path.join(out_dir, "records.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    for r in records:
        if r.get("record") != "segment":
            continue
        key = (r.get("direction"), r.get("epoch"))
        mean = (r.get("mean_ns") or {}).get("value")
        if key not in means or mean is None:
            continue
        t = means[key]
        if r["synopsis"] == "rda":
            row["rda_epochs"] += 1
            if abs(mean - t) <= EXACT * max(abs(t), 1.0):
                row["rda_exact"] += 1
            else:
                dup = (r.get("loss") or {}).get("duplicates") or {}
                if dup.get("sender_ids", 0) or dup.get("receiver_ids", 0) or dup.get("one_sided", 0):
                    row["rda_repeats"] += 1
        elif r["synopsis"] == "lda":
            iv = r["mean_ns"].get("interval")
            if iv:
                row["lda_intervals"] += 1
                row["lda_covered"] += int(iv["low"] <= t <= iv["high"])
    with open(summary_path) as f:
        checks = json.load(f)["checks"]
    log2 = [c["value"] for c in checks if c["name"] == "fridge.fridge_log2_err_max"]
    row["fridge_log2_max"] = log2[0] if log2 else math.nan
    row["exit"] = code
    return row


def fmt(row):
    return "\t".join(str(row[k]) if k != "fridge_log2_max" else f"{row[k]:.6g}" for k in COLUMNS)


def read_rows(path):
    rows = {}
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            v = dict(zip(header, line.rstrip("\n").split("\t")))
            rows[v["capture"]] = v
    return rows


def regressions(row, old):
    found = []
    for exact, total in (("rda_exact", "rda_epochs"), ("lda_covered", "lda_intervals")):
        if int(row[exact]) < int(old[exact]):
            found.append(f"{exact} {row[exact]}/{row[total]} < {old[exact]}/{old[total]}")
    new_err, old_err = float(row["fridge_log2_max"]), float(old["fridge_log2_max"])
    if not new_err <= max(old_err * 1.1, old_err + 0.001):
        found.append(f"fridge_log2_max {new_err:.6g} > {old_err:.6g}")
    return found


def main(argv):
    ap = argparse.ArgumentParser(prog="captures-demo.py", description=__doc__.split("\n")[0])
    ap.add_argument("binary", metavar="WIRELAT_BINARY")
    ap.add_argument("captures", metavar="CAPTURES_DIR")
    ap.add_argument("--write", metavar="FILE.tsv", help="store the rows")
    ap.add_argument("--expect", metavar="FILE.tsv", help="exit 1 on a regression against these rows")
    a = ap.parse_args(argv)
    binary, captures = a.binary, a.captures
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bounds = os.path.join(root, "tests", "data", "demo-bounds.toml")
    pcaps = sorted(p for p in os.listdir(captures) if p.endswith(".pcap"))
    if not pcaps:
        ap.error(f"no .pcap in {captures}")
    expected = read_rows(a.expect) if a.expect else None
    rows, failed = [], []
    print("\t".join(COLUMNS))
    with tempfile.TemporaryDirectory(prefix="captures-demo-") as tmp:
        for p in pcaps:
            name = p[: -len(".pcap")]
            out_dir = os.path.join(tmp, name)
            summary = os.path.join(tmp, name + ".json")
            cmd = [binary, "demo", "--source", os.path.join(captures, p), "--bounds", bounds, "--out", out_dir,
                   "--summary-json", summary]
            with open(os.path.join(tmp, name + ".log"), "w") as log:
                code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
            if not os.path.exists(summary):
                with open(os.path.join(tmp, name + ".log")) as log:
                    tail = log.read()[-2000:]
                print(f"captures-demo: {name}: the demo wrote no summary (exit {code}):\n{tail}", file=sys.stderr)
                failed.append(name)
                continue
            row = score(out_dir, summary, code)
            row["capture"] = name
            rows.append(row)
            print(fmt(row), flush=True)
    if a.write:
        with open(a.write, "w") as f:
            f.write("\t".join(COLUMNS) + "\n")
            for row in rows:
                f.write(fmt(row) + "\n")
    if expected is not None:
        got = {r["capture"]: {k: str(v) for k, v in r.items()} for r in rows}
        for name, old in expected.items():
            if name not in got:
                failed.append(name)
                print(f"captures-demo: {name}: no row (expected one)", file=sys.stderr)
                continue
            for what in regressions(got[name], old):
                failed.append(name)
                print(f"captures-demo: {name}: {what}", file=sys.stderr)
    if failed:
        print(f"captures-demo: {len(set(failed))} capture(s) failed: {' '.join(sorted(set(failed)))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
