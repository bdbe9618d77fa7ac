//! The Simple Delay Sketch (paper §2.2, Figs. 2–3; spec §2.2): the teaching step that assumes
//! the receiver knows each packet's delay. Kept as a test oracle: an LDS with k = 1, α = 0,
//! p = 1 and no loss must give the same per-flow estimates whenever the minimum count is
//! unique. It uses the row hashes h_r of the LDS configuration it is built from.
//!
//! Not for deployment: packets do not carry timestamps (the whole point of the LDS).

use super::addressing::Addressing;
use super::config::LdsConfig;

/// An R×W matrix of ⟨Σ delay, n⟩ cells.
#[derive(Clone, Debug, PartialEq)]
pub struct SimpleDelaySketch {
    addr: Addressing,
    delay_sum_ns: Vec<i64>,
    count: Vec<u32>,
}

impl SimpleDelaySketch {
    /// A sketch with the rows, width and row hashes of `cfg` (k, sampling and weights unused).
    pub fn new(cfg: &LdsConfig) -> Self {
        let cells = cfg.cells() as usize;
        Self { addr: Addressing::new(cfg), delay_sum_ns: vec![0; cells], count: vec![0; cells] }
    }

    /// Fig. 2: adds the packet's delay to cell h_r(f) of every row.
    pub fn update(&mut self, flow_hash: u64, delay_ns: i64) {
        for row in &self.addr.rows {
            let j = row.start + self.addr.base(row, flow_hash) as usize;
            if let (Some(s), Some(n)) = (self.delay_sum_ns.get_mut(j), self.count.get_mut(j)) {
                *s = s.wrapping_add(delay_ns);
                *n = n.saturating_add(1);
            }
        }
    }

    /// Fig. 3: s/n of the row with the smallest n (strict `<`: the first such row wins);
    /// `None` when the flow's cells are empty.
    pub fn estimate(&self, flow_hash: u64) -> Option<f64> {
        let mut best: Option<(u32, i64)> = None;
        for row in &self.addr.rows {
            let j = row.start + self.addr.base(row, flow_hash) as usize;
            let (Some(&s), Some(&n)) = (self.delay_sum_ns.get(j), self.count.get(j)) else { continue };
            if best.is_none_or(|(m, _)| n < m) {
                best = Some((n, s));
            }
        }
        match best {
            Some((n, s)) if n > 0 => Some(s as f64 / f64::from(n)),
            _ => None,
        }
    }

    /// True when the flow's minimum count occurs in exactly one row.
    pub fn min_is_unique(&self, flow_hash: u64) -> bool {
        let counts: Vec<u32> = self
            .addr
            .rows
            .iter()
            .filter_map(|row| self.count.get(row.start + self.addr.base(row, flow_hash) as usize).copied())
            .collect();
        let min = counts.iter().copied().min().unwrap_or(0);
        counts.iter().filter(|&&n| n == min).count() == 1
    }
}
