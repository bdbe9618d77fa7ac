//! A seeded two-point segment for tests and the paper reproduction (spec §7.6): packets with
//! unique identities leave the sender one at a time, take a delay drawn from a
//! [`DelayModel`], and are dropped by a [`LossModel`]; the ground truth (exact moments of the
//! received packets' integer delays) is kept alongside.
//!
//! Delays and losses come from two separate generators, so the same seed gives the same
//! delays at every loss level (the paper imposes loss levels on one delay trace). No I/O.

use super::state::Lda;
use crate::sim::{self, DelayModel, DelaySampler, LossModel, LossProcess, SimRng};
use crate::synopsis::hash::derive;

/// A simulated measurement segment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegmentSim {
    /// Packets N sent in the interval.
    pub packets: u64,
    /// Per-packet delay, in timestamp units (rounded to integers).
    pub delay: DelayModel,
    /// Which packets are lost.
    pub loss: LossModel,
    /// Send time of the first packet.
    pub start_ts: u64,
    /// Idle time between a packet's arrival and the next packet's departure (one packet in
    /// flight, as in the paper, so there is no reordering).
    pub gap: u64,
    /// Seed of the delays, the losses and the identities.
    pub seed: u64,
}

/// One simulated packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimPacket {
    /// Unique identity (a bijective hash of the sequence number).
    pub identity: u64,
    /// Time it passed the sender.
    pub sent_ts: u64,
    /// Time it passed the receiver; `None` if lost.
    pub received_ts: Option<u64>,
}

impl SimPacket {
    /// Its integer delay (receiver minus sender timestamp, modulo 2^64), if received.
    pub fn delay(&self) -> Option<u64> {
        self.received_ts.map(|b| b.wrapping_sub(self.sent_ts))
    }
}

impl SegmentSim {
    /// The packets, in send order; `None` if the delay model's parameters are out of range.
    pub fn packets(&self) -> Option<SegmentTrace> {
        Some(SegmentTrace {
            sim: *self,
            sampler: self.delay.sampler()?,
            delay_rng: sim::rng(derive(self.seed, 1)),
            loss_rng: sim::rng(derive(self.seed, 2)),
            loss: LossProcess::new(self.loss),
            seq: 0,
            next_send: self.start_ts,
        })
    }
}

/// Iterator over the packets of a [`SegmentSim`].
#[derive(Clone, Debug)]
pub struct SegmentTrace {
    sim: SegmentSim,
    sampler: DelaySampler,
    delay_rng: SimRng,
    loss_rng: SimRng,
    loss: LossProcess,
    seq: u64,
    next_send: u64,
}

impl Iterator for SegmentTrace {
    type Item = SimPacket;

    fn next(&mut self) -> Option<SimPacket> {
        if self.seq >= self.sim.packets {
            return None;
        }
        let identity = derive(self.seq, self.sim.seed);
        self.seq += 1;
        // Float-to-int casts saturate; delays are non-negative.
        let delay = self.sampler.sample(&mut self.delay_rng).round() as u64;
        let lost = self.loss.next_lost(&mut self.loss_rng);
        let sent_ts = self.next_send;
        let arrival = sent_ts.wrapping_add(delay);
        self.next_send = arrival.wrapping_add(self.sim.gap);
        Some(SimPacket { identity, sent_ts, received_ts: (!lost).then_some(arrival) })
    }
}

/// Exact moments of the received packets' delays.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GroundTruth {
    /// Packets sent.
    pub sent: u64,
    /// Packets received (R).
    pub received: u64,
    sum: u128,
    sum_sq: u128,
    sum_4: f64,
}

impl GroundTruth {
    /// Counts one packet.
    pub fn record(&mut self, p: &SimPacket) {
        self.sent += 1;
        if let Some(w) = p.delay() {
            self.received += 1;
            let w = u128::from(w);
            self.sum = self.sum.saturating_add(w);
            self.sum_sq = self.sum_sq.saturating_add(w * w);
            let wf = w as f64;
            self.sum_4 += wf * wf * wf * wf;
        }
    }

