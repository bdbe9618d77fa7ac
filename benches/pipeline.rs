//! The measuring pipeline's own cost per packet, without DPDK: what one worker spends on a
//! received burst between rx and tx (`Pipeline::stage` for every frame, which locates the
//! packet and prefetches its lines, then `Pipeline::apply`), with the synopses of
//! `configs/measure-trace.toml` (all five, at its sizes and its 100-ms epochs).
//!
//! Why next to `scripts/bench-measure.sh`: there, DPDK's pcap device copies every frame out of
//! a ring of the whole pcap (misses the device pays, not the pipeline), and the looping pcap
//! repeats the same 32 768 packets, so RDA sees repeats only. Here every packet is distinct (a
//! per-pass counter is written into each frame's IPv4 identification, which the packet identity
//! covers, one burst ahead), as on a real link. The control side's work (filing RDA's log,
//! zeroing and returning buffers) runs between timed iterations and is printed on its own.
//!
//! Traffic: `packet::synth::syn_udp_mix_64(4096)`, the 64-byte mix `examples/bench_pcap.rs`
//! writes (per flow a TCP SYN, six UDP datagrams and the SYN/ACK), all received on port 0 in
//! bursts of 32, 100 ns apart (10 Mpps); an iteration is 2^20 packets, about one epoch.
//!
//! Run: `cargo bench --no-default-features --bench pipeline`. Per-packet time = reported time /
//! 2^20 (criterion's throughput line gives packets per second).
//!
//! `BENCH_SIZE_FACTOR` (issue 24, W17; default 1, the file's sizes untouched) multiplies the
//! sizes read from the config before it is parsed: fridge slots, LDA rows (even), LDS width and
//! flow_capacity, RDA's buckets per bank and cache_capacity, COLATE's counters (up to a prime).
//! Every run after its criterion lines prints one `pipeline-size|…` line that
//! `scripts/size-curve.sh` reads: the median ns/packet over criterion's samples, the same above
//! `packet_layer_only`, the bytes one epoch's synopses allocate when built, the bytes the whole
//! worker holds after its run (ring of epoch buffers, carry, lazily allocated tables, frames),
//! the control side's ns/packet, and the allocation calls made inside the timed loop. A counting
//! global allocator measures the bytes; the timed loop allocates nothing (the line says so), so
//! the counting costs nothing there.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use wirelat_control::config::{Config, Purpose};
use wirelat_dataplane::cpu::prefetch;
use wirelat_dataplane::epoch::{EpochBuffer, EpochClock, EpochLink};
use wirelat_dataplane::packet::synth::syn_udp_mix_64;
use wirelat_dataplane::pipeline::{
    Direction, EpochSynopses, OverrunPolicy, Pipeline, StagedBurst, SynopsisSet,
};
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::colate::config::next_prime;

/// The system allocator, counting the bytes live on the heap (for the tables' footprint).
struct Counting;

/// Bytes currently allocated through [`Counting`].
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Allocation calls (alloc, alloc_zeroed, realloc) through [`Counting`]: the bench reports those
/// made inside its timed loop, which must be none.
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; the counter only observes sizes. `alloc_zeroed` stays `System`'s own (calloc), so
// the tables' pages are first touched where they were before.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's layout is passed on as given.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator (so from `System`) with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as in `dealloc`; `new_size` is the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const BURST: usize = 32;
const PACKETS_PER_ITER: usize = 1 << 20;
const GAP_NS: u64 = 100;
/// Offset of the IPv4 identification in an untagged frame.
const IPV4_IDENT: usize = 14 + 4;

/// `BENCH_SIZE_FACTOR`, default 1; anything but a finite number above 0 stops the bench.
fn size_factor() -> f64 {
    match std::env::var("BENCH_SIZE_FACTOR") {
        Err(std::env::VarError::NotPresent) => 1.0,
        Ok(s) => match s.trim().parse::<f64>() {
            Ok(f) if f.is_finite() && f > 0.0 => f,
            _ => panic!("BENCH_SIZE_FACTOR={s:?}: expected a number above 0 (e.g. 0.25, 1 or 4)"),
        },
        Err(e) => panic!("BENCH_SIZE_FACTOR: {e}"),
    }
}

