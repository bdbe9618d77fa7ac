//! What `wirelat run` and `wirelat offline` share around the pipeline: the start-up log of the
//! measurement configuration (every synopsis fingerprint), the local sinks and the publisher,
//! and the epoch buffers' template.

use anyhow::Context;
use tracing::info;
use wirelat_control::config::Config;
use wirelat_control::local_sink::{BodyDumpSink, JsonLinesSink};
use wirelat_control::publish::Publisher;
use wirelat_control::ship::NetworkSink;
use wirelat_control::sink::EpochSink;
use wirelat_dataplane::pipeline::EpochSynopses;
use wirelat_dataplane::synopsis::estimate::{Estimate, Measured};

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

/// A zeroed epoch buffer for the configured synopses (validated by the config loader already;
/// an error here names the synopsis).
pub fn epoch_template(config: &Config) -> anyhow::Result<EpochSynopses> {
    EpochSynopses::new(&config.synopsis_set()).context("cannot build the synopses")
}

/// The sinks of `[output]` and `[ship]` (the network sink to the peer, whose shipper thread
/// starts here: before the EAL, so a bad key file or spill directory stops the run early) and
/// the publisher over them.
pub fn publisher(config: &Config) -> anyhow::Result<Publisher> {
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
        info!(peer = %ship.peer, spill_dir = ?ship.spill_dir, "shipping epochs to the peer");
        sinks.push(Box::new(sink));
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
