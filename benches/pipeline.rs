//! The measuring pipeline's own cost per packet, without DPDK: what one worker spends on a
//! received burst between rx and tx (`Pipeline::stage` for every frame, the burst-wide
//! `Pipeline::prefetch`, then `Pipeline::apply`), with the synopses of
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

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
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

const BURST: usize = 32;
const PACKETS_PER_ITER: usize = 1 << 20;
const GAP_NS: u64 = 100;
/// Offset of the IPv4 identification in an untagged frame.
const IPV4_IDENT: usize = 14 + 4;

fn measure_trace_config() -> (SynopsisSet, wirelat_dataplane::packet::PacketConfig, u64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/measure-trace.toml");
    let text = std::fs::read_to_string(&path).expect("configs/measure-trace.toml");
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
                self.pipeline.stage(&mut self.staged, black_box(frame), self.ts_ns);
                self.ts_ns += GAP_NS;
            }
            self.pipeline.prefetch(&mut self.staged, 0, prefetch);
            self.pipeline.apply(0, &self.staged, &mut || false);
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

fn bench_set(
    c: &mut Criterion,
    name: &str,
    set: &SynopsisSet,
    packet: &wirelat_dataplane::packet::PacketConfig,
    epoch_ns: u64,
) {
    let mut w = Worker::new(set, packet.clone(), epoch_ns);
    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Elements(PACKETS_PER_ITER as u64));
    g.sample_size(10);
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut t = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                w.run();
                t += start.elapsed();
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
}

fn bench(c: &mut Criterion) {
    let (set, packet, epoch_ns) = measure_trace_config();
    bench_set(c, "all_five_64B", &set, &packet, epoch_ns);
    bench_set(c, "packet_layer_only_64B", &SynopsisSet::default(), &packet, epoch_ns);
    // Each synopsis alone (`BENCH_PIPELINE_EACH=0` skips): its cost is its time above
    // `packet_layer_only`.
    if std::env::var("BENCH_PIPELINE_EACH").as_deref() != Ok("0") {
        for kind in SynopsisKind::ALL {
            if set.enables(kind) {
                let mut one = set.clone();
                one.retain(|k| k == kind);
                bench_set(c, &format!("{}_only_64B", kind.name()), &one, &packet, epoch_ns);
            }
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
