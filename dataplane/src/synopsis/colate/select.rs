//! Which stored epochs a query uses (spec §4.1, §8 P6).
//!
//! The paper takes, at each point, every epoch whose [first, last] packet time overlaps the
//! flow's [start, end] ([`epochs_overlapping`]; at R the window is widened by the largest
//! latency). Each point closes its epochs on its own sum, so the two unions can end in
//! different runtime windows; every packet in one union but not the other adds noise at
//! *timestamp* scale, which nothing cancels. [`select_aligned`] therefore grows both
//! selections until they cover the same runtime windows: then only the packets in flight across
//! the two outer window boundaries differ. Eq 4 is linear, so summing epochs changes nothing
//! else.

use super::epoch::EpochMeta;
use serde::Serialize;

/// Indices (into the slices given) of the epochs whose packet-time range overlaps [t0, t1]
/// (ticks, inclusive). Epochs that recorded no packet never overlap.
pub fn epochs_overlapping(epochs: &[EpochMeta], t0: u64, t1: u64) -> Vec<usize> {
    epochs
        .iter()
        .enumerate()
        .filter(|(_, e)| e.ticks.is_some_and(|(a, b)| a <= t1 && b >= t0))
        .map(|(i, _)| i)
        .collect()
}

/// The epochs a two-point query uses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Selection {
    /// Indices into the sender-side epochs.
    pub s: Vec<usize>,
    /// Indices into the receiver-side epochs.
    pub r: Vec<usize>,
    /// The runtime windows covered, first..=last (the union of both sides).
    pub windows: (u64, u64),
    /// True when both sides cover exactly the same windows without a hole; false at the ends
    /// of an archive (one point has no epoch there) or around missing windows.
    pub aligned: bool,
}

/// The overlap selection of both points, grown until both cover the same runtime windows.
///
/// `t0..=t1` is the flow's time at S in ticks; the receiver side looks at `t0..=t1 + lag`.
/// `None` when neither point has an overlapping epoch.
pub fn select_aligned(
    s: &[EpochMeta],
    r: &[EpochMeta],
    t0: u64,
    t1: u64,
    lag_ticks: u64,
) -> Option<Selection> {
    let s0 = epochs_overlapping(s, t0, t1);
    let r0 = epochs_overlapping(r, t0, t1.saturating_add(lag_ticks));
    let range = |idx: &[usize], all: &[EpochMeta]| {
        idx.iter().filter_map(|&i| all.get(i)).fold(None, |acc: Option<(u64, u64)>, e| {
            Some(acc.map_or((e.first_window, e.last_window), |(lo, hi)| {
                (lo.min(e.first_window), hi.max(e.last_window))
            }))
        })
    };
    let mut cover = match (range(&s0, s), range(&r0, r)) {
        (None, None) => return None,
        (Some(a), None) | (None, Some(a)) => a,
        (Some(a), Some(b)) => (a.0.min(b.0), a.1.max(b.1)),
    };
    loop {
        let within = |all: &[EpochMeta]| -> Vec<usize> {
            all.iter()
                .enumerate()
                .filter(|(_, e)| e.first_window <= cover.1 && e.last_window >= cover.0)
                .map(|(i, _)| i)
                .collect()
        };
        let (si, ri) = (within(s), within(r));
        let grown = match (range(&si, s), range(&ri, r)) {
            (None, None) => cover,
            (Some(a), None) | (None, Some(a)) => (a.0.min(cover.0), a.1.max(cover.1)),
            (Some(a), Some(b)) => (a.0.min(b.0).min(cover.0), a.1.max(b.1).max(cover.1)),
        };
        if grown == cover {
            let aligned = range(&si, s) == Some(cover)
                && range(&ri, r) == Some(cover)
                && contiguous(&si, s)
                && contiguous(&ri, r);
            return Some(Selection { s: si, r: ri, windows: cover, aligned });
        }
        cover = grown;
    }
}

