#!/usr/bin/env python3
"""The fridge's whole-run quantiles on real captures against exact quantiles (issue 19, W12).

For each pcap in CAPTURES (and for one trace pooled from all of them, each capture shifted to
start 60 s after the previous one ends), this script

1. computes the exact request->response delays itself, independently of wirelat's packet layer:
   TCP handshakes (the last SYN without ACK of (client, server, ISN) before the first SYN/ACK
   acknowledging ISN + 1) and DNS over UDP port 53 (the last query of (client, server, id)
   before its first response): the pairing the fridge measures (docs/fridge.md, Limits);
2. runs `wirelat offline` on the pcap with a fridge-only configuration (p = 1, 2^16 slots: no
   sampling, so any error is the histogram's) at the given resolution and reads the whole-run
   report it prints at exit;
3. prints |log2(estimate / exact)| at p50, p95 and p99 per capture and kind, for the report's
   rule (bin extremes, samples' CDF in gaps) and, from the same report's histogram, for the
   previous rule (log-linear over the whole bin, next non-empty bin in gaps).

Exact quantiles use the same definition as the report (numpy `interp` over the knots of the
sorted distinct delays with F = cumulative count / n).

Usage: scripts/fridge-captures.py WIRELAT_BINARY CAPTURES_DIR [BINS_PER_OCTAVE ...]
The captures are not part of the project; the table lives in BENCHMARKS.md (W12).

WIRELAT_SIZE_FACTOR (issue 24, W17; default 1) multiplies the slots (2^16 x factor, at least
2), and the script then also prints one `SIZE-CURVE|captures|fridge|...` line that
scripts/size-curve.sh collects: the worst |log2| error at p50/p95/p99 over every capture and kind
at the first resolution given, and the share of the exact pairs the fridge kept as samples.
"""

import json
import math
import os
import struct
import subprocess
import sys
import tempfile

QS = (0.5, 0.95, 0.99)
SLOTS = 65536
SLOT_BYTES = 16  # fridge::table::Slot: timestamp u64, counter u32, signature u32


def size_factor():
    """WIRELAT_SIZE_FACTOR, default 1; anything but a finite number above 0 stops the script."""
    raw = os.environ.get("WIRELAT_SIZE_FACTOR")
    if raw is None:
        return 1.0
    try:
        f = float(raw)
    except ValueError:
        f = float("nan")
    if not (math.isfinite(f) and f > 0):
        print(f"WIRELAT_SIZE_FACTOR={raw!r}: expected a number above 0 (e.g. 0.25, 1 or 4)", file=sys.stderr)
        sys.exit(2)
    return f


def read_pcap(path):
    """Yields (ts_ns, frame) of an Ethernet pcap (µs or ns, either byte order)."""
    with open(path, "rb") as f:
        data = f.read()
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        end = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        end = ">"
    else:
        raise ValueError(f"{path}: not a pcap")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(end + "IIII", data[off : off + 16])
        off += 16
        frame = data[off : off + incl]
        off += incl
        yield sec * 1_000_000_000 + (frac if nano else frac * 1000), frame


def parse(frame):
    """(proto, src, dst, sport, dport, l4 bytes) of an IPv4/IPv6 TCP/UDP frame, or None."""
    if len(frame) < 14:
        return None
    etype = struct.unpack("!H", frame[12:14])[0]
    off = 14
    while etype in (0x8100, 0x88A8) and len(frame) >= off + 4:
        etype = struct.unpack("!H", frame[off + 2 : off + 4])[0]
        off += 4
    if etype == 0x0800 and len(frame) >= off + 20:
        ihl = (frame[off] & 0x0F) * 4
        frag = struct.unpack("!H", frame[off + 6 : off + 8])[0] & 0x1FFF
        if frag:
            return None
        proto = frame[off + 9]
        src, dst = frame[off + 12 : off + 16], frame[off + 16 : off + 20]
        l4 = frame[off + ihl :]
    elif etype == 0x86DD and len(frame) >= off + 40:
        proto = frame[off + 6]
        src, dst = frame[off + 8 : off + 24], frame[off + 24 : off + 40]
        l4 = frame[off + 40 :]
    else:
        return None
    if proto not in (6, 17) or len(l4) < 8:
        return None
    sport, dport = struct.unpack("!HH", l4[:4])
    return proto, src, dst, sport, dport, l4


