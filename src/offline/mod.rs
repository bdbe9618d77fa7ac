//! `wirelat offline`: the appliance's measurement without DPDK. Reads the pcap of port 0 (and of
//! port 1) with a pure-Rust reader, merges the two ports' packets by timestamp, hands each to one
//! of N emulated workers by the steering rule ([`steer::worker_of`], the same rule the tests use
//! to split a trace over the appliance's queues), and runs the same pipeline, harvester,
//! publisher and sinks as `wirelat run`.
//!
//! Differences from the appliance, by design: nothing is forwarded; no epoch is ever lost (the
//! overrun policy is always `wait`: the harvest runs in this thread; a `[ship]` queue that is
//! full waits for the peer's acknowledgements, and the run exits non-zero naming every epoch
//! synopsis the sinks still gave up); with `[clock] source =
//! "trace"` timestamps are truncated to whole microseconds exactly like DPDK 22.11's pcap device,
//! so a replay through the appliance measures the same values; with any other clock the pcap's
//! own resolution is kept. Each pcap must be in capture order (as written by a capture tool or
//! the trace generator): ports are merged, not sorted (equal timestamps: port 0 first).
//!
//! Two options serve benchmarks of the control thread ([`Options`]): with [`Load::Replicas`]
//! every worker gets its own copy of the whole trace instead of a share of it ([`replica`]), N
//! workers at the trace's full rate each; `loops` replays the trace that many times, each pass
//! shifted by whole epochs past the last, so a short trace measures a long run's steady state
//! rather than its first epochs (whose buffers are still growing and faulting in).

mod replica;

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use pcap_file::TsResolution;
use pcap_file::pcap::PcapReader;
use tracing::{info, warn};
use wirelat_control::config::{ClockSource, Config};
use wirelat_control::epoch::Harvester;
use wirelat_control::publish::Publisher;
use wirelat_dataplane::epoch::{EpochClock, EpochLink};
use wirelat_dataplane::pipeline::{
    CounterSnapshot, EpochSynopses, FilingCounts, OverrunPolicy, Pipeline, steer,
};

use crate::measure;

/// Harvest this often (in packets) besides whenever a worker waits for a buffer.
const HARVEST_EVERY: u64 = 4096;

/// Each emulated worker files a chunk of a shared RDA filing this often (in packets): about a
/// burst. (The appliance's workers take one on each idle poll; an emulated worker has none.)
const HELP_EVERY: u64 = 32;

/// How an offline run drives its emulated workers.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Emulated workers, 1..=127.
    pub workers: usize,
    /// How the packets reach them.
    pub load: Load,
    /// Passes over the trace (at least 1); pass k's timestamps are shifted by k times the
    /// trace's span rounded up to whole epochs, so every pass starts at the same point of an
    /// epoch and no two passes share an epoch.
    pub loops: u64,
}

/// The earliest and latest timestamp of the first pass.
#[derive(Debug, Clone, Copy)]
struct Span {
    first_ns: u64,
    last_ns: u64,
}

impl Span {
    /// Widened to hold `ts_ns`.
    fn with(span: Option<Span>, ts_ns: u64) -> Span {
        span.map_or(Span { first_ns: ts_ns, last_ns: ts_ns }, |s| Span {
            first_ns: s.first_ns.min(ts_ns),
            last_ns: s.last_ns.max(ts_ns),
        })
    }

    /// How far each pass is shifted past the previous one: the epochs from the one holding the
    /// first timestamp to the one holding the last, in ns.
    fn period_ns(&self, epoch_ns: u64) -> u64 {
        let e = epoch_ns.max(1);
        (self.last_ns / e + 1).saturating_sub(self.first_ns / e).saturating_mul(e)
    }
}

/// How the trace's packets reach the emulated workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Load {
    /// Each packet goes to one worker, by the steering rule (the NIC's symmetric RSS): N
    /// workers share the trace's rate.
    #[default]
    Split,
    /// Every worker gets its own copy of every packet, its addresses offset per worker
    /// ([`replica`]): N workers carry N times the trace's rate.
    Replicas,
}

/// What an offline run did.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfflineSummary {
    /// Frames read per port.
    pub frames: [u64; 2],
    /// Counters summed over the emulated workers.
    pub counters: CounterSnapshot,
    /// Merged epochs published.
    pub epochs: u64,
    /// Messages handed to the sinks.
    pub messages: u64,
    /// Time the control thread's work took: harvesting (merging the workers' shards, which
    /// files RDA's logs) and publishing (encoding, sinks). What `wirelat run`'s control thread
    /// does per epoch, here timed in this one thread.
    pub control: ControlTime,
    /// [`Load::Replicas`]: frames given unchanged to a worker other than the first, for want of
    /// an IP header to offset (ARP, and IP inside tunnels); those the packet layer measures
    /// repeat their ids across workers.
    pub replicas_unchanged: u64,
}

