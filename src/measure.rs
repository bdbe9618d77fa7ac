//! What `wirelat run` and `wirelat offline` share around the pipeline: the start-up log of the
//! measurement configuration (every synopsis fingerprint), the local sinks and the publisher,
//! and the epoch buffers' template.

use anyhow::Context;
use tracing::info;
use wirelat_control::config::Config;
use wirelat_control::local_sink::{BodyDumpSink, JsonLinesSink};
use wirelat_control::publish::Publisher;
use wirelat_control::ship::NetworkSink;
use wirelat_control::sink::{EpochSink, RouteSink};
use wirelat_dataplane::pipeline::Boards;
use wirelat_dataplane::pipeline::EpochSynopses;
use wirelat_dataplane::synopsis::estimate::{Estimate, Measured};
use wirelat_dataplane::synopsis::lds::flows::ENTRY_BYTES as FLOW_ENTRY_BYTES;
use wirelat_dataplane::synopsis::rda::log::ENTRY_BYTES as PACKET_ENTRY_BYTES;

/// Logs what will be measured: point, segments, epochs, clock, overrun policy and the
/// fingerprint of every enabled synopsis (operators compare them between the two points).
pub fn log_measurement(config: &Config, mode: &str) {
    let ids = config.point_ids();
    let synopses = config.synopses_config();
    let packet = config.packet_config();
    info!(
        mode,
        point = ids.point,
        forward_segment = ids.forward_segment,
        reverse_segment = ids.reverse_segment,
        epoch_ms = *config.epochs.length_ms.get_ref(),
        ring = *config.epochs.ring.get_ref(),
        overrun = ?config.epochs.overrun,
        identity_seed = packet.identity_seed,
        payload_prefix_bytes = packet.payload_prefix_bytes,
        packet_identity = format!("{:#018x}", packet.identity_fingerprint()),
        "measurement"
    );
    if synopses.is_empty() {
        info!("no [synopses.*] table: forwarding only, nothing is measured");
    }
    for (kind, fingerprint) in synopses.fingerprints(&packet) {
        info!(synopsis = %kind, fingerprint = format!("{fingerprint:#018x}"), "synopsis enabled");
    }
}

/// The logs a measurement reserves up front, in bytes, for `workers` workers: every worker's
/// ring of `[epochs] ring` buffers holds, per direction, RDA's packet log reserved for
/// `cache_capacity` packets (`RdaConfig::log_bytes`) and LDS's flow log reserved for
/// `flow_capacity` flows (`LdsConfig::flow_log_bytes`); and the merged epoch of each direction
/// RDA's cache (a table, or the appended log and the sorted run)
/// ([`RdaConfig::shard_bytes`](wirelat_dataplane::synopsis::rda::RdaConfig::shard_bytes)).
/// `wirelat run`'s workers write every page of the logs when they build their rings, so all of
/// it is resident from the start. The synopses' fixed tables are small beside it (see
/// docs/*.md) and left out, so this is a lower bound of what the configuration needs.
pub fn reserved_log_bytes(config: &Config, workers: usize) -> u64 {
    let set = config.synopsis_set();
    let rda_log = set.rda.as_ref().map_or(0, |r| r.log_bytes());
    let lds_log = set.lds.as_ref().map_or(0, |l| l.flow_log_bytes());
    let ring = *config.epochs.ring.get_ref() as u64;
    let logs = (workers as u64)
        .saturating_mul(ring)
        .saturating_mul(2)
        .saturating_mul(rda_log.saturating_add(lds_log));
    logs.saturating_add(set.rda.as_ref().map_or(0, |r| r.shard_bytes().saturating_mul(2)))
}

/// Refuses, before anything is allocated, a configuration whose reserved logs alone
/// ([`reserved_log_bytes`]) exceed this machine's memory and swap (`/proc/meminfo`): it would
/// abort on allocation. The error (bad input, exit 2) gives both figures and the keys to change.
pub fn check_memory(config: &Config, workers: usize) -> anyhow::Result<()> {
    let need = reserved_log_bytes(config, workers);
    let Some(have) = memory_and_swap_bytes() else { return Ok(()) };
    if need > have {
        let set = config.synopsis_set();
        return Err(crate::offline::BadInput(format!(
            "the workers' reserved logs alone need {} MiB ({workers} workers × [epochs] ring {} × 2 directions × \
             ([synopses.rda] cache_capacity {} × {PACKET_ENTRY_BYTES} B + [synopses.lds] flow_capacity {} × {FLOW_ENTRY_BYTES} B), \
             plus RDA's merged caches) but this machine has {} MiB of memory and swap: lower cache_capacity, \
             flow_capacity, ring or the worker count",
            need >> 20,
            config.epochs.ring.get_ref(),
            set.rda.as_ref().map_or(0, |r| r.cache_capacity),
            set.lds.as_ref().map_or(0, |l| l.flow_capacity),
            have >> 20
        ))
        .into());
    }
    Ok(())
}

