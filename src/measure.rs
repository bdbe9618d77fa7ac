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

/// After [`Publisher::finish`]: the one sentence saying what the sinks lost, logged as an
/// error, or `None` when every epoch reached every output.
pub fn losses(publisher: &Publisher) -> Option<String> {
    let summary = wirelat_control::sink::loss_summary(&publisher.losses())?;
    tracing::error!(summary = %summary, "epochs lost");
    Some(summary)
}
