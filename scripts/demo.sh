#!/usr/bin/env bash
# The main job: the appliance in trace mode on the bundled pcap, measuring with all five
# synopses. data/sample.pcap goes in on port 0 (DPDK's pcap virtual device) and comes out of
# port 1 into out/port1.pcap; every epoch's synopses are written as JSON lines to
# out/epochs.jsonl (encoded bodies in out/dump/); the counters are logged and printed, and the
# run stops by itself once the pcap is exhausted. The same measurement is then run offline
# (no DPDK) for comparison.
#
#   scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cargo build --release
mkdir -p out
rm -rf out/dump out/colate
./target/release/wirelat run --config configs/measure-trace.toml
echo "demo: the frames of data/sample.pcap were forwarded to out/port1.pcap;"
echo "demo: $(wc -l <out/epochs.jsonl) epoch records in out/epochs.jsonl, e.g.:"
head -c 600 out/epochs.jsonl
echo
