#!/usr/bin/env bash
# Measurement benchmark: Mpps of one worker core with all five synopses enabled, against the
# same wirelat only forwarding and against dpdk-testpmd io-forward, on 64-byte and on
# mixed-size traffic; plus each synopsis alone (the per-synopsis cost).
#
#   scripts/bench-measure.sh   # env: BENCH_SECONDS=8 BENCH_ROUNDS=3 BENCH_MAIN_CORE=0 BENCH_WORKER_CORE=1
#                              #      BENCH_TRAFFIC="64 mixed" BENCH_SINGLE=1 (0: skip the per-synopsis runs)
#                              #      BENCH_HUGE=0 (1: EAL memory on 2-MiB hugepages, as in production)
#                              #      BENCH_BIN=target/release/wirelat (another build's binary, for before/after)
#
# Devices, identical for the three programs: port 0 = DPDK's pcap device replaying a generated
# pcap from memory endlessly (`infinite_rx=1`: real, parseable frames; its tx drops), port 1 =
# net_null with `no-rx=1` (discards what it is sent, receives nothing, never fills a disk). So
# one direction is forwarded: port 0 -> port 1. Rate = frames sent per second, the median of the
# 1-second samples after a 2-second warm-up, medians over rounds; programs run alternately.
# The pcaps come from `cargo run --release --example bench_pcap` (see examples/bench_pcap.rs).
# The clock is the TSC (the trace clock would follow the looping pcap's timestamps); epochs of
# 100 ms, overrun policy skip. RDA's cache holds 2^21 packets, an epoch's at up to 20 Mpps: a
# packet past the capacity is only counted (`cache_full`), so a cache smaller than an epoch
# would leave RDA's work on most packets unmeasured (until 2026-11-29 the bench ran 1-s epochs
# with 2^20, and RDA skipped about 88 % of the packets at 64 B). Every run that has RDA checks
# its epochs and warns if any packet was left out for a full cache. Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_RUN=${BENCH_SECONDS:-8}
ROUNDS=${BENCH_ROUNDS:-3}
MAIN_CORE=${BENCH_MAIN_CORE:-0}
WORKER_CORE=${BENCH_WORKER_CORE:-1}
TRAFFIC=${BENCH_TRAFFIC:-"64 mixed"}
SINGLE=${BENCH_SINGLE:-1}
WARMUP=2
# The pcap device with infinite_rx copies the whole pcap into mbufs of the rx queue's pool at
# start: the pool must hold every frame plus the rings (set per pcap below).
MBUFS=65535

command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd missing: run scripts/setup.sh" >&2; exit 1; }
cargo build --release --quiet
WIRELAT_BIN=${BENCH_BIN:-./target/release/wirelat}
cargo build --release --quiet --example bench_pcap
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[[ -n "${BENCH_KEEP:-}" ]] && trap - EXIT && echo "logs in $tmp"

EAL_COMMON=(--no-huge -m 1024 --no-pci --no-shconf --no-telemetry --log-level=warning)

# BENCH_HUGE=1: the three programs' EAL memory (the mempool, and with it the pcap device's stored
# frames and every mbuf) on 2-MiB hugepages instead of --no-huge's 4-KiB pages, as DPDK runs in
# production. Needs root: reserves the pages (and mounts hugetlbfs if none is mounted) for the
# run and gives them back at exit.
if [[ "${BENCH_HUGE:-0}" == 1 ]]; then
    pages_before=$(cat /proc/sys/vm/nr_hugepages)
    mounted_here=""
    restore_huge() {
        echo "$pages_before" 2>/dev/null >/proc/sys/vm/nr_hugepages || true
        if [[ -n "$mounted_here" ]]; then umount "$mounted_here" || true; fi
    }
    trap 'restore_huge; rm -rf "$tmp"' EXIT
    [[ -n "${BENCH_KEEP:-}" ]] && trap restore_huge EXIT
    if ! grep -q hugetlbfs /proc/mounts; then
        mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages && mounted_here=/dev/hugepages
    fi
    ((pages_before >= 700)) || echo 700 2>/dev/null >/proc/sys/vm/nr_hugepages ||
        { echo "BENCH_HUGE=1: cannot reserve hugepages (root?)" >&2; exit 1; }
    free_pages=$(awk '/HugePages_Free/ { print $2 }' /proc/meminfo)
    ((free_pages >= 600)) || { echo "BENCH_HUGE=1: only ${free_pages} free 2-MiB pages (need 600)" >&2; exit 1; }
    EAL_COMMON=(-m 1200 --huge-unlink --no-pci --no-shconf --no-telemetry --log-level=warning)
fi

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
median() { { grep -v nan || true; } | sort -g | awk '{ v[n++] = $1 } END { if (n == 0) { print "nan"; exit } printf "%.3f\n", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'; }

run_testpmd() { # $1 = pcap
    timeout -s INT "$((SECONDS_RUN + 1))" dpdk-testpmd -l "${MAIN_CORE},${WORKER_CORE}" --main-lcore "${MAIN_CORE}" \
        "${EAL_COMMON[@]}" --file-prefix=bench-testpmd --vdev="net_pcap0,rx_pcap=$1,infinite_rx=1" \
        --vdev=net_null0,no-rx=1 -- \
        --forward-mode=io --nb-cores=1 --total-num-mbufs="${MBUFS}" --rxd=1024 --txd=1024 --burst=32 \
        --stats-period=1 >"$tmp/testpmd.log" 2>&1 || true
    { grep -o 'Tx-pps: *[0-9]*' "$tmp/testpmd.log" || true; } | awk '{print $2}' | rates_of_pairs
}