/// The config's `[synopses.*]` sizes multiplied by `factor` (module docs), each rounded to
/// what its key accepts. Panics naming the key if the file lacks one of them.
/// `BENCH_SIZE_ONLY` (comma-separated `synopsis.key` names, e.g. `lds.width`) scales only those:
/// which of a synopsis's tables its cost follows.
fn scale_sizes(text: &str, factor: f64) -> String {
    let only = std::env::var("BENCH_SIZE_ONLY").unwrap_or_default();
    fn at<'a>(t: &'a mut toml::Table, key: &str) -> &'a mut toml::Value {
        t.get_mut(key).unwrap_or_else(|| panic!("configs/measure-trace.toml: no key {key}"))
    }
    fn table<'a>(t: &'a mut toml::Table, key: &str) -> &'a mut toml::Table {
        at(t, key).as_table_mut().unwrap_or_else(|| panic!("{key}: a table"))
    }
    fn array<'a>(t: &'a mut toml::Table, key: &str) -> &'a mut Vec<toml::Value> {
        at(t, key).as_array_mut().unwrap_or_else(|| panic!("{key}: an array"))
    }
    // n × factor rounded, at least `min`, rounded to a multiple of `step`, then `finish`ed.
    let scale = |name: &str, v: &mut toml::Value, min: u64, step: u64, finish: fn(u64) -> u64| {
        if !only.is_empty() && !only.split(',').any(|k| k.trim() == name) {
            return;
        }
        let n = v.as_integer().unwrap_or_else(|| panic!("{v}: an integer")) as f64;
        let x = ((n * factor / step as f64).round() as u64 * step).max(min);
        *v = toml::Value::Integer(finish(x) as i64);
    };
    let same = |x| x;
    let mut doc: toml::Table = text.parse().expect("configs/measure-trace.toml is TOML");
    let syn = table(&mut doc, "synopses");
    for kind in array(table(syn, "fridge"), "kinds") {
        let kind = kind.as_table_mut().expect("a fridge kind: a table");
        for f in array(kind, "fridges") {
            scale("fridge.slots", at(f.as_table_mut().expect("a fridge: a table"), "slots"), 2, 1, same);
        }
    }
    for bank in array(table(syn, "lda"), "banks") {
        // Even: rows pair into signed buckets.
        scale("lda.rows", at(bank.as_table_mut().expect("an LDA bank: a table"), "rows"), 2, 2, same);
    }
    let lds = table(syn, "lds");
    scale("lds.width", at(lds, "width"), 1, 1, same);
    scale("lds.flow_capacity", at(lds, "flow_capacity"), 1, 1, same);
    let rda = table(syn, "rda");
    scale("rda.cache_capacity", at(rda, "cache_capacity"), 1, 1, same);
    scale("rda.buckets_per_bank", at(table(rda, "binding"), "buckets_per_bank"), 1, 1, same);
    scale("colate.counters", at(table(syn, "colate"), "counters"), 3, 1, next_prime);
    toml::to_string(&doc).expect("TOML out")
}

fn measure_trace_config() -> (SynopsisSet, wirelat_dataplane::packet::PacketConfig, u64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/measure-trace.toml");
    let mut text = std::fs::read_to_string(&path).expect("configs/measure-trace.toml");
    let factor = size_factor();
    if factor != 1.0 {
        text = scale_sizes(&text, factor);
    }
    let cfg = Config::parse_for(&text, &path, Purpose::Offline).expect("a valid config");
    let epoch_ns = cfg.epochs.length_ns();
    (cfg.synopsis_set(), cfg.packet_config(), epoch_ns)
}

