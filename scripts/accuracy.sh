#!/usr/bin/env bash
# The end-to-end accuracy table of BENCHMARKS.md: `wirelat demo` (point A, point B and the peer
# on DPDK's pcap device, the real network protocol) over three delay models × three loss rates,
# each cell a larger synthetic trace than the CI demo. Prints one markdown table row per
# (cell, synopsis) and keeps every run's files in out/accuracy/<cell>/.
#
#   scripts/accuracy.sh [DURATION] [RATE_PPS]      (defaults: 10s 40000)
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10s}
rate=${2:-40000}
cargo build --release --quiet
bin=./target/release/wirelat
mkdir -p out/accuracy
delays=("constant:50us" "weibull:shape=0.6,mean=50us" "pareto:shape=2.5,mean=50us")
losses=("none" "uniform:0.01" "bursty:rate=0.05,burst=20")
for d in "${delays[@]}"; do
  for l in "${losses[@]}"; do
    cell="$(echo "${d%%:*}-${l%%:*}-${l#*:}" | tr -c 'a-zA-Z0-9.\n-' '_')"
    echo "== delay $d, loss $l -> out/accuracy/$cell" >&2
    "$bin" demo --out "out/accuracy/$cell" --duration "$duration" --rate "$rate" \
      --delay "$d" --loss "$l" --summary-json "out/accuracy/$cell/summary.json" \
      >"out/accuracy/$cell.txt" 2>&1 || echo "   (exit $?: see out/accuracy/$cell.txt)" >&2
  done
done
python3 - "$duration" "$rate" <<'PY'
import json, os, sys, glob
print(f"| delay | loss | synopsis | direction | mean est / true (µs) | mean err (run) | epoch mean err p50 / max | sd err p50 | loss est / true | flows: err p50 / p90 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for path in sorted(glob.glob("out/accuracy/*/summary.json")):
    cell = os.path.basename(os.path.dirname(path))
    s = json.load(open(path))["summary"]
    cfg = json.load(open(os.path.join(os.path.dirname(path), "pair", "truth.json")))["config"]
    seg = cfg["segments"][0]
    delay, loss = json.dumps(seg.get("delay")), json.dumps(seg.get("loss"))
    pct = lambda x: "-" if x is None else f"{100*x:.2f} %"
    us = lambda x: "-" if x is None else f"{x/1e3:.2f}"
    for r in s["segments"]:
        print(f"| {cell.split('-')[0]} | {'-'.join(cell.split('-')[1:])} | {r['synopsis']} | {r['direction']} | {us(r['est_mean_ns'])} / {us(r['true_mean_ns'])} | {pct(r['mean_rel_err'])} | {pct(r['epoch_mean_rel_err_median'])} / {pct(r['epoch_mean_rel_err_max'])} | {pct(r['epoch_sd_rel_err_median'])} | {pct(r['est_loss'])} / {pct(r['true_loss'])} | |")
    for r in s["flows"]:
        print(f"| {cell.split('-')[0]} | {'-'.join(cell.split('-')[1:])} | {r['synopsis']} | {r['direction']} | | | | | | {r['flows']} flows: {pct(r['mean_rel_err_median'])} / {pct(r['mean_rel_err_p90'])} |")
    for r in s["fridge"]:
        worst = max((q[3] for q in r["quantiles"]), default=None)
        qs = ", ".join(f"p{round(q[0]*100)} {q[1]/1e3:.1f}/{q[2]/1e3:.1f}" for q in r["quantiles"])
        print(f"| {cell.split('-')[0]} | {'-'.join(cell.split('-')[1:])} | fridge {r['point']} | {r['kind']} | {qs} | max log2 err {worst:.3f} | | | | |" if worst is not None else "")
PY