/// Wall-clock time of the control thread's work during an offline run.
#[derive(Debug, Clone, Copy, Default)]
pub struct ControlTime {
    /// Harvest polls in total, publishing included, ns.
    pub harvest_ns: u64,
    /// Of which publishing (encodes, sinks), ns.
    pub publish_ns: u64,
    /// Not in `harvest_ns`: the emulated workers' share of RDA's filing (chunks they filed
    /// between packets, [`Pipeline::help_filing`]), ns. Worker time in `wirelat run`.
    pub workers_filing_ns: u64,
}

/// An input the operator gave cannot be used (exit code 2): one sentence naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Streams the records of one pcap: (timestamp in ns, frame).
struct PcapStream {
    reader: PcapReader<BufReader<File>>,
    nano: bool,
    path: PathBuf,
    index: u64,
}

impl PcapStream {
    fn open(path: &Path) -> anyhow::Result<Self> {
        let bad = |why: String| anyhow::Error::new(BadInput(why));
        let f = File::open(path).map_err(|e| bad(format!("cannot open {}: {e}", path.display())))?;
        let reader = PcapReader::new(BufReader::new(f)).map_err(|e| match e {
            // The OS error, not pcap-file's "Error reading bytes" (a directory, a FIFO, EIO).
            pcap_file::PcapError::IoError(io) if io.kind() != std::io::ErrorKind::UnexpectedEof => {
                bad(format!("cannot read {}: {io}", path.display()))
            }
            e => bad(format!("{} is not a pcap file ({e}); pcapng is not supported", path.display())),
        })?;
        crate::pcap_input::require_ethernet(reader.header().datalink, path)?;
        let nano = reader.header().ts_resolution == TsResolution::NanoSecond;
        Ok(Self { reader, nano, path: path.to_owned(), index: 0 })
    }

    fn next(&mut self) -> anyhow::Result<Option<(u64, Vec<u8>)>> {
        let Some(raw) = self.reader.next_raw_packet() else { return Ok(None) };
        let raw = raw.map_err(|e| anyhow::anyhow!("{}: record {}: {e}", self.path.display(), self.index))?;
        let frac = u64::from(raw.ts_frac);
        let frac_ns = if self.nano { frac } else { frac.saturating_mul(1000) };
        if frac_ns >= 1_000_000_000 {
            bail!("{}: record {}: sub-second part {frac} out of range", self.path.display(), self.index);
        }
        self.index += 1;
        Ok(Some((u64::from(raw.ts_sec) * 1_000_000_000 + frac_ns, raw.data.into_owned())))
    }
}

