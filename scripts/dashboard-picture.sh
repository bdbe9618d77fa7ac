#!/usr/bin/env bash
# Regenerates docs/grafana/dashboard.png, the README's picture of the Grafana dashboard: runs
# tests/prometheus.rs (the real Prometheus scraping `wirelat demo --metrics-linger-s`) with
# WIRELAT_DASHBOARD_DATA set, so it writes every panel's series over the run, then draws them
# (scripts/dashboard-picture.py) and converts the SVG with rsvg-convert (librsvg2-bin,
# installed by scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
WIRELAT_DASHBOARD_DATA="$work/dashboard-data.json" \
    cargo test -p wirelat --test prometheus -- --nocapture
python3 scripts/dashboard-picture.py "$work/dashboard-data.json" "$work/dashboard.svg"
rsvg-convert --width 1200 --format png --output docs/grafana/dashboard.png "$work/dashboard.svg"
echo "wrote docs/grafana/dashboard.png ($(stat -c %s docs/grafana/dashboard.png) bytes)"