/// True when the epochs tile their window range without a hole.
fn contiguous(idx: &[usize], all: &[EpochMeta]) -> bool {
    let mut spans: Vec<(u64, u64)> =
        idx.iter().filter_map(|&i| all.get(i)).map(|e| (e.first_window, e.last_window)).collect();
    spans.sort_unstable();
    spans.windows(2).all(|w| w[0].1.checked_add(1) == Some(w[1].0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(seq: u64, w: (u64, u64), t: Option<(u64, u64)>) -> EpochMeta {
        EpochMeta { point: 0, seq, first_window: w.0, last_window: w.1, ticks: t, packets: 1, flags: 0 }
    }

    /// Windows of 100 ticks; epochs given by window ranges; ticks span the windows.
    fn epochs(spans: &[(u64, u64)]) -> Vec<EpochMeta> {
        spans
            .iter()
            .enumerate()
            .map(|(i, &(a, b))| meta(i as u64, (a, b), Some((a * 100, b * 100 + 99))))
            .collect()
    }

    #[test]
    fn overlap_is_inclusive_and_skips_empty_epochs() {
        let mut e = epochs(&[(0, 2), (3, 5), (6, 9)]);
        assert_eq!(epochs_overlapping(&e, 299, 300), vec![0, 1]);
        assert_eq!(epochs_overlapping(&e, 600, 600), vec![2]);
        assert_eq!(epochs_overlapping(&e, 1_000, 2_000), Vec::<usize>::new());
        e[1].ticks = None;
        assert_eq!(epochs_overlapping(&e, 299, 300), vec![0]);
    }

    #[test]
    fn identical_boundaries_select_the_same_epochs() {
        let s = epochs(&[(0, 2), (3, 5), (6, 9)]);
        let sel = select_aligned(&s, &s, 350, 420, 0).unwrap();
        assert_eq!(sel, Selection { s: vec![1], r: vec![1], windows: (3, 5), aligned: true });
    }

    #[test]
    fn misaligned_closings_grow_to_a_common_boundary() {
        // S closed after windows 2 and 5; R (its sum crossed T one window later) after 3 and 7.
        let s = epochs(&[(0, 2), (3, 5), (6, 9)]);
        let r = epochs(&[(0, 3), (4, 7), (8, 9)]);
        // A flow in window 4: S's overlap is epoch 1 (3..=5), R's is epoch 1 (4..=7); the
        // common cover must include S's epoch 2 (6..=9), hence R's 8..=9, and R's 0..=3, hence
        // S's 0..=2.
        let sel = select_aligned(&s, &r, 410, 480, 0).unwrap();
        assert_eq!(sel.s, vec![0, 1, 2]);
        assert_eq!(sel.r, vec![0, 1, 2]);
        assert_eq!(sel.windows, (0, 9));
        assert!(sel.aligned);
        // A flow in window 8 only needs the tails: S 6..=9 and R 8..=9 → R also 4..=7 → S 3..=5
        // → R 0..=3 → S 0..=2: the partitions share only 0 and 10 as boundaries.
        let sel = select_aligned(&s, &r, 810, 820, 0).unwrap();
        assert_eq!(sel.windows, (0, 9));
        // With a shared boundary at 6 the growth stops there.
        let r2 = epochs(&[(0, 3), (4, 5), (6, 9)]);
        let sel = select_aligned(&s, &r2, 810, 820, 0).unwrap();
        assert_eq!(
            (sel.s.clone(), sel.r.clone(), sel.windows, sel.aligned),
            (vec![2], vec![2], (6, 9), true)
        );
    }

    #[test]
    fn receiver_lag_widens_only_the_receiver() {
        let s = epochs(&[(0, 2), (3, 5)]);
        let r = epochs(&[(0, 2), (3, 5)]);
        // Flow ends at 299 at S; with a lag of 10 ticks R's window reaches 309 (epoch 1).
        let sel = select_aligned(&s, &r, 250, 299, 10).unwrap();
        assert_eq!((sel.s, sel.r, sel.aligned), (vec![0, 1], vec![0, 1], true));
    }

    #[test]
    fn archive_ends_and_holes_are_not_aligned() {
        let s = epochs(&[(0, 2), (3, 5)]);
        let r = epochs(&[(0, 2)]);
        let sel = select_aligned(&s, &r, 350, 360, 0).unwrap();
        assert!(!sel.aligned);
        let holey = epochs(&[(0, 2), (4, 5)]);
        let sel = select_aligned(&holey, &holey, 0, 599, 0).unwrap();
        assert!(!sel.aligned);
        assert_eq!(select_aligned(&s, &r, 5_000, 6_000, 0), None);
    }
}
