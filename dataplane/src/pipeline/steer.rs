//! Which worker a frame belongs to when a program spreads traffic itself: the offline runner's
//! emulated workers, and tests that split a trace into per-queue pcaps for the appliance.
//!
//! The rule stands in for the NIC's symmetric RSS: the canonical (direction-free) flow key,
//! hashed with a fixed seed, modulo the number of workers, so both directions of a flow go to
//! one worker (the fridge needs request and response together). Frames the packet layer does not
//! measure (ARP, fragments, malformed, ...) go to worker 0. Not a per-packet path of the
//! appliance: there the NIC steers.

use crate::packet::{self, PacketConfig};
use crate::synopsis::hash::reduce;

/// Seed of the steering hash (independent of the identity seed, like an RSS key).
pub const STEER_SEED: u64 = 0x7374_6565_7221_0001;

/// The worker (0..`workers`) that handles `frame`; 0 when `workers` is 0 or 1.
pub fn worker_of(frame: &[u8], workers: usize) -> usize {
    if workers <= 1 {
        return 0;
    }
    match packet::measure(frame, &PacketConfig::default()) {
        Ok(m) => reduce(m.flow.canonical().hash(STEER_SEED), workers as u64) as usize,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::sample;

    #[test]
    fn both_directions_of_a_flow_go_to_one_worker() {
        let frames = sample::frames();
        let mut seen = [0usize; 4];
        for f in &frames {
            let w = worker_of(&f.data, 4);
            assert!(w < 4);
            seen[w] += 1;
            if let Ok(m) = packet::measure(&f.data, &PacketConfig::default()) {
                let rev = m.flow.reversed();
                let want = reduce(rev.canonical().hash(STEER_SEED), 4) as usize;
                assert_eq!(w, want, "the reversed flow must map to the same worker");
            } else {
                assert_eq!(w, 0, "unmeasured frames go to worker 0");
            }
        }
        assert_eq!(seen.iter().sum::<usize>(), frames.len());
        assert_eq!(worker_of(&frames[0].data, 1), 0);
        assert_eq!(worker_of(&[], 3), 0);
    }
}
