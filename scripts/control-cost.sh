#!/usr/bin/env bash
# Control-thread cost per measured packet with N emulated workers: `wirelat offline` over one
# point's generated trace pair, with the synopses and sizes of configs/measure-trace.toml (all
# five, 100-ms epochs, JSON lines + body dumps into a scratch directory). offline times its
# harvest polls (merging the workers' shards, which files RDA's logs) and its publishing
# (encodes, sinks) and logs them per measured packet. Median of ROUNDS runs per worker count.
#
# LOAD=split (the default) spreads the one trace over the N workers, as RSS would: N workers
# share the trace's rate, so each one's fixed cost per epoch (its shards' drains) is spread
# over 1/N of the packets. LOAD=replicas (`offline --replicas`) gives every worker its own copy
# of the whole trace (addresses offset per worker): N workers at the trace's full rate each, the
# load a control core serving N busy queues has.
#
# SYNOPSES="rda lds" keeps only those of the config's `[synopses.*]` tables (default: all five),
# so the control thread's cost can be split synopsis by synopsis.
#
# LOOPS=K replays the trace K times (`offline --loops`), each pass in epochs of its own: the
# first epochs of a run pay for buffers still growing into fresh pages, which a long run pays
# once, so LOOPS > 1 measures the steady state a short trace cannot reach on its own.
#
#   scripts/control-cost.sh     # env: WORKERS="1 2 4 8" ROUNDS=3 RATE=1000000 DURATION=3s DIR=/tmp/wirelat-control-cost
#                               #      LOAD=split|replicas LOOPS=1 SYNOPSES="fridge lda lds rda colate"
#                               #      BIN=path/to/wirelat (another build, e.g. for before/after; default: build this tree)
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=${WORKERS:-"1 2 4 8"}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-1000000}
DURATION=${DURATION:-3s}
DIR=${DIR:-/tmp/wirelat-control-cost}
BIN=${BIN:-}
LOAD=${LOAD:-split}
LOOPS=${LOOPS:-1}
ALL_SYNOPSES="fridge lda lds rda colate"
SYNOPSES=${SYNOPSES:-$ALL_SYNOPSES}
for s in $SYNOPSES; do
    if [[ " $ALL_SYNOPSES " != *" $s "* ]]; then
        echo "SYNOPSES: '$s' is not one of $ALL_SYNOPSES" >&2
        exit 2
    fi
done
case "$LOAD" in
    split) LOAD_ARGS=() ;;
    replicas) LOAD_ARGS=(--replicas) ;;
    *) echo "LOAD must be split or replicas, not '$LOAD'" >&2; exit 2 ;;
esac
if [[ -z "$BIN" ]]; then
    cargo build --release --quiet
    BIN=./target/release/wirelat
fi
mkdir -p "$DIR"
if [[ ! -f "$DIR/trace-$RATE-$DURATION/a_port0.pcap" ]]; then
    "$BIN" gen-trace -o "$DIR/trace-$RATE-$DURATION" --rate "$RATE" --duration "$DURATION" --seed 5 >/dev/null
fi
# A `[synopses.X]` table runs to the next table header; the ones not in SYNOPSES are left out.
sed -e "s#\"out/#\"$DIR/out/#" -e '/^dump_dir/d' -e '/^colate_archive/d' configs/measure-trace.toml |
    awk -v keep=" $SYNOPSES " '/^\[/ { skip = 0; if ($0 ~ /^\[+synopses\./) { split($0, part, /[].[]+/); skip = index(keep, " " part[3] " ") == 0 } }
        !skip { print }' >"$DIR/config.toml"
if ! grep -q '^\[synopses\.' "$DIR/config.toml"; then
    echo "SYNOPSES='$SYNOPSES' leaves no synopsis in the config" >&2
    exit 2
fi
# With replicas an epoch of the point holds N times the trace's packets and flows: RDA's cache and
# LDS's flow log are sized N times too, so that neither leaves work out (a full cache only counts
# packets; each run's log is checked for RDA's warning below).
config_for() {
    if [[ "$LOAD" == replicas ]]; then
        awk -v n="$1" '/^cache_capacity *=/ { $3 = $3 * n } /^flow_capacity *=/ { $3 = $3 * n } { print }' \
            "$DIR/config.toml" >"$DIR/config-$1.toml"
    else
        cp "$DIR/config.toml" "$DIR/config-$1.toml"
    fi
}
median() { sort -g | awk '{ v[n++] = $1 } END { printf "%.1f", n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'; }
printf "%-8s %-10s %-12s %-10s %-12s %-12s %s\n" workers packets epochs control merge publish "(ns per measured packet, median of $ROUNDS; load $LOAD, $LOOPS passes; $SYNOPSES)"
for w in $WORKERS; do
    : >"$DIR/runs"
    config_for "$w"
    for _ in $(seq "$ROUNDS"); do
        rm -rf "$DIR/out" && mkdir -p "$DIR/out"
        "$BIN" offline --config "$DIR/config-$w.toml" --port0 "$DIR/trace-$RATE-$DURATION/a_port0.pcap" \
            --port1 "$DIR/trace-$RATE-$DURATION/a_port1.pcap" --workers "$w" --loops "$LOOPS" "${LOAD_ARGS[@]}" 2>&1 | tee "$DIR/log" |
            awk '/offline run finished/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "measured") m = kv[2]; if (kv[1] == "epochs") e = kv[2] } }
                 /control thread work/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); gsub(/"/, "", kv[2]); v[kv[1]] = kv[2] } }
                 END { print m, e, v["control_ns_per_packet"], v["merge_ns_per_packet"], v["publish_ns_per_packet"] }' >>"$DIR/runs"
        if grep -q "RDA's cache was full" "$DIR/log"; then
            echo "warning: $w workers: RDA's cache was full in some epoch (its work is undercounted)" >&2
        fi
    done
    read -r packets epochs _ < "$DIR/runs"
    printf "%-8s %-10s %-12s %-10s %-12s %-12s\n" "$w" "$packets" "$epochs" \
        "$(awk '{print $3}' "$DIR/runs" | median)" "$(awk '{print $4}' "$DIR/runs" | median)" "$(awk '{print $5}' "$DIR/runs" | median)"
done
rm -rf "$DIR/out"
