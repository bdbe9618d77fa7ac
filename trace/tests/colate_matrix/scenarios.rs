//! The matrix's scenarios (traffic, delay model, loss, load, m) and the knobs that scale them.

use super::*;

pub(super) struct Scenario {
    pub(super) name: &'static str,
    pub(super) delay: DelaySpec,
    /// A constant shift on every packet (one path), ns.
    pub(super) shift_ns: u64,
    pub(super) loss: LossModel,
    pub(super) pps: f64,
    pub(super) seconds: f64,
    pub(super) epoch_ns: u64,
    /// Counters (rounded up to a prime).
    pub(super) counters: u32,
    pub(super) tick_ns: u64,
    /// B's clock minus true time. Every query uses the default, derived latency floor
    /// (`Segment::new`), never this value: no mean may fall below min(0, offset), the floor
    /// of what the points' clocks can show.
    pub(super) offset_ns: i64,
    /// Consecutive epochs summed into one query group at both points (the collector's
    /// `[colate] windows`); the truth is then over the packets both points put in the group.
    /// 0: the whole run is one group.
    pub(super) group: u64,
    /// m, cells per flow (ignored when `sized`).
    pub(super) cells: u32,
    /// Derive m from the load as an operator would configure it (`[synopses.colate]`
    /// `max_delay_us`, `max_flow_pps`, `expected_loss`, `window_ms`; coverage.rs): the queue's
    /// p99 one-way delay and the p99 flow rate measured on this trace, the scenario's loss rate.
    pub(super) sized: bool,
    /// For the queue: the utilisation the scenario is named for, checked on the trace (bytes
    /// offered at A over the link rate). The generator's TCP conversations are closed-loop:
    /// from a measured ρ ≈ 0.6 the queue holds tens of milliseconds, a quarter of a flow's
    /// packets cross each 100-ms epoch edge in flight, and many flows keep fewer than half
    /// their cells (no mean, with that reason): see docs/colate.md.
    pub(super) load: Option<f64>,
    /// A second path class (share of flows, extra delay ns): flows on one segment whose
    /// latencies differ by path, not only by packet.
    pub(super) second_path: Option<(f64, u64)>,
}

