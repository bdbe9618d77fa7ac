//! What this machine charges for random cache lines, the resource a worker's synopses spend per
//! packet (issue 24, W17): ns per packet when each packet updates `L` random 64-byte lines of a
//! table of `F` MiB, the lines of a whole burst prefetched before any is updated, as
//! `Pipeline::stage` and `Pipeline::apply` do. With the default tables a worker touches
//! about seven such lines per packet (LDS's four cells and its flow-log slot, COLATE's counter,
//! the fridge's slot) in about 23 MiB; RDA's log and LDA's banks are sequential or small.
//!
//! The figures give a floor that no code change goes below: a worker needs at least forwarding +
//! the packet layer + (its lines per packet × this bench's ns per line) per packet, so the lines
//! per packet bound the ratio to testpmd that a configuration can reach (BENCHMARKS.md, "W17
//! (eighth session)").
//!
//! The tables come from the appliance's allocator ([`HugePageAlloc`]: 2-MiB transparent huge
//! pages from 4 MiB up, 4-KiB pages below), as the worker's do; the line indices from a xorshift generator, a few instructions
//! per line, which the floor therefore includes.
//!
//! Run: `cargo bench --bench memory_lines` (needs the `dpdk` feature, the default, for the
//! allocator). Per-packet time = reported time / 2^16.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use wirelat_dataplane::cpu::prefetch;
use wirelat_dataplane::dpdk::HugePageAlloc;
use wirelat_dataplane::synopsis::hash;

#[global_allocator]
static ALLOCATOR: HugePageAlloc = HugePageAlloc;

/// Packets per timed iteration.
const PACKETS: usize = 1 << 16;
/// Packets per burst, as the bench configuration's workers receive them.
const BURST: usize = 32;
/// Most lines per packet measured.
const MAX_LINES: usize = 8;
/// u64 words per cache line.
const WORDS_PER_LINE: usize = 8;

/// A xorshift64 generator: cheap enough that the memory, not the indices, is what is timed.
struct Lines {
    state: u64,
    lines: u64,
}

impl Lines {
    #[inline(always)]
    fn next(&mut self) -> usize {
        let mut s = self.state;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        self.state = s;
        // Onto 0..lines as the synopses reduce their hashes.
        hash::reduce(s, self.lines) as usize * WORDS_PER_LINE
    }
}

/// One timed iteration: `PACKETS` packets of `per_packet` random lines each, burst by burst.
fn run(table: &mut [u64], lines: &mut Lines, per_packet: usize) {
    let mut at = [0usize; BURST * MAX_LINES];
    let n = BURST * per_packet;
    for _ in 0..PACKETS / BURST {
        for slot in at.iter_mut().take(n) {
            *slot = lines.next();
            prefetch(table.as_ptr().wrapping_add(*slot).cast());
        }
        for &i in at.iter().take(n) {
            if let Some(w) = table.get_mut(i) {
                *w = w.wrapping_add(1);
            }
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("memory_lines");
    g.throughput(Throughput::Elements(PACKETS as u64));
    g.sample_size(20).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    for mib in [1usize, 4, 16, 64] {
        let words = (mib << 20) / 8;
        // Written once so that every page is backed before anything is timed.
        let mut table = vec![1u64; words];
        let mut lines = Lines { state: 0x9e37_79b9_7f4a_7c15, lines: (words / WORDS_PER_LINE) as u64 };
        for per_packet in [1usize, 3, 5, 7] {
            g.bench_function(format!("{mib}MiB/{per_packet}_lines"), |b| {
                b.iter(|| run(&mut table, &mut lines, per_packet))
            });
        }
        black_box(&table);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