/// Runs the measurement over the pcaps with `workers` emulated workers.
pub fn run(
    config: &Config,
    port0: &Path,
    port1: Option<&Path>,
    opts: &Options,
) -> anyhow::Result<OfflineSummary> {
    let Options { workers, load, loops } = *opts;
    if workers == 0 || workers > 127 {
        return Err(BadInput(format!("--workers {workers} is outside 1..=127")).into());
    }
    if loops == 0 {
        return Err(BadInput("--loops 0: at least one pass over the trace".into()).into());
    }
    measure::log_measurement(config, "offline");
    // `kernel` times reach `run` in whole µs as `trace` times do: truncate alike.
    let trace_clock = matches!(config.clock.source, ClockSource::Trace | ClockSource::Kernel);
    info!(
        clock = config.clock.source.name(),
        microsecond_truncation = trace_clock,
        workers,
        replicas = load == Load::Replicas,
        loops,
        "offline clock: pcap record time"
    );
    measure::check_memory(config, workers)?;
    let template = measure::epoch_template(config)?;
    let set = config.synopsis_set();
    let clock = EpochClock::new(config.epochs.length_ns()).context("epoch length is 0")?;
    let split = config.direction_split().context("[monitor] inside")?;
    let mut links = Vec::with_capacity(workers);
    let mut pipelines = Vec::with_capacity(workers);
    for _ in 0..workers {
        let t = template.clone();
        let (link, writer) = EpochLink::new(*config.epochs.ring.get_ref(), clock, move || t.clone());
        links.push(link);
        pipelines.push(
            Pipeline::new(config.packet_config(), writer, set.new_carry(), OverrunPolicy::Wait)
                .with_split(split.clone()),
        );
    }
    // The emulated workers go on filing after they finished, as a running appliance's would.
    let mut harvester = Harvester::new(links, move || template.clone()).with_helpers_after_finish();
    let mut publisher = measure::publisher(config, true)?;
    let exposed = crate::point_metrics::Exposed::start(config, "offline")?;
    let record =
        |summary: &OfflineSummary, pipelines: &[Pipeline], h: &Harvester<EpochSynopses>, p: &Publisher| {
            if exposed.metrics().is_none() {
                return;
            }
            let mut counters = CounterSnapshot::default();
            for pipeline in pipelines {
                counters.add(&pipeline.snapshot());
            }
            exposed.record_measure(&counters);
            exposed.record_harvest(&h.counters(), h.overrun_epochs());
            exposed.record_publisher(p);
            if let Some(m) = exposed.metrics() {
                for (port, n) in summary.frames.iter().enumerate() {
                    let port = port.to_string();
                    m.set("wirelat_port_rx_frames", &[("port", &port)], *n);
                    // Nothing is forwarded offline, so nothing is dropped: zeros keep the
                    // families (and the dashboard's panels) the same as an appliance's.
                    for reason in ["tx_full", "oversize", "truncated"] {
                        m.set("wirelat_port_dropped_frames", &[("port", &port), ("reason", reason)], 0);
                    }
                }
            }
        };

    let open = || -> anyhow::Result<_> {
        let mut streams = [Some(PcapStream::open(port0)?), port1.map(PcapStream::open).transpose()?];
        let mut heads: [Option<(u64, Vec<u8>)>; 2] = [None, None];
        for (head, stream) in heads.iter_mut().zip(streams.iter_mut()) {
            if let Some(s) = stream {
                *head = s.next()?;
            }
        }
        Ok((streams, heads))
    };
    let (mut streams, mut heads) = open()?;
    let mut summary = OfflineSummary::default();
    let mut failure: Option<anyhow::Error> = None;
    let mut packets: u64 = 0;
    let (mut pass, mut span, mut shift_ns) = (0u64, None::<Span>, 0u64);
    loop {
        let port = match (&heads[0], &heads[1]) {
            (None, None) => {
                pass += 1;
                if pass >= loops {
                    break;
                }
                let period_ns = span.map_or(0, |s| s.period_ns(config.epochs.length_ns()));
                shift_ns = pass.saturating_mul(period_ns);
                (streams, heads) = open()?;
                if heads.iter().all(Option::is_none) {
                    break;
                }
                continue;
            }
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (Some((t0, _)), Some((t1, _))) => usize::from(t0 > t1),
        };
        let Some((ts_ns, frame)) = heads[port].take() else { break };
        heads[port] = match &mut streams[port] {
            Some(s) => s.next()?,
            None => None,
        };
        summary.frames[port] += 1;
        if pass == 0 {
            span = Some(Span::with(span, ts_ns));
        }
        let ts_ns = ts_ns.saturating_add(shift_ns);
        let ts_ns = if trace_clock { ts_ns / 1000 * 1000 } else { ts_ns };
        let mut wait = || {
            harvest(&mut harvester, &mut publisher, &mut failure, &mut summary.control);
            failure.is_none()
        };
        match load {
            Load::Split => {
                let w = steer::worker_of(&frame, workers);
                let Some(pipeline) = pipelines.get_mut(w) else { continue };
                pipeline.process(port, &frame, ts_ns, &mut wait);
            }
            Load::Replicas => {
                for (w, pipeline) in pipelines.iter_mut().enumerate() {
                    let copy = if w == 0 { None } else { replica::copy_for(&frame, w) };
                    summary.replicas_unchanged += u64::from(w > 0 && copy.is_none());
                    pipeline.process(port, copy.as_deref().unwrap_or(&frame), ts_ns, &mut wait);
                }
            }
        }
        packets += 1;
        if packets.is_multiple_of(HELP_EVERY) {
            help_filing(&mut pipelines, false, &mut summary.control);
        }
        if packets.is_multiple_of(HARVEST_EVERY) {
            // Idle workers follow the trace time, so epochs are emitted as the trace goes.
            for p in &mut pipelines {
                p.tick(ts_ns);
            }
            harvest(&mut harvester, &mut publisher, &mut failure, &mut summary.control);
            record(&summary, &pipelines, &harvester, &publisher);
        }
        if let Some(e) = failure.take() {
            return Err(e);
        }
    }
    for p in &mut pipelines {
        p.finish();
        summary.counters.add(&p.snapshot());
    }
    while !harvester.done() {
        help_filing(&mut pipelines, true, &mut summary.control);
        harvest(&mut harvester, &mut publisher, &mut failure, &mut summary.control);
        if let Some(e) = failure.take() {
            return Err(e);
        }
    }
    if let Err(e) = publisher.finish() {
        warn!(error = %e, "closing the outputs");
    }
    measure::report_whole_run(&publisher);
    let c = publisher.counters();
    summary.epochs = c.epochs;
    summary.messages = c.messages;
    info!(
        frames_port0 = summary.frames[0],
        frames_port1 = summary.frames[1],
        measured = summary.counters.measured,
        skipped = summary.counters.skipped(),
        late = summary.counters.late,
        split_neither = summary.counters.split_neither,
        split_both = summary.counters.split_both,
        epochs = c.epochs,
        messages = c.messages,
        body_bytes = c.body_bytes,
        colate_epochs = c.colate_epochs,
        "offline run finished"
    );
    let filing = harvester.accumulators().fold(FilingCounts::default(), |mut sum, acc| {
        sum.add_from(&acc.filing_counts());
        sum
    });
    let declined: u64 = pipelines.iter().map(Pipeline::filing_declined).sum();
    if filing.lent > 0 {
        info!(
            lent = filing.lent,
            chunks_by_workers = filing.by_workers,
            chunks_by_control = filing.by_control,
            chunks_declined = declined,
            pairs_moved = filing.moved,
            "RDA filing shared with the workers (per epoch and direction)"
        );
    }
    if filing.lists_lent > 0 {
        info!(
            lent = filing.lists_lent,
            chunks_by_workers = filing.list_chunks_by_workers,
            chunks_by_control = filing.list_chunks_by_control,
            "LDS flow lists gathered and encoded by the workers (per epoch and direction)"
        );
    }
    let t = summary.control;
    let measured = summary.counters.measured;
    let per_packet =
        |ns: u64| format!("{:.2}", if measured == 0 { 0.0 } else { ns as f64 / measured as f64 });
    info!(
        harvest_ms = t.harvest_ns / 1_000_000,
        publish_ms = t.publish_ns / 1_000_000,
        control_ns_per_packet = per_packet(t.harvest_ns),
        merge_ns_per_packet = per_packet(t.harvest_ns.saturating_sub(t.publish_ns)),
        publish_ns_per_packet = per_packet(t.publish_ns),
        workers_filing_ns_per_packet = per_packet(t.workers_filing_ns),
        workers,
        "control thread work (wall clock, per measured packet)"
    );
    if summary.replicas_unchanged > 0 {
        warn!(
            copies = summary.replicas_unchanged,
            "--replicas: frames without a plain IP header (ARP; tunnels the copies do not open) went to every \
             worker unchanged; those the packet layer measures repeat their ids across workers"
        );
    }
    let lost = measure::losses(&publisher);
    record(&summary, &pipelines, &harvester, &publisher);
    exposed.finish();
    if let Some(lost) = lost {
        bail!("{lost}; see the warnings above for each");
    }
    Ok(summary)
}

