#!/usr/bin/env bash
# The main job: the forwarder in trace mode on the bundled pcap. data/sample.pcap goes in on
# port 0 (DPDK's pcap virtual device) and comes out of port 1 into out/port1.pcap; the
# counters are logged and printed, and the run stops by itself once the pcap is exhausted.
#
#   scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cargo build --release
mkdir -p out
./target/release/wirelat run --config configs/trace.toml
echo "demo: the frames of data/sample.pcap were forwarded to out/port1.pcap"