pub(super) fn scenarios() -> Vec<Scenario> {
    let base = |name, delay, loss| Scenario {
        name,
        delay,
        shift_ns: 0,
        loss,
        pps: 35_000.0,
        seconds: 2.0,
        epoch_ns: 100_000_000,
        counters: 262_144,
        tick_ns: 1,
        offset_ns: 0,
        group: 1,
        cells: 20,
        sized: false,
        load: None,
        second_path: None,
    };
    // A gamma-like body (Weibull shape 1.5) shifted by a 30-µs propagation delay: μ ≫ σ.
    let shifted = DelaySpec::Iid(DelayModel::Weibull { shape: 1.5, mean: 20_000.0 });
    // A log-normal body with a second, slower mode (5 %): heavy right tail.
    let lnmix =
        DelaySpec::Iid(DelayModel::Bimodal { low_mean: 30_000.0, high_mean: 600_000.0, p_high: 0.05 });
    let lognormal = DelaySpec::Iid(DelayModel::LogNormal { mu: 40_000f64.ln(), sigma: 0.8 });
    // A FIFO queue of `mbps` behind a 20-µs propagation delay. The generator's TCP
    // conversations are closed-loop, so the utilisation is measured, not set: at 35 000
    // packets/s, 35 Mb/s gives ≈ 0.55, 20 Mb/s ≈ 0.6 and 16 Mb/s ≈ 0.8 (checked per scenario).
    let queue = |mbps: f64| {
        DelaySpec::Queue(QueueModel::Queue {
            service_rate_bps: queue_mbps().unwrap_or(mbps) * 1e6,
            propagation_ns: 20_000,
        })
    };
    vec![
        Scenario { shift_ns: 30_000, ..base("shifted/none/µs-ticks", shifted, LossModel::None) },
        Scenario {
            shift_ns: 30_000,
            ..base("shifted/uniform-2%", shifted, LossModel::Uniform { rate: 0.02 })
        },
        base("lognormal-mix/bursty-5%", lnmix, LossModel::Bursty { rate: 0.05, mean_burst: 8.0 }),
        Scenario {
            load: Some(0.55),
            ..base(
                "queue-ρ0.55/bursty-1%",
                DelaySpec::Queue(QueueModel::Queue {
                    service_rate_bps: 35_000_000.0,
                    propagation_ns: 20_000,
                }),
                LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            )
        },
        Scenario {
            load: Some(0.55),
            ..base(
                "queue-ρ0.55/none",
                DelaySpec::Queue(QueueModel::Queue {
                    service_rate_bps: 35_000_000.0,
                    propagation_ns: 20_000,
                }),
                LossModel::None,
            )
        },
        // A crowded vector: ≈ 0.2 packets per cell, so the foreign correction matters (at ≈ 0.3 the
        // normal 95 % interval covers only 92 %: foreign chunks are not normal).
        Scenario {
            counters: 20_000,
            pps: 40_000.0,
            seconds: 1.0,
            tick_ns: 1_000,
            ..base("lognormal/uniform-0.5%/crowded/µs-ticks", lognormal, LossModel::Uniform { rate: 0.005 })
        },
        Scenario {
            shift_ns: 5_000,
            offset_ns: -15_000,
            ..base("shifted/uniform-1%/clock-15µs", shifted, LossModel::Uniform { rate: 0.01 })
        },
        Scenario {
            shift_ns: 5_000,
            offset_ns: 15_000,
            ..base("shifted/uniform-1%/clock+15µs", shifted, LossModel::Uniform { rate: 0.01 })
        },
        // An offset larger than most latencies: nearly every packet reads negative.
        Scenario {
            offset_ns: -200_000,
            ..base(
                "lognormal/bursty-2%/clock-200µs",
                lognormal,
                LossModel::Bursty { rate: 0.02, mean_burst: 8.0 },
            )
        },
        // Issue 19 (W12, third session): at ρ ≥ 0.6 the queue holds milliseconds, so a flow
        // keeps packets in flight across every 100-ms epoch edge; each lands in one of its m
        // cells at one point only. About m·ln 2 such packets (14 for m = 20) leave fewer than
        // m/2 usable cells and no mean (docs/colate.md). m = 64, or 1-s groups, restore
        // coverage at ρ 0.8.
        Scenario {
            load: Some(0.6),
            ..base("queue-ρ0.6/bursty-1%", queue(24.0), LossModel::Bursty { rate: 0.01, mean_burst: 8.0 })
        },
        Scenario {
            load: Some(0.8),
            cells: 64,
            ..base("queue-ρ0.8/bursty-1%/m64", queue(16.0), LossModel::Bursty { rate: 0.01, mean_burst: 8.0 })
        },
        Scenario {
            load: Some(0.8),
            group: 10,
            ..base(
                "queue-ρ0.8/bursty-1%/1-s groups",
                queue(17.0),
                LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            )
        },
        Scenario {
            load: Some(0.6),
            group: 0,
            ..base(
                "queue-ρ0.6/bursty-1%/whole run",
                queue(20.0),
                LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            )
        },
        // Issue 19 (W12, fourth session): the same busy queues at 100-ms epochs with m derived
        // from the load an operator measures (coverage sizing), with and without a clock offset.
        Scenario {
            load: Some(0.8),
            sized: true,
            ..base(
                "queue-ρ0.8/bursty-1%/sized",
                queue(16.0),
                LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            )
        },
        Scenario {
            load: Some(0.8),
            sized: true,
            offset_ns: -15_000,
            ..base("queue-ρ0.8/uniform-1%/sized/clock-15µs", queue(15.0), LossModel::Uniform { rate: 0.01 })
        },
        // At ρ 0.9 the queue's p99 delay reaches the 100-ms epoch (the sizing refuses a window
        // no longer than the delay), so the sized query groups 10 epochs.
        Scenario {
            load: Some(0.9),
            sized: true,
            group: 10,
            ..base(
                "queue-ρ0.9/bursty-1%/sized/1-s groups",
                queue(15.0),
                LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            )
        },
        Scenario {
            pps: 240_000.0,
            counters: 2_000_000,
            ..base("shifted/uniform-1%/20k-flows", shifted, LossModel::Uniform { rate: 0.01 })
        },
        Scenario {
            counters: 1_048_576,
            ..base("lognormal-mix/bursty-5%/sparse", lnmix, LossModel::Bursty { rate: 0.05, mean_burst: 8.0 })
        },
        Scenario {
            second_path: Some((0.3, 1_000_000)),
            ..base("two-paths-1ms/uniform-2%", shifted, LossModel::Uniform { rate: 0.02 })
        },
    ]
    .into_iter()
    .map(|mut s| {
        if s.name.starts_with("shifted/none") {
            s.tick_ns = 1_000;
        }
        s
    })
    .collect()
}

/// `WIRELAT_COLATE_MATRIX_QUEUE_MBPS` replaces every queue scenario's service rate (Mb/s): how
/// BENCHMARKS.md measures coverage against the utilisation (the ρ check then fails by design
/// where the measured load leaves the scenario's name).
pub(super) fn queue_mbps() -> Option<f64> {
    std::env::var("WIRELAT_COLATE_MATRIX_QUEUE_MBPS").ok().and_then(|s| s.parse().ok())
}

pub(super) fn scale() -> f64 {
    std::env::var("WIRELAT_COLATE_MATRIX_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0)
}

/// The scenario's counters times the size factor, rounded up to a prime (the scenario's own
/// count at factor 1).
pub(super) fn counters(sc: &Scenario) -> u32 {
    next_prime(common::scaled(u64::from(sc.counters), common::size_factor(), 3)) as u32
}
