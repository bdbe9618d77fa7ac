#!/usr/bin/env bash
# Replays point A's pcaps of a generated trace pair with MoonGen (moongen/replay-pair.lua) into
# `wirelat run` over veth pairs, then compares what wirelat measured with `wirelat offline` on
# the same pcaps. Needs root (a network namespace) and a MoonGen built with
# ../shared/tools/moongen/build.sh (set MOONGEN to its MoonGen/ directory).
#
#   MOONGEN=/tmp/w13-moongen/MoonGen scripts/moongen-replay.sh [OUT_DIR]
#
# Topology, all inside the namespace w13mg (nothing reaches another interface):
#
#   MoonGen P0 (w13mg0) ── veth ── (w13wl0) wirelat port 0 ═══ port 1 (w13wl1) ── veth ── (w13mg1) MoonGen P1
#
# P0 sends a_port0.pcap (client → server), P1 a_port1.pcap (server → client), on one clock;
# both capture what wirelat forwards to them. Knobs (environment): RATE (MoonGen's
# --rate-multiplier, default 0.25: the trace at a quarter of its speed, so a response never
# overtakes its request on this loaded 2-CPU machine), DURATION (trace length, 2s), PPS (5000),
# WIRELAT (binary, target/debug/wirelat).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
MOONGEN=${MOONGEN:?set MOONGEN to the MoonGen/ directory built by shared/tools/moongen/build.sh}
WIRELAT=${WIRELAT:-$here/target/debug/wirelat}
RATE=${RATE:-0.25}
DURATION=${DURATION:-2s}
PPS=${PPS:-5000}
OUT=${1:-$(mktemp -d /tmp/w13-moongen-run.XXXXXX)}
NS=w13mg
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

cleanup() {
  [ -n "${WL_PID:-}" ] && kill -INT "$WL_PID" 2>/dev/null && wait "$WL_PID" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT
ip netns del "$NS" 2>/dev/null || true
ip netns add "$NS"
x="ip netns exec $NS"
$x ip link set lo up
$x sysctl -qw net.ipv6.conf.all.disable_ipv6=1
for i in 0 1; do
  $x ip link add "w13mg$i" type veth peer name "w13wl$i"
  for dev in "w13mg$i" "w13wl$i"; do
    # Offloads off: the replayed frames are forwarded by packet sockets as they are (README,
    # "On a real host").
    $x ethtool -K "$dev" tx off rx off tso off gso off gro off >/dev/null
    $x ip link set "$dev" mtu 1500 up
  done
done

"$WIRELAT" gen-trace --out "$OUT/pair" --duration "$DURATION" --rate "$PPS" --seed 7 >"$OUT/gen-trace.log" 2>&1

# The measurement part of both configs (one point, the fridge and LDA), JSON lines into $1.
measurement() {
  cat <<EOF
[point]
id = 1
[segments]
forward = 40
reverse = 41
[epochs]
length_ms = 100
[output]
json = "$1"
[synopses.fridge]
[synopses.lda]
banks = [{ rows = 256, p = 1.0 }]
seed = 9
EOF
}
cat >"$OUT/run.toml" <<EOF
[eal]
args = ["--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--no-telemetry", "--file-prefix=w13wl"]
main_core = 0
[workers]
cores = [1]
idle_after_us = 1000
[stats]
interval_ms = 0
[[port]]
device = "net_af_packet0,iface=w13wl0"
rx_descriptors = 1024
[[port]]
device = "net_af_packet1,iface=w13wl1"
rx_descriptors = 1024
EOF
measurement "$OUT/run/epochs.jsonl" >>"$OUT/run.toml"
measurement "$OUT/offline/epochs.jsonl" >"$OUT/offline.toml"
mkdir -p "$OUT/run" "$OUT/offline"
rm -f "$OUT/run/epochs.jsonl" "$OUT/offline/epochs.jsonl"
"$WIRELAT" offline --config "$OUT/offline.toml" --port0 "$OUT/pair/a_port0.pcap" --port1 "$OUT/pair/a_port1.pcap" \
  >"$OUT/offline/stdout" 2>"$OUT/offline/log"

$x "$WIRELAT" run --config "$OUT/run.toml" >"$OUT/run/stdout" 2>"$OUT/run/log" &
WL_PID=$!
for _ in $(seq 300); do grep -q forwarding "$OUT/run/log" && break; sleep 0.1; done
grep -q forwarding "$OUT/run/log" || { cat "$OUT/run/log" >&2; exit 1; }

cat >"$OUT/dpdk-conf.lua" <<EOF
DPDKConfig {
  cores = {0, 1, 2, 3, 4, 5, 6, 7}, lcoreCpus = "${MOONGEN_CPUS:-0}",
  cli = { "--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--file-prefix", "w13mg",
          "--vdev=net_af_packet0,iface=w13mg0,framecnt=4096",
          "--vdev=net_af_packet1,iface=w13mg1,framecnt=4096" },
}
EOF
T0=$(date +%s.%N)
(cd "$MOONGEN" && $x ./build/MoonGen "$here/moongen/replay-pair.lua" --dpdk-config="$OUT/dpdk-conf.lua" \
  --dev 0 --dev 1 "$OUT/pair/a_port0.pcap" "$OUT/pair/a_port1.pcap" -r "$RATE" --capture "$OUT/cap") \
  >"$OUT/moongen.log" 2>&1
T1=$(date +%s.%N)
kill -INT "$WL_PID"
wait "$WL_PID" || true
WL_PID=

# The frames of a pcap, in order (any timestamp resolution).
frames_py="import struct
def frames(path):
    f=open(path,'rb').read(); o=24; out=[]
    while o+16<=len(f):
        n=struct.unpack_from('<I',f,o+8)[0]; out.append(f[o+16:o+16+n]); o+=16+n
    return out"
# 'sent' pcap, 'got' capture: counts, and whether the frames arrived byte-identical in order.
same() { python3 -c "$frames_py
import sys
a,b=frames(sys.argv[1]),frames(sys.argv[2])
print(f'{len(a)} sent, {len(b)} captured, byte-identical in order: {a==b}')" "$1" "$2"; }
echo "moongen: $(awk -v a="$T0" -v b="$T1" 'BEGIN{printf "%.1f", b-a}') s; $(grep -E 'sent [0-9]+ frames|lateness' "$OUT/moongen.log" | sed 's/\x1b\[[0-9;]*m//g' | tr '\n' ' ')"
echo "port 0 -> 1: $(same "$OUT/pair/a_port0.pcap" "$OUT/cap-port1.pcap")"
echo "port 1 -> 0: $(same "$OUT/pair/a_port1.pcap" "$OUT/cap-port0.pcap")"
grep -E "port counters" "$OUT/run/log" | tail -2 | sed 's/^.*INFO //'
# The fridge's requests, responses and samples per kind, summed over epochs: run vs offline.
fridge() { python3 -c "import sys,json
t={}
for l in open(sys.argv[1]):
    v=json.loads(l)
    if v.get('kind')!='fridge': continue
    for k in v['summary']['report']['kinds']:
        c=k['diagnostics']['counters']
        a=t.setdefault(k['kind'],[0,0,0])
        for i,n in enumerate(['requests','responses','samples']): a[i]+=c[n]
print(' '.join(f'{k}: requests {v[0]} responses {v[1]} samples {v[2]};' for k,v in sorted(t.items())))" "$1"; }
echo "fridge run:     $(fridge "$OUT/run/epochs.jsonl")"
echo "fridge offline: $(fridge "$OUT/offline/epochs.jsonl")"
echo "outputs in $OUT"