/// Emits every epoch all emulated workers have passed. A merge error (two shards of different
/// configurations: a bug) ends the run; publishing errors are logged.
fn harvest(
    h: &mut Harvester<EpochSynopses>,
    publisher: &mut Publisher,
    failure: &mut Option<anyhow::Error>,
    time: &mut ControlTime,
) {
    let started = Instant::now();
    let result = h.poll(|e| {
        let publishing = Instant::now();
        if let Err(err) = publisher.publish(e.epoch, e.merged, e.shards, e.complete) {
            warn!(epoch = e.epoch, error = %err, "publishing an epoch");
        }
        time.publish_ns += elapsed_ns(publishing);
    });
    time.harvest_ns += elapsed_ns(started);
    match result {
        Ok(_) => {
            if let Some(passed) = h.passed() {
                publisher.progress(passed);
            }
        }
        Err(e) => {
            failure.get_or_insert(anyhow::Error::new(e).context("merging worker shards"));
        }
    }
}

/// The emulated workers' share of a shared RDA filing: each files one chunk, or with `drain`
/// every chunk it can; the time goes to `time.workers_filing_ns` when one filed any.
fn help_filing(pipelines: &mut [Pipeline], drain: bool, time: &mut ControlTime) {
    let helping = Instant::now();
    let mut helped = false;
    for p in pipelines {
        while p.help_filing() {
            helped = true;
            if !drain {
                break;
            }
        }
    }
    if helped {
        time.workers_filing_ns += elapsed_ns(helping);
    }
}

fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
