#!/usr/bin/env bash
# Ping RTT through `wirelat run` on two net_af_packet ports (client ns ⇄ veth ⇄ wirelat ⇄ veth ⇄
# server ns), busy polling vs idle mode ([workers] idle_after_us = 1000, idle_sleep_us = 100),
# alternating, 30 pings at 0.2 s each. Root; needs ip, ethtool, ping (scripts/setup.sh).
# Shows what a busy-polling worker on a shared core costs its neighbours, and what idle mode
# adds to the first frame after a quiet spell. Not part of the tests.
#
#   scripts/bench-kernel-rtt.sh      # env: RTT_ROUNDS=2
set -u
cd "$(dirname "$0")/.."
BIN=${WIRELAT_BIN:-./target/debug/wirelat}
tmp=$(mktemp -d)
cleanup() {
    ip netns del wlrc 2>/dev/null; ip netns del wlrs 2>/dev/null
    ip link del wlrc1 2>/dev/null; ip link del wlrs1 2>/dev/null; rm -rf "$tmp"
}
cleanup; tmp=$(mktemp -d); trap cleanup EXIT
ip netns add wlrc; ip netns add wlrs
ip link add wlrc0 netns wlrc type veth peer name wlrc1
ip link add wlrs0 netns wlrs type veth peer name wlrs1
for spec in wlrc:wlrc0:10.213.1.1 wlrs:wlrs0:10.213.1.2; do
    IFS=: read -r ns dev addr <<<"$spec"
    ip netns exec "$ns" ethtool -K "$dev" tx off rx off tso off gso off gro off >/dev/null
    ip netns exec "$ns" ip link set "$dev" up
    ip netns exec "$ns" ip addr add "$addr/24" dev "$dev"
done
for dev in wlrc1 wlrs1; do
    ethtool -K "$dev" tx off rx off tso off gso off gro off >/dev/null
    ip link set "$dev" up
done
for _ in $(seq "${RTT_ROUNDS:-2}"); do
    for mode in busy idle; do
        extra=""
        [[ $mode == idle ]] && extra=$'idle_after_us = 1000\nidle_sleep_us = 100'
        cat >"$tmp/$mode.toml" <<TOML
[eal]
args = ["--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--file-prefix=wlrtt", "--no-telemetry", "--log-level=warning"]
main_core = 0
[workers]
cores = [1]
$extra
[stats]
interval_ms = 0
[[port]]
device = "net_af_packet0,iface=wlrc1"
mtu = 1500
[[port]]
device = "net_af_packet1,iface=wlrs1"
mtu = 1500
TOML
        "$BIN" run --config "$tmp/$mode.toml" >/dev/null 2>"$tmp/$mode.log" &
        pid=$!
        sleep 2
        rtt=$(ip netns exec wlrc ping -q -c 30 -i 0.2 10.213.1.2 | tail -1)
        kill -TERM "$pid"; wait "$pid"
        echo "$mode: $rtt (load $(cut -d' ' -f1-3 /proc/loadavg))"
    done
done
