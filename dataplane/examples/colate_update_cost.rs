//! CPU cost of COLATE's per-packet update, for use under `perf stat` on a shared machine where
//! criterion's wall-clock numbers include time the process spent waiting for a core.
//!
//! Feeds the same key stream as `benches/colate.rs` (1 Mi packets of a heavy-tailed trace,
//! precomputed flow hashes and identities) `rounds` times into one vector and prints the
//! wall-clock ns per packet. Run it twice under perf, with `rounds` = 0 (setup only) and N, and
//! divide the difference in task-clock or cycles by N·2^20:
//!
//! `perf stat -e task-clock target/release/examples/colate_update_cost 441499 paper 40`
//! (modes: `paper`, `counts`, `paper-burst`, `counts-burst`).

use std::hint::black_box;
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::colate::trace::{TraceConfig, generate};
use wirelat_dataplane::synopsis::colate::{Colate, ColateConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(441_499);
    let mode = args.next().unwrap_or_default();
    let counts = mode.contains("counts");
    let burst = mode.contains("burst");
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let packets = 1usize << 20;
    let tr = generate(&TraceConfig::new(11, (packets / 40) as u32, 10_000_000_000, 40.0));
    let stream: Vec<(u64, u64, u64)> = tr
        .packets
        .iter()
        .take(packets)
        .map(|p| (tr.flow_hashes[p.flow as usize], p.identity, p.ts_s_ns))
        .collect();
    let cfg = ColateConfig { packet_counts: counts, ..ColateConfig::new(n, 20, 19, u64::MAX) };
    let Ok(mut s) = Colate::new(&cfg) else {
        eprintln!("colate_update_cost: n = {n} is not a valid (prime) counter count");
        std::process::exit(2);
    };
    let t = std::time::Instant::now();
    for _ in 0..rounds {
        if burst {
            for b in stream.chunks(32) {
                s.update_burst(b);
            }
        } else {
            for &(f, id, ts) in &stream {
                s.update_raw(f, id, ts);
            }
        }
    }
    let el = t.elapsed();
    black_box(s.packets());
    let updates = rounds as f64 * stream.len() as f64;
    println!(
        "n = {n}, counts = {counts}, burst = {burst}: {} updates in {el:.2?} wall, {:.2} ns/update wall",
        updates,
        if updates > 0.0 { el.as_nanos() as f64 / updates } else { 0.0 }
    );
}