# Synopsis tables at the sizes of configs/measure-trace.toml, except RDA's cache (2^21 instead of
# 2^20: measure-trace.toml's 100-ms epochs carry 10 Mpps, a worker here up to 20).
synopsis_table() {
    case $1 in
    fridge) printf '[synopses.fridge]\nseed = 1\nkinds = [{ kind = "tcp_handshake", fridges = [{ slots = 65536, entry_probability = 1.0 }] }, { kind = "dns", fridges = [{ slots = 16384, entry_probability = 1.0 }] }]\n' ;;
    lda) printf '[synopses.lda]\nbanks = [{ rows = 512, p = 0.01 }, { rows = 512, p = 0.0005 }]\nseed = 7\n' ;;
    lds) printf '[synopses.lds]\nrows = 4\nwidth = 17500\nseed = 7\nflow_capacity = 262144\n' ;;
    rda) printf '[synopses.rda]\nbinding = { mode = "online", buckets_per_bank = 4096 }\ncache_capacity = 2097152\nseed = 7\n' ;;
    colate) printf '[synopses.colate]\ncounters = 1000003\ncells_per_flow = 20\ncounter_bits = 40\nepoch_threshold_ticks = 1000000000000000\ntick_ns = 1000\nseed = 7\n' ;;
    esac
}

write_config() { # $1 = pcap, $2 = synopses ("" = forward only)
    {
        cat <<TOML
[eal]
args = [$(printf '"%s", ' "${EAL_COMMON[@]}")"--file-prefix=bench-wirelat"]
main_core = ${MAIN_CORE}
[workers]
cores = [${WORKER_CORE}]
burst_size = 32
[mempool]
mbufs = ${MBUFS}
[stats]
interval_ms = 1000
[stop]
after_ms = $((SECONDS_RUN * 1000 + 500))
[epochs]
length_ms = 100
overrun = "skip"
[clock]
source = "tsc"
[output]
json = "$tmp/epochs.jsonl"
[[port]]
device = "net_pcap0,rx_pcap=$1,infinite_rx=1"
[[port]]
device = "net_null0,no-rx=1"
TOML
        for s in $2; do synopsis_table "$s"; done
    } >"$tmp/bench.toml"
}

# Warns (stderr) when a run with RDA left packets out because its cache was full: its rate
# then does not include RDA's work on them.
check_rda_capacity() { # $1 = synopses
    [[ " $1 " == *" rda "* ]] || return 0
    local full
    full=$({ grep -o '"cache_full":[0-9]*' "$tmp/epochs.jsonl" 2>/dev/null || true; } | cut -d: -f2 |
        awk '{ s += $1 } END { printf "%.0f", s }')
    if [[ "$full" != 0 ]]; then
        echo "WARNING: RDA's cache was full for $full packets: its cost on them is not measured" >&2
    fi
}

run_wirelat() { # $1 = pcap, $2 = synopses
    write_config "$1" "$2"
    rm -f "$tmp/epochs.jsonl"
    RUST_LOG=info "$WIRELAT_BIN" run --config "$tmp/bench.toml" >"$tmp/wirelat.out" 2>"$tmp/wirelat.log" || true
    check_rda_capacity "$2"
    { grep 'label="interval"' "$tmp/wirelat.log" || true; } | { grep 'port counters' || true; } |
        { grep -o 'tx_pps=[0-9]*' || true; } | cut -d= -f2 | rates_of_pairs
}

ALL="fridge lda lds rda colate"
for traffic in $TRAFFIC; do
    pcap="$tmp/bench-$traffic.pcap"
    made=$(./target/release/examples/bench_pcap "$traffic" "$pcap")
    echo "$made"
    frames=$(awk '{ print $2 }' <<<"$made")
    MBUFS=$((frames + 16384))
    programs=("testpmd" "forward" "all")
    if [[ "$SINGLE" == 1 ]]; then programs+=($ALL); fi
    for p in "${programs[@]}"; do : >"$tmp/$p.rounds"; done
    for round in $(seq 1 "$ROUNDS"); do
        for p in "${programs[@]}"; do
            case $p in
            testpmd) r=$(run_testpmd "$pcap") ;;
            forward) r=$(run_wirelat "$pcap" "") ;;
            all) r=$(run_wirelat "$pcap" "$ALL") ;;
            *) r=$(run_wirelat "$pcap" "$p") ;;
            esac
            echo "$r" >>"$tmp/$p.rounds"
            echo "traffic ${traffic}, round ${round}: ${p} ${r% *} Mpps (best second ${r#* })"
        done
    done
    t=$(cut -d' ' -f1 "$tmp/testpmd.rounds" | median)
    echo "== traffic ${traffic}: medians of ${ROUNDS} rounds (Mpps, one worker core; ratio to testpmd)"
    for p in "${programs[@]}"; do
        m=$(cut -d' ' -f1 "$tmp/$p.rounds" | median)
        b=$(cut -d' ' -f2 "$tmp/$p.rounds" | median)
        ratio=$(awk -v a="$m" -v b="$t" 'BEGIN { printf "%.3f", a / b }')
        ns=$(awk -v a="$m" 'BEGIN { if (a > 0) printf "%.1f", 1000 / a; else print "nan" }')
        printf '%-8s %8s Mpps (best second %8s)  %6s ns/packet  ratio %s\n' "$p" "$m" "$b" "$ns" "$ratio"
    done
done
