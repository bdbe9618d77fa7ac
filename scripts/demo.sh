#!/usr/bin/env bash
# The main job: `wirelat demo`. It generates a trace pair (what points A and B of a two-point
# deployment see, and the ground truth), runs the peer (`wirelat collect`) and both appliances
# (`wirelat run`, DPDK's pcap virtual device, all five synopses, shipping their epochs over the
# authenticated protocol), and prints every synopsis's estimate next to the truth, with the
# fridge's delay CDFs as text and as out/demo/fridge-cdf.svg. Extra arguments go to
# `wirelat demo` (see `wirelat demo --help`).
#
#   scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cargo build --release
./target/release/wirelat demo "$@"