/// MemTotal + SwapTotal from `/proc/meminfo`, in bytes (`None` where it cannot be read).
fn memory_and_swap_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = |key: &str| -> Option<u64> {
        text.lines().find_map(|l| l.strip_prefix(key)?.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some(kib("MemTotal:")?.saturating_add(kib("SwapTotal:").unwrap_or(0)).saturating_mul(1024))
}

/// A zeroed epoch buffer for the configured synopses (validated by the config loader already;
/// an error here names the synopsis).
pub fn epoch_template(config: &Config) -> anyhow::Result<EpochSynopses> {
    let template = EpochSynopses::new(&config.synopsis_set()).context("cannot build the synopses")?;
    Ok(if config.epochs.worker_filing {
        template.with_worker_filing(std::sync::Arc::new(Boards::default()))
    } else {
        template
    })
}

/// The sinks of `[output]` and `[ship]` (the network sink to the peer, whose shipper thread
/// starts here: before the EAL, so a bad key file or spill directory stops the run early) and
/// the publisher over them. With `backpressure` (offline: the input can wait) a full queue to
/// the peer holds the run back instead of giving epochs up ([`NetworkSink::with_backpressure`]).
pub fn publisher(config: &Config, backpressure: bool) -> anyhow::Result<Publisher> {
    let mut sinks: Vec<Box<dyn EpochSink>> = Vec::new();
    if let Some(json) = &config.output.json {
        let sink =
            JsonLinesSink::create(json).with_context(|| format!("cannot open the JSON output {json}"))?;
        sinks.push(Box::new(sink));
    }
    if let Some(dir) = &config.output.dump_dir {
        let sink = BodyDumpSink::create(dir)
            .with_context(|| format!("cannot create the dump directory {}", dir.display()))?;
        sinks.push(Box::new(sink));
    }
    if let Some(ship) = config.ship_config() {
        let sink = NetworkSink::new(
            config.point_ids().point,
            &config.synopses_config(),
            &config.packet_config(),
            ship.clone(),
        )
        .with_context(|| format!("cannot set up shipping to the peer {}", ship.peer))?;
        let sink = if backpressure { sink.with_backpressure() } else { sink };
        info!(peer = %ship.peer, spill_dir = ?ship.spill_dir, "shipping epochs to the peer");
        sinks.push(Box::new(sink));
    }
    for route in &config.routes {
        let route = route.get_ref().clone();
        let sink = NetworkSink::new(
            config.point_ids().point,
            &config.synopses_config(),
            &config.packet_config(),
            route.ship.clone(),
        )
        .with_context(|| format!("cannot set up shipping to the [[route]] peer {}", route.ship.peer))?;
        let sink = if backpressure { sink.with_backpressure() } else { sink };
        info!(peer = %route.ship.peer, segments = ?route.segments, fridge = route.fridge, "shipping a route's epochs");
        sinks.push(Box::new(RouteSink::new(sink, move |segment| route.owns(segment))));
    }
    Publisher::new(
        config.point_ids(),
        config.epochs.length_ns(),
        &config.synopsis_set(),
        &config.packet_config(),
        config.output.colate_archive.as_deref(),
        sinks,
    )
    .context("cannot set up the epoch outputs")
}

/// At the end of a run: the fridge's distributions over the whole run, as one JSON line on
/// stdout (`{"whole_run_fridge": {"epochs": N, "report": …}}`, the per-epoch report's shape)
/// and one log line per exchange kind. Nothing without a fridge or without epochs.
pub fn report_whole_run(publisher: &Publisher) {
    let Some(report) = publisher.whole_run_fridge() else { return };
    let value = |m: &Measured<Estimate>| m.as_ref().ok().map(|e| e.value);
    for k in &report.kinds {
        let d = &k.all;
        info!(
            kind = ?k.kind,
            samples = d.samples,
            p50_ns = ?value(&d.p50_ns),
            p90_ns = ?value(&d.p90_ns),
            p95_ns = ?value(&d.p95_ns),
            p99_ns = ?value(&d.p99_ns),
            "whole-run fridge"
        );
    }
    let line = serde_json::json!({ "whole_run_fridge": { "epochs": publisher.counters().epochs, "report": report } });
    println!("{line}");
}

/// After [`Publisher::finish`]: the one sentence saying what the sinks lost, logged as an
/// error, or `None` when every epoch reached every output.
pub fn losses(publisher: &Publisher) -> Option<String> {
    let summary = wirelat_control::sink::loss_summary(&publisher.losses())?;
    tracing::error!(summary = %summary, "epochs lost");
    Some(summary)
}
