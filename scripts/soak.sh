#!/usr/bin/env bash
# Soak (W14): a collector and two simulated points (`wirelat sim-point`, the dataplane's
# synopses over seeded traffic shipped through the real NetworkSink) on 127.0.0.1 for a given
# number of epochs at a given pace; the RSS of all three is sampled every SAMPLE_S seconds
# into rss.csv, and at the end every epoch must be accounted for: both points exit 0 (a point
# that gave up any epoch exits 1, W14), nothing is left queued, and the collector wrote records.
# With KILL_EVERY_S > 0 the collector is killed (SIGKILL) and restarted on the same port that
# often: the points' spill directories and resends must still lose nothing.
#
#   scripts/soak.sh [OUT_DIR]
#   EPOCHS=90000 PACE_MS=20 SAMPLE_S=60 KILL_EVERY_S=0 scripts/soak.sh   # 30 min
#   EPOCHS=90000 PACE_MS=20 SAMPLE_S=60 KILL_EVERY_S=300 scripts/soak.sh # 30 min, kills
#
# sim-point streams (W14): it draws and harvests one epoch at a time, so the points' RSS is
# flat too, whatever EPOCHS is.
#
# SYNOPSES_FILE (optional) replaces the [synopses.*] tables below (the same file for points and
# collector; scripts/soak-medium.toml turns all five on); COLLECTOR_EXTRA is appended to the
# collector's file ([report], [colate], ...); SHIP_EXTRA to the points' [ship] tables (e.g.
# `window_bytes = ...`); DNS_PER_EPOCH feeds the fridge.
set -euo pipefail

EPOCHS=${EPOCHS:-500}
PACE_MS=${PACE_MS:-20}
SAMPLE_S=${SAMPLE_S:-10}
KILL_EVERY_S=${KILL_EVERY_S:-0}
WIRELAT=${WIRELAT:-$(dirname "$0")/../target/debug/wirelat}
OUT=${1:-$(mktemp -d /tmp/w14-soak.XXXXXX)}
mkdir -p "$OUT"
echo "soak: epochs=$EPOCHS pace_ms=$PACE_MS sample_s=$SAMPLE_S kill_every_s=$KILL_EVERY_S out=$OUT"

KEY="$OUT/peer.key"
echo 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff >"$KEY"
chmod 600 "$KEY"
SYNOPSES='
[synopses.lda]
banks = [{ rows = 256, p = 0.75 }, { rows = 256, p = 0.25 }]
seed = 7
[synopses.rda]
banks = 2
binding = { mode = "online", buckets_per_bank = 512 }
cache_capacity = 4096
'
if [ -n "${SYNOPSES_FILE:-}" ]; then SYNOPSES=$(cat "$SYNOPSES_FILE"); fi
COLLECTOR_EXTRA=${COLLECTOR_EXTRA:-}
SHIP_EXTRA=${SHIP_EXTRA:-}
DNS_PER_EPOCH=${DNS_PER_EPOCH:-0}

collector_config() { # $1 = listen address
    cat >"$OUT/collector.toml" <<EOF
[collector]
listen = "$1"
key_file = "$KEY"
records = "$OUT/records.jsonl"
[[point]]
id = 1
name = "a"
[[point]]
id = 2
name = "b"
[[segment]]
id = 10
upstream = 1
downstream = 2
[[segment]]
id = 11
upstream = 2
downstream = 1
$COLLECTOR_EXTRA
$SYNOPSES
EOF
}

PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

start_collector() { # $1 = listen address; sets COLLECTOR and ADDR
    collector_config "$1"
    "$WIRELAT" collect --config "$OUT/collector.toml" 2>>"$OUT/collector.log" &
    COLLECTOR=$!
    PIDS+=("$COLLECTOR")
    for _ in $(seq 100); do
        ADDR=$(grep -o 'listening on [0-9.:]*' "$OUT/collector.log" | tail -1 | cut -d' ' -f3 || true)
        [ -n "$ADDR" ] && [ "$(grep -c 'listening on' "$OUT/collector.log")" -ge "$STARTS" ] && return
        sleep 0.1
    done
    echo "soak: the collector did not start" >&2
    exit 1
}

STARTS=1
start_collector 127.0.0.1:0
echo "soak: collector $COLLECTOR on $ADDR"

for role in a b; do
    id=1 other=2
    [ "$role" = b ] && id=2 other=1
    cat >"$OUT/point-$role.toml" <<EOF