/// One worker's pipeline with its epoch ring, and the control side that drains it.
struct Worker {
    pipeline: Pipeline,
    link: Arc<EpochLink<EpochSynopses>>,
    staged: StagedBurst,
    frames: Vec<Vec<u8>>,
    next_frame: usize,
    next_stamp: usize,
    ts_ns: u64,
    round: u16,
    /// RDA's counters over the drained epochs: the bench checks that no id repeated.
    rda_seen: u64,
    rda_duplicates: u64,
    /// Time the control side took (files RDA's log, zeroes the buffer) and the packets it covered.
    control_time: Duration,
    control_packets: u64,
    /// Of `control_time`, filing RDA's log into the cache.
    settle_time: Duration,
    /// ns per packet of every timed call criterion made (warm-up included), for the median.
    ns_per_packet: Vec<f64>,
    /// Allocation calls made inside the timed loop (none expected).
    timed_allocations: usize,
}

impl Worker {
    fn new(set: &SynopsisSet, packet: wirelat_dataplane::packet::PacketConfig, epoch_ns: u64) -> Self {
        let template = EpochSynopses::new(set).expect("synopses");
        let clock = EpochClock::new(epoch_ns).expect("epoch length");
        let (link, writer) = EpochLink::new(4, clock, move || template.clone());
        let pipeline = Pipeline::new(packet, writer, set.new_carry(), OverrunPolicy::Skip);
        let mut w = Self {
            pipeline,
            link,
            staged: StagedBurst::new(),
            frames: syn_udp_mix_64(4096),
            next_frame: 0,
            next_stamp: 0,
            ts_ns: 1_700_000_000_000_000_000,
            round: 0,
            rda_seen: 0,
            rda_duplicates: 0,
            control_time: Duration::ZERO,
            control_packets: 0,
            settle_time: Duration::ZERO,
            ns_per_packet: Vec::new(),
            timed_allocations: 0,
        };
        w.stamp_next_burst();
        w
    }

    /// The worker's part: `PACKETS_PER_ITER` packets in bursts, each frame made distinct first.
    fn run(&mut self) {
        let n = self.frames.len();
        for _ in 0..PACKETS_PER_ITER / BURST {
            // The next burst's stores drain (and bring its frames into the cache) while this
            // one is processed.
            self.stamp_next_burst();
            self.staged.clear();
            for _ in 0..BURST {
                let frame = &self.frames[self.next_frame];
                self.next_frame = if self.next_frame + 1 == n { 0 } else { self.next_frame + 1 };
                self.pipeline.stage(&mut self.staged, black_box(frame), self.ts_ns, 0, &mut prefetch);
                self.ts_ns += GAP_NS;
            }
            self.pipeline.apply(0, &self.staged, &mut |_| false);
        }
    }

    /// Makes the next burst's frames new packets: the round number goes into their IPv4
    /// identification (distinct for 2^16 rounds of the frames, 2^31 packets, more than a run
    /// makes). Done one burst ahead, as a NIC writes frames before the worker reads them:
    /// written right before parsing, the parser's wider loads would wait for these stores;
    /// written after a burst, their misses would be paid on their own.
    fn stamp_next_burst(&mut self) {
        let n = self.frames.len();
        for _ in 0..BURST {
            let frame = &mut self.frames[self.next_stamp];
            frame[IPV4_IDENT..IPV4_IDENT + 2].copy_from_slice(&self.round.to_be_bytes());
            self.next_stamp += 1;
            if self.next_stamp == n {
                self.next_stamp = 0;
                self.round = self.round.wrapping_add(1);
            }
        }
    }

    /// The control thread's part: return every filled buffer, zeroed.
    fn drain(&mut self) {
        while let Some(f) = self.link.pop_full() {
            let mut b = f.buffer;
            // What the control thread's merge does with RDA's log (outside the timing too).
            if let Some(rda) = &mut b.direction_mut(Direction::Forward).rda {
                let settling = Instant::now();
                rda.settle();
                self.settle_time += settling.elapsed();
                self.rda_seen += rda.counters().seen;
                self.rda_duplicates += rda.counters().duplicates;
            }
            b.reset();
            assert!(self.link.push_free(b).is_ok(), "ring full");
        }
    }
}

/// What one run measured besides criterion's own figures (module docs).
struct Figures {
    name: String,
    ns_per_packet: f64,
    epoch_bytes: usize,
    worker_bytes: usize,
    control_ns_per_packet: f64,
    timed_allocations: usize,
}

