#!/usr/bin/env bash
# Forwarding benchmark: wirelat (forward-only) vs dpdk-testpmd --forward-mode=io on the same
# virtual devices (net_null0 <-> net_null1, 64-byte frames), the same single worker core, the
# same burst size, ring sizes and mbuf count. Prints both rates (Mpps, both directions summed,
# median of the 1-second samples after a 2-second warm-up) and their ratio.
#
#   scripts/bench-forward.sh    # env: BENCH_SECONDS=10 BENCH_ROUNDS=3 BENCH_MAIN_CORE=0 BENCH_WORKER_CORE=1
#
# The two programs run alternately BENCH_ROUNDS times each (so that load from other processes
# hits both alike); each round's rate is the median of its 1-second samples after a 2-second
# warm-up (and its best second), and the reported rates are the medians over rounds. On a
# machine shared with other work, "best second" approximates the rate without interference.
#
# Not part of the tests. net_null never touches frame data and never fills a disk (unlike
# net_null -> tx_pcap), so this measures the framework cost per frame: rx burst, hook, tx burst.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_RUN=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
MAIN_CORE=${BENCH_MAIN_CORE:-0}
WORKER_CORE=${BENCH_WORKER_CORE:-1}
WARMUP=2

command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd missing: run scripts/setup.sh" >&2; exit 1; }
cargo build --release --quiet
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[[ -n "${BENCH_KEEP:-}" ]] && trap - EXIT && echo "logs in $tmp"

EAL_COMMON=(--no-huge -m 1024 --no-pci --no-shconf --no-telemetry --log-level=warning)

# "median best" of the per-period sums of consecutive value pairs (port 0 + port 1), after
# warm-up, in Mpps.
rates_of_pairs() {
    awk -v warm="$WARMUP" '{ v[n++] = $1 } END {
        m = 0
        for (i = 0; i + 1 < n; i += 2) { p = i / 2; if (p >= warm) s[m++] = v[i] + v[i + 1] }
        if (m == 0) { print "nan nan"; exit }
        for (i = 0; i < m; i++) for (j = i + 1; j < m; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
        printf "%.3f %.3f\n", (m % 2 ? s[(m - 1) / 2] : (s[m / 2 - 1] + s[m / 2]) / 2) / 1e6, s[m - 1] / 1e6
    }'
}

run_testpmd() {
    timeout -s INT "$((SECONDS_RUN + 1))" dpdk-testpmd -l "${MAIN_CORE},${WORKER_CORE}" --main-lcore "${MAIN_CORE}" \
        "${EAL_COMMON[@]}" --file-prefix=bench-testpmd --vdev=net_null0 --vdev=net_null1 -- \
        --forward-mode=io --nb-cores=1 --total-num-mbufs=16383 --rxd=1024 --txd=1024 --burst=32 \
        --stats-period=1 >"$tmp/testpmd.log" 2>&1 || true
    grep -o 'Tx-pps: *[0-9]*' "$tmp/testpmd.log" | awk '{print $2}' | rates_of_pairs
}

cat >"$tmp/bench.toml" <<TOML
[eal]
args = [$(printf '"%s", ' "${EAL_COMMON[@]}")"--file-prefix=bench-wirelat"]
main_core = ${MAIN_CORE}
[workers]
cores = [${WORKER_CORE}]
burst_size = 32
[mempool]
mbufs = 16383
[stats]
interval_ms = 1000
[stop]
after_ms = $((SECONDS_RUN * 1000 + 500))
[[port]]
device = "net_null0"
[[port]]
device = "net_null1"
TOML

run_wirelat() {
    RUST_LOG=info ./target/release/wirelat run --config "$tmp/bench.toml" >"$tmp/wirelat.out" 2>"$tmp/wirelat.log"
    grep 'label="interval"' "$tmp/wirelat.log" | grep -o 'tx_pps=[0-9]*' | cut -d= -f2 | rates_of_pairs
}

median() { { grep -v nan || true; } | sort -g | awk '{ v[n++] = $1 } END { printf "%.3f\n", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'; }

: >"$tmp/testpmd.rounds"
: >"$tmp/wirelat.rounds"
for round in $(seq 1 "$ROUNDS"); do
    read -r t t_best < <(run_testpmd)
    read -r w w_best < <(run_wirelat)
    echo "round ${round}: testpmd ${t} Mpps (best second ${t_best}), wirelat ${w} Mpps (best second ${w_best})"
    echo "$t $t_best" >>"$tmp/testpmd.rounds"
    echo "$w $w_best" >>"$tmp/wirelat.rounds"
done
testpmd_mpps=$(cut -d' ' -f1 "$tmp/testpmd.rounds" | median)
wirelat_mpps=$(cut -d' ' -f1 "$tmp/wirelat.rounds" | median)
testpmd_best=$(cut -d' ' -f2 "$tmp/testpmd.rounds" | median)
wirelat_best=$(cut -d' ' -f2 "$tmp/wirelat.rounds" | median)

ratio=$(awk -v a="$wirelat_mpps" -v b="$testpmd_mpps" 'BEGIN { printf "%.3f", a / b }')
ratio_best=$(awk -v a="$wirelat_best" -v b="$testpmd_best" 'BEGIN { printf "%.3f", a / b }')
echo "testpmd io-forward: ${testpmd_mpps} Mpps median second, ${testpmd_best} Mpps best second (medians of ${ROUNDS} rounds)"
echo "wirelat forward:    ${wirelat_mpps} Mpps median second, ${wirelat_best} Mpps best second (medians of ${ROUNDS} rounds)"
echo "ratio wirelat/testpmd: ${ratio} (median seconds), ${ratio_best} (best seconds)"