def exact_delays(packets):
    """Exact handshake and DNS delays (ns) of (ts_ns, frame) in capture order."""
    syn, dns_q = {}, {}
    out = {"tcp_handshake": [], "dns": []}
    for ts, frame in packets:
        p = parse(frame)
        if p is None:
            continue
        proto, src, dst, sport, dport, l4 = p
        if proto == 6 and len(l4) >= 20:
            seq, ack = struct.unpack("!II", l4[4:12])
            flags = l4[13]
            is_syn, is_ack, is_rst = flags & 0x02, flags & 0x10, flags & 0x04
            if not is_syn or is_rst:
                continue
            if not is_ack:
                syn[(src, sport, dst, dport, (seq + 1) & 0xFFFFFFFF)] = ts
            else:
                t0 = syn.pop((dst, dport, src, sport, ack), None)
                if t0 is not None and ts >= t0:
                    out["tcp_handshake"].append(ts - t0)
        elif proto == 17 and len(l4) >= 8 + 12 and 53 in (sport, dport):
            txid, fl = struct.unpack("!HH", l4[8:12])
            if fl & 0x8000 == 0 and dport == 53:
                dns_q[(src, sport, dst, dport, txid)] = ts
            elif fl & 0x8000 and sport == 53:
                t0 = dns_q.pop((dst, dport, src, sport, txid), None)
                if t0 is not None and ts >= t0:
                    out["dns"].append(ts - t0)
    return out


def knot_quantile(delays, q):
    """numpy interp(q, F, t) over the distinct sorted delays, F = cumulative count / n."""
    s = sorted(delays)
    n = len(s)
    t, f = [], []
    for i, d in enumerate(s):
        if t and t[-1] == d:
            f[-1] = (i + 1) / n
        else:
            t.append(d)
            f.append((i + 1) / n)
    j = next((k for k, x in enumerate(f) if x >= q), len(f) - 1)
    if j == 0:
        return float(t[0])
    f0, f1, t0, t1 = f[j - 1], f[j], t[j - 1], t[j]
    return t1 if f1 <= f0 else t0 + (q - f0) / (f1 - f0) * (t1 - t0)


def old_rule_quantile(histogram, q):
    """The previous report rule from a report's histogram: log-linear over the bin's edges
    (linear in the underflow bin), quantiles in gaps at the next non-empty bin."""
    total = sum(b["pairs"] for b in histogram)
    target = q * total
    cum = 0.0
    for b in histogram:
        if cum + b["pairs"] >= target:
            frac = min(max((target - cum) / b["pairs"], 0.0), 1.0)
            lo, hi = b["low_ns"], b["high_ns"]
            if hi is None:
                return float(lo)
            if lo == 0:
                return frac * hi
            return lo * (hi / lo) ** frac
        cum += b["pairs"]
    return float(histogram[-1]["low_ns"])


CONFIG = """
[point]
id = 1
[segments]
forward = 1
reverse = 2
[epochs]
length_ms = 1000
ring = 4
overrun = "wait"
[clock]
source = "tsc"   # offline keeps the pcap's own resolution with any clock but "trace"
[packet.classify]
tcp_handshake = true
dns = true
[synopses.fridge]
seed = 1
kinds = [
  {{ kind = "tcp_handshake", fridges = [{{ slots = {slots}, entry_probability = 1.0 }}] }},
  {{ kind = "dns", fridges = [{{ slots = {slots}, entry_probability = 1.0 }}] }},
]
[synopses.fridge.histogram]
bins_per_octave = {bpo}
"""