    /// Packets lost (L).
    pub fn lost(&self) -> u64 {
        self.sent - self.received
    }

    /// Mean delay μ of the received packets.
    pub fn mean(&self) -> f64 {
        self.sum as f64 / self.received as f64
    }

    /// Mean squared delay (1/R) Σ w².
    pub fn mean_square(&self) -> f64 {
        self.sum_sq as f64 / self.received as f64
    }

    /// Population standard deviation σ of the received packets' delays.
    pub fn std_dev(&self) -> f64 {
        let m = self.mean();
        (self.mean_square() - m * m).max(0.0).sqrt()
    }

    /// Coefficient of variation σ/μ.
    pub fn cv(&self) -> f64 {
        self.std_dev() / self.mean()
    }

    /// κ = E\[w⁴\]/E\[w²\]², the normalised fourth moment that sets how much the squared delays of
    /// a sample vary.
    pub fn fourth_moment_ratio(&self) -> f64 {
        let m2 = self.mean_square();
        self.sum_4 / self.received as f64 / (m2 * m2)
    }
}

/// A sender and a receiver synopsis of one segment.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentPair {
    /// Synopsis at the sender (point A).
    pub sender: Lda,
    /// Synopsis at the receiver (point B).
    pub receiver: Lda,
}

/// Feeds every packet to each pair's sender at its send time and every received packet to the
/// receiver at its arrival time, and returns the ground truth.
pub fn feed(packets: impl Iterator<Item = SimPacket>, pairs: &mut [SegmentPair]) -> GroundTruth {
    let mut truth = GroundTruth::default();
    for p in packets {
        truth.record(&p);
        for pair in pairs.iter_mut() {
            pair.sender.update_raw(p.identity, p.sent_ts);
            if let Some(b) = p.received_ts {
                pair.receiver.update_raw(p.identity, b);
            }
        }
    }
    truth
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_do_not_depend_on_the_loss_level() {
        let base = SegmentSim {
            packets: 2000,
            delay: DelayModel::Weibull { shape: 0.6, mean: 200_000.0 },
            loss: LossModel::None,
            start_ts: 5,
            gap: 1,
            seed: 3,
        };
        let lossy = SegmentSim { loss: LossModel::Uniform { rate: 0.3 }, ..base };
        let a: Vec<_> = base.packets().unwrap().collect();
        let b: Vec<_> = lossy.packets().unwrap().collect();
        assert_eq!(a.len(), 2000);
        let mut lost = 0;
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.identity, x.sent_ts), (y.identity, y.sent_ts));
            match y.received_ts {
                Some(t) => assert_eq!(Some(t), x.received_ts),
                None => lost += 1,
            }
        }
        // 30% of 2000 ± 5 binomial sd (20.5).
        assert!((lost as f64 - 600.0).abs() < 5.0 * 20.5, "{lost}");
        // One packet in flight: the next leaves after the previous arrived.
        for w in a.windows(2) {
            assert!(w[1].sent_ts > w[0].received_ts.unwrap());
        }
    }

    #[test]
    fn ground_truth_moments() {
        let mut t = GroundTruth::default();
        for (i, d) in [(0, Some(2)), (1, Some(4)), (2, None), (3, Some(6))] {
            t.record(&SimPacket { identity: i, sent_ts: 10, received_ts: d.map(|d| 10 + d) });
        }
        assert_eq!((t.sent, t.received, t.lost()), (4, 3, 1));
        assert_eq!(t.mean(), 4.0);
        assert!((t.std_dev() - (8.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!(
            (t.fourth_moment_ratio() - (16.0 + 256.0 + 1296.0) / 3.0 / (56.0f64 / 3.0).powi(2)).abs() < 1e-12
        );
    }
}
