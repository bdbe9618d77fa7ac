#!/usr/bin/env bash
# The segment-estimate scenario matrix (trace/tests/segment_matrix/) at a larger traffic
# rate: SCALE × 10 kpps per cell (default 5). Prints the table BENCHMARKS.md ("W11") quotes;
# fails like the CI test if any epoch leaves its bounds. The test profile CI builds, not
# --release (thin LTO, one codegen unit: far longer to build on a shared machine): the errors
# do not depend on optimisation.
set -euo pipefail
cd "$(dirname "$0")/.."
WIRELAT_MATRIX_SCALE="${1:-5}" cargo test -p wirelat-trace --test segment_matrix -- --nocapture 2>&1 \
    | grep -E '^\||test result|failures|: epoch'
