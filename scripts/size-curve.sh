#!/usr/bin/env bash
# W17 (issue 24): each synopsis's accuracy and speed at several table sizes. For every factor
# (default 0.25 1 4) it runs
#   - the accuracy matrices with WIRELAT_SIZE_FACTOR: trace/tests/segment_matrix/ (LDA, RDA),
#     flow_matrix.rs (LDS), colate_matrix/ (COLATE), at the CI's sizes of traffic unless
#     SEGMENT_SCALE / COLATE_SCALE / FLOW_MATRIX=full ask for the larger runs;
#   - the fridge's W12 check against real captures (scripts/fridge-captures.py, 16 bins per
#     octave) if CAPTURES names a directory of pcaps (default ../shared/data/captures; the
#     captures are not part of the project, so without them the fridge has no accuracy row;
#     BIN names a wirelat binary to use instead of building target/debug/wirelat);
#   - the pipeline bench with BENCH_SIZE_FACTOR (each synopsis alone at
#     configs/measure-trace.toml's sizes × factor), unless SKIP_BENCH=1, after all the matrices,
#     BENCH_ROUNDS times (default 1) with the factors interleaved; the table gives the median
#     over the rounds (and each round's figure);
# and prints one markdown table: synopsis × factor → bytes, ns/packet, accuracy. Every run's
# output is kept in OUT (default out/size-curve). A matrix that fails still gets its row
# (marked FAIL, its failures in its log); checks the factor legitimately breaks are MARKED.
# SKIP_MATRICES=1 reruns only the benches (the table then reads the matrices' last logs).
#
#   scripts/size-curve.sh [FACTOR ...]
#   scripts/size-curve.sh --table [FACTOR ...]     (only print the table of the last runs)
#
# The matrices use the test profile CI builds (their errors do not depend on optimisation);
# the bench builds the bench profile. Timing taken while others build is noisy: record the load.
set -euo pipefail
cd "$(dirname "$0")/.."
table_only=0
if [[ "${1:-}" == "--table" ]]; then
  table_only=1
  shift