fn bench_set(
    c: &mut Criterion,
    name: &str,
    set: &SynopsisSet,
    packet: &wirelat_dataplane::packet::PacketConfig,
    epoch_ns: u64,
) -> Figures {
    let live = || LIVE.load(Ordering::Relaxed);
    let before = live();
    let epoch_bytes = EpochSynopses::new(set).map(|_b| live() - before).unwrap_or(0);
    let before = live();
    let mut w = Worker::new(set, packet.clone(), epoch_ns);
    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Elements(PACKETS_PER_ITER as u64));
    g.sample_size(10);
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut t = Duration::ZERO;
            for _ in 0..iters {
                let allocs = ALLOCS.load(Ordering::Relaxed);
                let start = Instant::now();
                w.run();
                let elapsed = start.elapsed();
                w.timed_allocations += ALLOCS.load(Ordering::Relaxed) - allocs;
                t += elapsed;
                w.ns_per_packet.push(elapsed.as_nanos() as f64 / PACKETS_PER_ITER as f64);
                let control = Instant::now();
                w.drain();
                w.control_time += control.elapsed();
                w.control_packets += PACKETS_PER_ITER as u64;
            }
            t
        })
    });
    g.finish();
    let s = w.pipeline.snapshot();
    assert_eq!(s.overrun_epochs, 0, "the bench must not skip epochs");
    assert_eq!(s.measured, s.frames, "every frame is measured");
    // Not a criterion figure: what the control thread spends per packet on the same epochs.
    let per_packet = |t: Duration| t.as_nanos() as f64 / w.control_packets.max(1) as f64;
    eprintln!(
        "pipeline/{name}: control side (RDA's log filed, buffer zeroed) {:.1} ns per packet, of which filing RDA's log {:.1}",
        per_packet(w.control_time),
        per_packet(w.settle_time)
    );
    assert_eq!(w.rda_duplicates, 0, "every packet is distinct ({} seen by RDA)", w.rda_seen);
    let worker_bytes = live().saturating_sub(before);
    let control_ns_per_packet = per_packet(w.control_time);
    let mut v = std::mem::take(&mut w.ns_per_packet);
    v.sort_by(f64::total_cmp);
    Figures {
        name: name.to_owned(),
        ns_per_packet: v.get(v.len() / 2).copied().unwrap_or(f64::NAN),
        epoch_bytes,
        worker_bytes,
        control_ns_per_packet,
        timed_allocations: w.timed_allocations,
    }
}

fn bench(c: &mut Criterion) {
    let (set, packet, epoch_ns) = measure_trace_config();
    let mut figures = vec![bench_set(c, "all_five_64B", &set, &packet, epoch_ns)];
    let layer = bench_set(c, "packet_layer_only_64B", &SynopsisSet::default(), &packet, epoch_ns);
    // Each synopsis alone (`BENCH_PIPELINE_EACH=0` skips): its cost is its time above
    // `packet_layer_only`.
    if std::env::var("BENCH_PIPELINE_EACH").as_deref() != Ok("0") {
        for kind in SynopsisKind::ALL {
            if set.enables(kind) {
                let mut one = set.clone();
                one.retain(|k| k == kind);
                figures.push(bench_set(c, &format!("{}_only_64B", kind.name()), &one, &packet, epoch_ns));
            }
        }
    }
    // The lines scripts/size-curve.sh reads; a run criterion filtered out shows NaN.
    let factor = size_factor();
    for f in std::iter::once(&layer).chain(&figures) {
        eprintln!(
            "pipeline-size|{}|factor={factor}|ns_per_packet={:.1}|above_packet_layer={:.1}|epoch_bytes={}|worker_bytes={}|worker_bytes_above_packet_layer={}|control_ns_per_packet={:.1}|timed_allocations={}",
            f.name,
            f.ns_per_packet,
            f.ns_per_packet - layer.ns_per_packet,
            f.epoch_bytes,
            f.worker_bytes,
            f.worker_bytes.saturating_sub(layer.worker_bytes),
            f.control_ns_per_packet,
            f.timed_allocations,
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
