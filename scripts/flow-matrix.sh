#!/usr/bin/env bash
# The LDS flow scenario matrix (trace/tests/flow_matrix.rs) with every combination of delay
# model (3), loss (5) and flows per epoch (500, 2 000, 20 000), five 100-ms epochs each.
# Prints the table BENCHMARKS.md ("W12 · LDS coverage sizing") quotes; fails like the CI test
# if a cell misses its coverage or error bound. `--old` sizes the sketches the old way
# (k = 1, width = flows per epoch, the paper's selection) to show what the sizing fixes.
set -euo pipefail
cd "$(dirname "$0")/.."
old=0
[[ "${1:-}" == "--old" ]] && old=1
WIRELAT_FLOW_MATRIX=full WIRELAT_FLOW_MATRIX_OLD="$old" \
    cargo test --release -p wirelat-trace --test flow_matrix -- --nocapture 2>&1 \
    | grep -E '^\||test result|failures|: '
