#!/usr/bin/env bash
# Runs every test of the project: installs the system packages (scripts/setup.sh), checks the
# formatting (cargo fmt --check) and the lints (clippy, every warning an error, with and without
# DPDK), then runs the whole workspace's tests with DPDK (integration tests start the real binary
# on DPDK virtual devices).
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy -D warnings (with DPDK)"
cargo clippy --workspace --all-targets -- -D warnings

echo "== cargo test --workspace (with DPDK)"
cargo test --workspace

echo "== cargo clippy --no-default-features -D warnings (without DPDK: it still builds)"
cargo clippy --workspace --exclude dpdk-sys --no-default-features --all-targets -- -D warnings
