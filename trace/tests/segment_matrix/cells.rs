//! The matrix's cells: traffic, delay, loss, reordering, clock and epoch settings per cell, and
//! the repeated identities some cells inject.

use super::*;

pub(super) struct Cell {
    pub(super) name: &'static str,
    pub(super) epoch_ns: u64,
    pub(super) delay: DelaySpec,
    pub(super) loss: LossModel,
    pub(super) reorder: Option<ReorderSpec>,
    pub(super) offset_ns: i64,
    pub(super) base: bool,
    /// A single LDA bank of this many rows sampling every packet, instead of the tuned pair:
    /// dense cells, where boundary slips share cells.
    pub(super) rows: Option<u32>,
    /// Identity repeats injected into the two points' streams.
    pub(super) repeats: Option<Repeats>,
}

/// Second copies of packets, each decided by a hash of the identity: a fraction of the
/// sender's packets repeated at the sender only (a retransmission whose first copy was lost
/// after it, or a loop upstream), at the receiver only (a loop inside the segment), and at
/// both (a retransmission seen at both). A copy follows its original by `gap_ns` at the point
/// (plus `gap_ns` again at the receiver for copies at both: it crossed the segment later), so
/// some copies fall into the next epoch.
#[derive(Clone, Copy)]
pub(super) struct Repeats {
    pub(super) sender: f64,
    pub(super) receiver: f64,
    pub(super) both: f64,
    pub(super) gap_ns: u64,
}

pub(super) fn cells() -> Vec<Cell> {
    let iid = DelaySpec::Iid;
    let c = |name, epoch_ns, delay, loss, offset_ns| Cell {
        name,
        epoch_ns,
        delay,
        loss,
        reorder: None,
        offset_ns,
        base: false,
        rows: None,
        repeats: None,
    };
    vec![
        c("const/10ms/none", 10_000_000, iid(DelayModel::Constant { delay: 40_000.0 }), LossModel::None, 0),
        c(
            "weibull/10ms/bursty/+2.5us",
            10_000_000,
            iid(DelayModel::Weibull { shape: 0.6, mean: 40_000.0 }),
            LossModel::Bursty { rate: 0.02, mean_burst: 20.0 },
            2_500,
        ),
        c(
            "pareto/100ms/uniform/-3us",
            100_000_000,
            iid(DelayModel::Pareto { shape: 2.5, mean: 50_000.0 }),
            LossModel::Uniform { rate: 0.01 },
            -3_000,
        ),
        c(
            "bimodal/100ms/none",
            100_000_000,
            iid(DelayModel::Bimodal { low_mean: 20_000.0, high_mean: 400_000.0, p_high: 0.05 }),
            LossModel::None,
            0,
        ),
        c(
            // A fast path (median 20 µs) and a congested one (median 200 µs, 5 %), both skewed.
            "lognormal-mix/10ms/bursty/-1.5us",
            10_000_000,
            iid(DelayModel::LogNormalMix {
                mu_low: 20_000f64.ln(),
                sigma_low: 0.3,
                mu_high: 200_000f64.ln(),
                sigma_high: 0.6,
                p_high: 0.05,
            }),
            LossModel::Bursty { rate: 0.01, mean_burst: 4.0 },
            -1_500,
        ),
        c(
            "lognormal/1s/uniform",
            1_000_000_000,
            iid(DelayModel::LogNormal { mu: 40_000f64.ln(), sigma: 0.8 }),
            LossModel::Uniform { rate: 0.005 },
            1_000,
        ),
        c(
            "queue/100ms/bursty",
            100_000_000,
            DelaySpec::Queue(QueueModel::Queue { service_rate_bps: 20_000_000.0, propagation_ns: 30_000 }),
            LossModel::Bursty { rate: 0.01, mean_burst: 8.0 },
            0,
        ),
        Cell {
            // Adjacent swaps: 0.5 % of packets held back by about one inter-packet gap.
            reorder: Some(ReorderSpec {
                fraction: 0.005,
                extra: DelayModel::Uniform { low: 50_000.0, high: 250_000.0 },
            }),
            ..c(
                "weibull/10ms/swaps/-2us",
                10_000_000,
                iid(DelayModel::Weibull { shape: 0.8, mean: 60_000.0 }),
                LossModel::Uniform { rate: 0.002 },
                -2_000,
            )
        },
        Cell {
            // Delays of 2 ms against 10-ms epochs: ≈ 40 packets cross each boundary, and with
            // 64 cells crossing-out and crossing-in packets share cells in most epochs (the
            // count-and-floor test accepts them: c·(M + N) + M > E).
            rows: Some(64),
            ..c(
                "weibull-2ms/10ms/crossings/+1us",
                10_000_000,
                iid(DelayModel::Weibull { shape: 0.6, mean: 2_000_000.0 }),
                LossModel::Uniform { rate: 0.01 },
                1_000,
            )
        },
        Cell {
            base: true,
            ..c(
                "base-capture/100ms/uniform",
                100_000_000,
                iid(DelayModel::Weibull { shape: 0.7, mean: 30_000.0 }),
                LossModel::Uniform { rate: 0.01 },
                500,
            )
        },
        Cell {
            // 1 % of packets repeated at each of: the sender, the receiver, both; 10-ms epochs
            // so that copies 300 µs later cross boundaries in every epoch.
            repeats: Some(Repeats { sender: 0.01, receiver: 0.01, both: 0.01, gap_ns: 300_000 }),
            ..c(
                "weibull/10ms/repeats/uniform/+1us",
                10_000_000,
                iid(DelayModel::Weibull { shape: 0.7, mean: 50_000.0 }),
                LossModel::Uniform { rate: 0.01 },
                1_000,
            )
        },
        Cell {
            // The bundled base capture (no identity repeats of its own within an epoch) with
            // repeats as the real traces of issue 18 had them (82 in one trace), and more.
            base: true,
            repeats: Some(Repeats { sender: 0.005, receiver: 0.005, both: 0.02, gap_ns: 2_000_000 }),
            ..c(
                "base-capture/100ms/repeats/bursty",
                100_000_000,
                iid(DelayModel::Weibull { shape: 0.7, mean: 30_000.0 }),
                LossModel::Bursty { rate: 0.01, mean_burst: 5.0 },
                -700,
            )
        },
    ]
}

pub(super) fn scale() -> f64 {
    std::env::var("WIRELAT_MATRIX_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0)
}