def write_pcap(path, packets):
    """A nanosecond pcap of (ts_ns, frame)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for ts, frame in packets:
            f.write(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000, len(frame), len(frame)))
            f.write(frame)


def fridge_report(binary, pcap, bpo, tmp, slots):
    cfg = os.path.join(tmp, f"fridge-{bpo}.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(bpo=bpo, slots=slots))
    out = subprocess.run(
        [binary, "offline", "--config", cfg, "--port0", pcap, "--workers", "1"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "RUST_LOG": "warn"},
    ).stdout
    line = next(l for l in out.splitlines() if l.startswith('{"whole_run_fridge"'))
    report = json.loads(line)["whole_run_fridge"]["report"]
    return {k["kind"]: k["all"] for k in report["kinds"]}


def err(est, truth):
    return abs(math.log2(est / truth)) if est and truth > 0 else float("nan")


def main():
    binary, captures = sys.argv[1], sys.argv[2]
    bpos = [int(x) for x in sys.argv[3:]] or [16, 4]
    factor = size_factor()
    slots = max(2, round(SLOTS * factor))
    names = sorted(n for n in os.listdir(captures) if n.endswith(".pcap"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="w12-fridge-") as tmp:
        pooled, shift = [], 0
        jobs = []
        for name in names:
            path = os.path.join(captures, name)
            packets = list(read_pcap(path))
            if packets:
                base = packets[0][0]
                pooled.extend((ts - base + shift, fr) for ts, fr in packets)
                shift += packets[-1][0] - base + 60_000_000_000
            jobs.append((name, path, packets))
        pooled_path = os.path.join(tmp, "pooled.pcap")
        write_pcap(pooled_path, pooled)
        jobs.append(("pooled (all 17)", pooled_path, pooled))
        for name, path, packets in jobs:
            truth = exact_delays(packets)
            reports = {bpo: fridge_report(binary, path, bpo, tmp, slots) for bpo in bpos}
            for kind, delays in truth.items():
                if len(delays) < 1:
                    continue
                cells = []
                for bpo in bpos:
                    d = reports[bpo].get(kind, {})
                    for q in QS:
                        key = {0.5: "p50_ns", 0.95: "p95_ns", 0.99: "p99_ns"}[q]
                        est = (d.get(key) or {}).get("value")
                        old = old_rule_quantile(d["histogram"], q) if d.get("histogram") else None
                        t = knot_quantile(delays, q)
                        cells.append((bpo, q, err(est, t), err(old, t)))
                samples = reports[bpos[0]].get(kind, {}).get("samples", 0)
                rows.append((name, kind, len(delays), samples, cells))
    head = " | ".join(
        f"{bpo}/oct p{int(q * 100)} new / old" for bpo in bpos for q in QS
    )
    print(f"| capture | kind | exact pairs | fridge samples | {head} |")
    print("|---|---|---|---|" + "---|" * (len(bpos) * len(QS)))
    worst = {}
    for name, kind, n, samples, cells in rows:
        txt = " | ".join(f"{new:.3f} / {old:.3f}" for _, _, new, old in cells)
        print(f"| {name} | {kind} | {n} | {samples} | {txt} |")
        for bpo, q, new, old in cells:
            w = worst.setdefault((bpo, q), [0.0, 0.0])
            w[0] = max(w[0], new if new == new else 0.0)
            w[1] = max(w[1], old if old == old else 0.0)
    print()
    for (bpo, q), (new, old) in sorted(worst.items()):
        print(f"worst |log2| at {bpo} bins/octave, p{int(q * 100)}: new rule {new:.3f}, old rule {old:.3f}")
    if "WIRELAT_SIZE_FACTOR" in os.environ:
        # Per capture and kind (the pooled trace excluded: it repeats them), at the first
        # resolution: pairs the fridge kept, and the worst new-rule error per quantile.
        own = [r for r in rows if not r[0].startswith("pooled")]
        pairs, kept = sum(r[2] for r in own), sum(r[3] for r in own)
        figs = [f"pairs={pairs}", f"samples_kept={kept / max(pairs, 1):.4f}"]
        for q in QS:
            figs.append(f"log2_err_p{int(q * 100)}_worst={worst[(bpos[0], q)][0]:.3f}")
        # Two fridges (handshake, DNS) of `slots` slots; the histograms are not counted.
        print(f"SIZE-CURVE|captures|fridge|{factor:g}|{2 * slots * SLOT_BYTES}|" + "|".join(figs))


if __name__ == "__main__":
    main()