fi
factors=("$@")
[[ ${#factors[@]} -gt 0 ]] || factors=(0.25 1 4)
out=${OUT:-out/size-curve}
captures=${CAPTURES:-../shared/data/captures}
mkdir -p "$out"

if [[ $table_only == 0 ]]; then
  tests=(segment_matrix flow_matrix colate_matrix)
  cargo test -q -p wirelat-trace --test segment_matrix --test flow_matrix --test colate_matrix --no-run
  bin=${BIN:-}
  if [[ -d "$captures" && -z "$bin" ]]; then
    cargo build -q --bin wirelat
    bin=target/debug/wirelat
  fi
  [[ "${SKIP_BENCH:-0}" == 1 ]] || cargo bench -q --no-default-features --bench pipeline --no-run
  [[ "${SKIP_MATRICES:-0}" == 1 ]] && tests=()
  for f in "${factors[@]}"; do
    for t in "${tests[@]}"; do
      echo "== $t, size factor $f" >&2
      WIRELAT_SIZE_FACTOR=$f WIRELAT_MATRIX_SCALE=${SEGMENT_SCALE:-1} \
        WIRELAT_FLOW_MATRIX=${FLOW_MATRIX:-small} \
        cargo test -q -p wirelat-trace --test "$t" -- --nocapture >"$out/$t-$f.log" 2>&1 \
        && echo "RESULT|pass" >>"$out/$t-$f.log" || echo "RESULT|FAIL" >>"$out/$t-$f.log"
    done
    # The COLATE scale knob disables its digest like any WIRELAT_COLATE_MATRIX_* variable, so it
    # is only set when asked for.
    if [[ -n "${COLATE_SCALE:-}" && "${SKIP_MATRICES:-0}" != 1 ]]; then
      WIRELAT_SIZE_FACTOR=$f WIRELAT_COLATE_MATRIX_SCALE=$COLATE_SCALE \
        cargo test -q -p wirelat-trace --test colate_matrix -- --nocapture >"$out/colate_matrix-$f.log" 2>&1 \
        && echo "RESULT|pass" >>"$out/colate_matrix-$f.log" || echo "RESULT|FAIL" >>"$out/colate_matrix-$f.log"
    fi
    if [[ -d "$captures" && "${SKIP_MATRICES:-0}" != 1 ]]; then
      echo "== fridge on the captures, size factor $f" >&2
      WIRELAT_SIZE_FACTOR=$f scripts/fridge-captures.py "$bin" "$captures" 16 \
        >"$out/fridge-$f.log" 2>&1 && echo "RESULT|pass" >>"$out/fridge-$f.log" \
        || echo "RESULT|FAIL" >>"$out/fridge-$f.log"
    fi
  done
  # The benches after every matrix (no test build or run competes with them), the factors
  # interleaved in each round so that a change of load spreads over all of them.
  if [[ "${SKIP_BENCH:-0}" != 1 ]]; then
    rm -f "$out"/bench-*.log
    for ((r = 1; r <= ${BENCH_ROUNDS:-1}; r++)); do
      for f in "${factors[@]}"; do
        echo "== pipeline bench, size factor $f, round $r (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
        BENCH_SIZE_FACTOR=$f cargo bench -q --no-default-features --bench pipeline >"$out/bench-$f-$r.log" 2>&1 \
          || echo "RESULT|FAIL" >>"$out/bench-$f-$r.log"
        echo "LOAD|$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/bench-$f-$r.log"
      done
    done
  fi
fi

OUT_DIR="$out" python3 - "${factors[@]}" <<'PY'
import glob, os, re, statistics, sys
out, factors = os.environ["OUT_DIR"], sys.argv[1:]

def lines(path):
    return open(path).read().splitlines() if os.path.exists(path) else []

def mib(b):
    return "–" if b is None else f"{int(b) / 2**20:.2f}"

# (matrix log, SIZE-CURVE matrix name, figures to show, in order)
acc = {
    "fridge": ("fridge", "captures", ["samples_kept", "log2_err_p50_worst", "log2_err_p95_worst", "log2_err_p99_worst"]),
    "lda": ("segment_matrix", "segment", ["coverage", "mean_err_median", "mean_err_p90", "mean_err_worst", "sd_err_p90"]),
    "lds": ("flow_matrix", "flow", ["coverage_worst", "own_only", "rel_err_p50", "rel_err_p99_worst", "p99_error_over_bound_worst", "false_confirmations"]),
    "rda": ("segment_matrix", "segment", ["coverage", "mean_err_worst", "sd_err_p90", "sd_err_worst"]),
    "colate": ("colate_matrix", "colate", ["with_mean_worst", "rel_err_p50", "rel_err_p99_worst", "within_10se_worst", "ci95_coverage_worst"]),
}
print("| synopsis | factor | bench: one epoch's tables, MiB | bench: worker above packet layer, MiB | bench: ns/packet | above packet layer | control ns/packet | matrix: tables per point, MiB | matrix accuracy | matrix result |")
print("|---|---|---|---|---|---|---|---|---|---|")
for syn, (log, matrix, keys) in acc.items():
    for f in factors:
        runs = []
        for path in sorted(glob.glob(f"{out}/bench-{f}-*.log")):
            for l in lines(path):
                if l.startswith(f"pipeline-size|{syn}_only_64B|"):
                    runs.append(dict(kv.split("=", 1) for kv in l.split("|")[2:]))
        bench = dict(runs[0]) if runs else {}
        for k in ("ns_per_packet", "above_packet_layer", "control_ns_per_packet"):
            if runs:
                v = statistics.median(float(r[k]) for r in runs)
                bench[k] = f"{v:.1f}" + (f" ({', '.join(r[k] for r in runs)})" if len(runs) > 1 else "")
        m, result, marks, fails = None, "not run", 0, ""
        text = lines(f"{out}/{log}-{f}.log")
        for i, l in enumerate(text):
            p = l.split("|")
            if l.startswith("SIZE-CURVE|") and p[1] == matrix and p[2] == syn:
                m = (p[4], dict(kv.split("=", 1) for kv in p[5:]))
            elif l.startswith("RESULT|"):
                result = p[1]
            elif l.startswith("MARKED"):
                marks += 1
            elif re.match(r"^\d+ failures:$", l) and not fails:
                # The count and the first failure.
                first = text[i + 1].strip() if i + 1 < len(text) else ""
                fails = f"{l.strip()} {first[:100]}…"
        if result == "pass" and marks:
            result = f"pass, {marks} marked"
        elif result == "FAIL":
            result = f"FAIL ({fails or 'see log'}{', ' + str(marks) + ' marked' if marks else ''})"
        figs = "; ".join(f"{k} {m[1][k]}" for k in keys if m and k in m[1]) if m else "–"
        print(
            f"| {syn} | {f} | {mib(bench.get('epoch_bytes'))} | {mib(bench.get('worker_bytes_above_packet_layer'))} | "
            f"{bench.get('ns_per_packet', '–')} | {bench.get('above_packet_layer', '–')} | {bench.get('control_ns_per_packet', '–')} | "
            f"{mib(m[0]) if m else '–'} | {figs} | {result} |"
        )
print()
for f in factors:
    for path in sorted(glob.glob(f"{out}/bench-{f}-*.log")):
        for l in lines(path):
            if l.startswith(("pipeline-size|packet_layer_only_64B|", "pipeline-size|all_five_64B|", "LOAD|")):
                print(f"- {os.path.basename(path)}: `{l}`")
PY