other_point = $other
[point]
id = $id
role = "$role"
[segments]
forward = 10
reverse = 11
[ship]
peer = "$ADDR"
key_file = "$KEY"
backoff_initial_ms = 20
backoff_max_ms = 500
close_timeout_ms = 60000
spill_dir = "$OUT/spill-$role"
$SHIP_EXTRA
[sim]
seed = 5
epochs = $EPOCHS
epoch_len_ns = 20000000
first_epoch = 1000
packets_per_epoch = 500
flows = 40
mean_delay_ns = 40000.0
loss = 0.01
blackout_epochs = []
dns_per_epoch = $DNS_PER_EPOCH
$SYNOPSES
EOF
done
"$WIRELAT" sim-point --config "$OUT/point-a.toml" --pace-ms "$PACE_MS" >"$OUT/a.json" 2>"$OUT/a.log" &
A=$!
"$WIRELAT" sim-point --config "$OUT/point-b.toml" --pace-ms "$PACE_MS" >"$OUT/b.json" 2>"$OUT/b.log" &
B=$!
PIDS+=("$A" "$B")

rss() { ps -o rss= -p "$1" 2>/dev/null | tr -d ' ' || echo 0; }
echo "elapsed_s,collector_kib,point_a_kib,point_b_kib,records,load1" >"$OUT/rss.csv"
START=$(date +%s)
LAST_KILL=$START
while kill -0 "$A" 2>/dev/null || kill -0 "$B" 2>/dev/null; do
    sleep "$SAMPLE_S"
    NOW=$(date +%s)
    RECORDS=$(wc -l <"$OUT/records.jsonl" 2>/dev/null || echo 0)
    echo "$((NOW - START)),$(rss "$COLLECTOR"),$(rss "$A"),$(rss "$B"),$RECORDS,$(cut -d' ' -f1 /proc/loadavg)" |
        tee -a "$OUT/rss.csv"
    if [ "$KILL_EVERY_S" -gt 0 ] && [ $((NOW - LAST_KILL)) -ge "$KILL_EVERY_S" ]; then
        kill -9 "$COLLECTOR" 2>/dev/null || true
        wait "$COLLECTOR" 2>/dev/null || true
        STARTS=$((STARTS + 1))
        start_collector "$ADDR"
        LAST_KILL=$NOW
        echo "soak: collector restarted ($COLLECTOR)"
    fi
done
set +e
wait "$A"
CA=$?
wait "$B"
CB=$?
set -e
kill -TERM "$COLLECTOR" 2>/dev/null || true
wait "$COLLECTOR" 2>/dev/null || true
echo "soak: point a exit $CA: $(cat "$OUT/a.json")"
echo "soak: point b exit $CB: $(cat "$OUT/b.json")"
echo "soak: records $(wc -l <"$OUT/records.jsonl"), seconds $(($(date +%s) - START))"
# Every epoch accounted for: the commit log (kept across collector restarts) must name one
# group per simulated epoch for each segment and two-point synopsis (extra groups: the packets
# that arrive after the last epoch's boundary).
COMMITTED=$(grep -o '"group":"s[0-9]*/[a-z]*/[0-9]*-[0-9]*"' "$OUT/records.jsonl.commit" | cut -d'"' -f4 |
    awk -F/ -v first=1000 -v n="$EPOCHS" '{ split($3, r, "-"); if (r[1] >= first && r[1] < first + n) seen[$1 "/" $2 "/" r[1]] = 1 }
        END { for (k in seen) { split(k, p, "/"); c[p[1] "/" p[2]]++ } for (g in c) print g, c[g] }' | sort)
echo "soak: committed groups per segment and synopsis over the $EPOCHS epochs:"
echo "$COMMITTED" | sed 's/^/soak:   /'
SHORT=$(echo "$COMMITTED" | awk -v n="$EPOCHS" '$2 < n' | wc -l)
if [ "$SHORT" -ne 0 ] || [ -z "$COMMITTED" ] || [ "$CA" -ne 0 ] || [ "$CB" -ne 0 ] || ! grep -q '"queued":0' "$OUT/a.json" || ! grep -q '"queued":0' "$OUT/b.json"; then
    echo "soak: FAILED: an epoch was not accounted for" >&2
    exit 1
fi
echo "soak: every epoch acknowledged; RSS samples in $OUT/rss.csv"
