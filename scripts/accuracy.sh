#!/usr/bin/env bash
# The end-to-end accuracy table of BENCHMARKS.md: `wirelat demo` (point A, point B and the peer
# on DPDK's pcap device, the real network protocol) over three delay models × three loss rates,
# each cell a larger synthetic trace than the CI demo. Prints one markdown table row per
# (cell, synopsis) and keeps every run's files in out/accuracy/<cell>/.
#
#   scripts/accuracy.sh [DURATION] [RATE_PPS]      (defaults: 5s 40000)
#   scripts/accuracy.sh --table                     (only print the table of the last runs)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" != "--table" ]]; then
duration=${1:-5s}
rate=${2:-40000}
cargo build --release --quiet
bin=./target/release/wirelat
mkdir -p out/accuracy
: >out/accuracy/cells.txt
delays=("constant:50us" "weibull:shape=0.6,mean=50us" "pareto:shape=2.5,mean=50us")
losses=("none" "uniform:0.01" "bursty:rate=0.05,burst=20")
for d in "${delays[@]}"; do
  for l in "${losses[@]}"; do
    cell="$(echo "${d%%:*}-${l%%:*}-${l#*:}" | tr -c 'a-zA-Z0-9.\n-' '_')"
    echo "== delay $d, loss $l -> out/accuracy/$cell" >&2
    echo "$cell|$d|$l" >>out/accuracy/cells.txt
    "$bin" demo --out "out/accuracy/$cell" --duration "$duration" --rate "$rate" \
      --delay "$d" --loss "$l" --summary-json "out/accuracy/$cell/summary.json" \
      >"out/accuracy/$cell.txt" 2>&1 || echo "   (exit $?: see out/accuracy/$cell.txt)" >&2
  done
done
fi
# One row per cell and synopsis, forward direction (the reverse one is in each summary.json);
# errors are |estimate − truth| / truth, "ep." columns per 100-ms epoch.
python3 - <<'PY'
import json, os
pct = lambda x: "–" if x is None else f"{100*x:.2f} %"
us = lambda x: "–" if x is None else f"{x/1e3:.1f}"
print("| delay | loss | synopsis | mean est / true µs | run err | ep. err p50 / max | sd est / true µs | ep. sd err p50 | loss est / true | flows | flow err p50 / p90 | fridge max log2 err |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for line in open("out/accuracy/cells.txt"):
    cell, delay, loss = line.strip().split("|")
    path = f"out/accuracy/{cell}/summary.json"
    if not os.path.exists(path):
        print(f"| {delay} | {loss} | (run failed: out/accuracy/{cell}.txt) |" + " |" * 9)
        continue
    s = json.load(open(path))["summary"]
    for r in s["segments"]:
        if r["direction"] != "forward": continue
        print(f"| {delay} | {loss} | {r['synopsis']} | {us(r['est_mean_ns'])} / {us(r['true_mean_ns'])} | {pct(r['mean_rel_err'])} | "
              f"{pct(r['epoch_mean_rel_err_median'])} / {pct(r['epoch_mean_rel_err_max'])} | {us(r['est_sd_ns'])} / {us(r['true_sd_ns'])} | "
              f"{pct(r['epoch_sd_rel_err_median'])} | {pct(r['est_loss'])} / {pct(r['true_loss'])} | | | |")
    for r in s["flows"]:
        if r["direction"] != "forward": continue
        print(f"| {delay} | {loss} | {r['synopsis']} flows | | | | | | | {r['flows']} ({r['no_estimate']} no est.) | "
              f"{pct(r['mean_rel_err_median'])} / {pct(r['mean_rel_err_p90'])} | |")
    worst = [max(q[3] for q in r["quantiles"]) for r in s["fridge"] if r["quantiles"]]
    print(f"| {delay} | {loss} | fridge (A, B × handshake, DNS) | | | | | | | | | {max(worst):.3f} |" if worst else f"| {delay} | {loss} | fridge | no estimate |" + " |" * 9)
PY
