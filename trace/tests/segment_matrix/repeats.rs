//! Repeated identities: the copies a cell injects into the two points' streams, and the truths
//! of each epoch computed from those streams (the generator's truth does not know the copies).

use super::*;

/// Adds the copies `r` asks for to the two points' streams (identity, timestamp). Synthetic
/// and bundled traffic have no repeats of their own, so every repeat is one of these.
pub(super) fn inject(streams: &mut [Vec<(u64, u64)>; 2], r: Repeats, seed: u64) {
    let at_b: HashMap<u64, u64> = streams[1].iter().copied().collect();
    let (mut add_a, mut add_b) = (Vec::new(), Vec::new());
    for &(id, ts) in &streams[0] {
        let u = (mix64(id ^ seed) >> 11) as f64 / (1u64 << 53) as f64;
        let b = at_b.get(&id).copied();
        if u < r.sender {
            add_a.push((id, ts + r.gap_ns));
        } else if u < r.sender + r.receiver {
            add_b.extend(b.map(|t| (id, t + r.gap_ns)));
        } else if u < r.sender + r.receiver + r.both {
            add_a.push((id, ts + r.gap_ns));
            add_b.extend(b.map(|t| (id, t + 2 * r.gap_ns)));
        }
    }
    for (s, add) in streams.iter_mut().zip([add_a, add_b]) {
        s.extend(add);
        s.sort_by_key(|&(_, ts)| ts);
    }
}

/// Every timestamp each point saw each identity at, per epoch of the point's own clock.
pub(super) struct PointEpochs {
    pub(super) epochs: BTreeMap<u64, [HashMap<u64, Vec<u64>>; 2]>,
}

/// The truths of one epoch computed from the two points' streams.
#[derive(Default)]
pub(super) struct Direct {
    /// Delays of the ids each point saw exactly once in the epoch: RDA's population. The
    /// exact sum and count, for an exact comparison.
    pub(super) once: Stats,
    pub(super) once_sum: i128,
    /// Ids the sender saw once and the receiver not at all in the epoch: RDA's loss.
    pub(super) sender_only: u64,
    /// Per point: ids seen more than once, and their packets (every copy).
    pub(super) dup_ids: [u64; 2],
    pub(super) dup_packets: [u64; 2],
    /// Ids one point excluded and the other saw once.
    pub(super) one_sided: u64,
    /// Ids both points saw equally often, every copy (paired in time order): what LDA's
    /// usable cells hold.
    pub(super) equal: Stats,
    /// Packets each point saw in the epoch (copies included): LDA's counters.
    pub(super) packets: [u64; 2],
}

impl PointEpochs {
    pub(super) fn new(streams: &[Vec<(u64, u64)>; 2], epoch_ns: u64) -> Self {
        let mut epochs: BTreeMap<u64, [HashMap<u64, Vec<u64>>; 2]> = BTreeMap::new();
        for (p, s) in streams.iter().enumerate() {
            for &(id, ts) in s {
                epochs.entry(ts / epoch_ns).or_default()[p].entry(id).or_default().push(ts);
            }
        }
        Self { epochs }
    }

    pub(super) fn truth(&self, k: u64) -> Direct {
        let mut d = Direct::default();
        let Some([a, b]) = self.epochs.get(&k) else { return d };
        let (mut once, mut equal) = (StatsAcc::default(), StatsAcc::default());
        let none = Vec::new();
        for (p, m) in [a, b].into_iter().enumerate() {
            d.packets[p] = m.values().map(|t| t.len() as u64).sum();
            for t in m.values().filter(|t| t.len() > 1) {
                d.dup_ids[p] += 1;
                d.dup_packets[p] += t.len() as u64;
            }
        }
        for (id, ta) in a {
            let tb = b.get(id).unwrap_or(&none);
            match (ta.len(), tb.len()) {
                (1, 1) => {
                    let x = tb[0] as i64 - ta[0] as i64;
                    once.push(x);
                    d.once_sum += i128::from(x);
                }
                (1, 0) => d.sender_only += 1,
                (1, _) => d.one_sided += 1,
                (_, 1) => d.one_sided += 1,
                _ => {}
            }
            if ta.len() == tb.len() {
                let (mut ta, mut tb) = (ta.clone(), tb.clone());
                ta.sort_unstable();
                tb.sort_unstable();
                for (x, y) in ta.iter().zip(&tb) {
                    equal.push(*y as i64 - *x as i64);
                }
            }
        }
        d.once = once.stats();
        d.equal = equal.stats();
        d
    }
}
