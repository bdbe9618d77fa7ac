#!/usr/bin/env bash
# Runs every test of the project: installs the system packages (scripts/setup.sh), then the
# whole workspace's tests with DPDK (integration tests start the real binary on DPDK virtual
# devices), then checks that the workspace still builds without DPDK.
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

echo "== cargo test --workspace (with DPDK)"
cargo test --workspace

echo "== cargo check --no-default-features (without DPDK)"
cargo check --workspace --exclude dpdk-sys --no-default-features --all-targets
