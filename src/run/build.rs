//! The workers' pipelines, each built on its own worker lcore before any port starts.
//!
//! A worker's pipeline holds its epoch ring (every buffer's synopses, with the reserved logs
//! written once so that no page fault waits on the data path; `Synopsis::back_reserved`) and its
//! carry. Built on the worker's lcore, its pages are first touched there and the kernel places
//! them on that lcore's NUMA node. Built before the ports start, the build's time (up to about
//! half a second here at the sizes of `configs/measure-trace.toml`) is not spent with a started
//! port whose rx ring nobody polls: a NIC shows its link down until then instead of taking
//! frames it must drop.

use std::sync::Mutex;
use std::time::Instant;

use anyhow::{Context, bail};
use tracing::info;
use wirelat_control::config::Config;
use wirelat_dataplane::dpdk::{Eal, LcoreJob};
use wirelat_dataplane::epoch::PendingWriter;
use wirelat_dataplane::pipeline::{EpochSynopses, Pipeline};

/// Builds one pipeline per worker lcore, `pending[q]`'s ring on `lcores[q]`, each buffer a
/// backed clone of `template`, and waits for all of them. Fails if a build did not finish (its
/// lcore failed or panicked).
pub(super) fn build_pipelines(
    eal: &Eal,
    lcores: &[u32],
    pending: Vec<PendingWriter<EpochSynopses>>,
    template: &EpochSynopses,
    config: &Config,
) -> anyhow::Result<Vec<Pipeline>> {
    let split = config.direction_split().context("[monitor] inside")?;
    let set = config.synopsis_set();
    let slots: Vec<Mutex<Option<Pipeline>>> = pending.iter().map(|_| Mutex::new(None)).collect();
    let mut jobs = Vec::with_capacity(pending.len());
    for ((q, writer), (&lcore, slot)) in pending.into_iter().enumerate().zip(lcores.iter().zip(&slots)) {
        let (packet_config, overrun, split, set) =
            (config.packet_config(), config.epochs.overrun, split.clone(), set.clone());
        jobs.push(LcoreJob {
            lcore,
            job: Box::new(move || {
                let started = Instant::now();
                let writer = writer.build(|| {
                    let mut buffer = template.clone();
                    buffer.back_reserved();
                    buffer
                });
                let pipeline =
                    Pipeline::new(packet_config, writer, set.new_carry(), overrun).with_split(split);
                info!(
                    queue = q,
                    lcore = Eal::current_lcore(),
                    seconds = started.elapsed().as_secs_f64(),
                    "worker built its epoch buffers"
                );
                // A poisoned slot cannot happen (each job holds its own); report it as a failure.
                match slot.lock() {
                    Ok(mut s) => {
                        *s = Some(pipeline);
                        0
                    }
                    Err(_) => 1,
                }
            }),
        });
    }
    let ((), outcomes) = eal.run_on_lcores(jobs, || ())?;
    if let Some(o) = outcomes.iter().find(|o| o.status != 0) {
        bail!("worker lcore {} failed while building its epoch buffers (status {})", o.lcore, o.status);
    }
    let mut pipelines = Vec::with_capacity(slots.len());
    for (q, slot) in slots.into_iter().enumerate() {
        let built = slot.into_inner().ok().flatten();
        let Some(pipeline) = built else { bail!("worker {q} returned without building its epoch buffers") };
        pipelines.push(pipeline);
    }
    Ok(pipelines)
}
