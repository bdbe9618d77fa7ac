//! What a network sink counts, one counter set per concern ([`counter_set!`]): the frames it
//! was handed and sent, the state of its queue, its connections to the peer, and (in
//! [`super::retain`]) the RDA caches it keeps; [`ShipCounters`] puts them together for the
//! point's `/metrics` and the JSON `wirelat sim-point` prints.
//!
//! [`counter_set!`]: wirelat_dataplane::counter_set

use super::retain::RetainCounts;
use serde::Serialize;

wirelat_dataplane::counter_set! {
    /// What a network sink did with the epoch synopses handed to it (part of [`ShipCounters`]).
    #[derive(Serialize)]
    pub struct FrameCounts;
    /// The live counters behind [`FrameCounts`]: `deliver` counts the hand-overs, the shipper
    /// thread the frames it writes, the reader thread the acknowledgements.
    pub(crate) atomic struct SharedFrameCounts;
    {
        /// Epoch synopses handed to the sink.
        delivered => delivered,
        /// Of those, already queued under the same key (dropped).
        duplicate_deliveries => duplicate_deliveries,
        /// Frames written to a connection (resends included).
        sent => sent,
        /// Frames written again after a reconnect.
        resent => resent,
        /// Epoch synopses the peer acknowledged.
        acked => acked,
    }
}

wirelat_dataplane::counter_set! {
    /// The state of the queue of unacknowledged epoch synopses (part of [`ShipCounters`]): read
    /// from the queue when a snapshot is taken, not counted as events.
    #[derive(Serialize)]
    pub struct QueueCounts;
    {
        /// Epoch synopses waiting for an acknowledgement now.
        queued => queued,
        /// Of those, held only in the spill directory.
        spilled => spilled,
        /// Entries loaded from the spill directory at start-up.
        loaded_from_spill => loaded_from_spill,
        /// With `spill_all`: epoch synopses kept in memory only because the spill directory
        /// could not take them (disk full, `spill_bytes` reached): crash safety was lost for
        /// them.
        not_crash_safe => not_crash_safe,
    }
}

wirelat_dataplane::counter_set! {
    /// How the shipper's connections to the peer went (part of [`ShipCounters`]).
    #[derive(Serialize)]
    pub struct ConnectionCounts;
    /// The live counters behind [`ConnectionCounts`], written by the shipper thread.
    pub(crate) atomic struct SharedConnectionCounts;
    {
        /// Successful handshakes.
        connections => connections,
        /// Failed connection attempts (refused, timed out, handshake failed, rejected).
        connect_failures => connect_failures,
        /// Connections the peer refused with a reason.
        rejected_by_peer => rejected_by_peer,
    }
}

/// What a network sink did (a snapshot of its counters), one counter set per concern.
///
/// The JSON (`wirelat sim-point` prints it) flattens the parts into one object; their order
/// here is the order of its keys, which is why the give-ups sit between the frames and the
/// queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ShipCounters {
    /// Hand-overs, frames written, acknowledgements.
    #[serde(flatten)]
    pub frames: FrameCounts,
    /// Given up, by reason (every reason, in [`GiveUp::ALL`](crate::wire::GiveUp::ALL) order, zeros included).
    pub given_up: Vec<(&'static str, u64)>,
    /// The queue now.
    #[serde(flatten)]
    pub queue: QueueCounts,
    /// Connections to the peer.
    #[serde(flatten)]
    pub connections: ConnectionCounts,
    /// The retained RDA caches and the look-ups and binds they answered.
    #[serde(flatten)]
    pub rda: RetainCounts,
}

impl ShipCounters {
    /// Adds `o` to `self`, every counter (the totals over a point's network sinks); the
    /// give-ups are summed by reason.
    pub fn add(&mut self, o: &Self) {
        self.frames.add(&o.frames);
        self.queue.add(&o.queue);
        self.connections.add(&o.connections);
        self.rda.add(&o.rda);
        for &(reason, n) in &o.given_up {
            match self.given_up.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, total)) => *total = total.wrapping_add(n),
                None => self.given_up.push((reason, n)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_json_keeps_its_keys_in_their_order() {
        // The keys and order `wirelat sim-point` has always printed (tests and scripts read them).
        let c = ShipCounters { given_up: vec![("too_old", 3)], ..ShipCounters::default() };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            concat!(
                r#"{"delivered":0,"duplicate_deliveries":0,"sent":0,"resent":0,"acked":0,"#,
                r#""given_up":[["too_old",3]],"queued":0,"spilled":0,"loaded_from_spill":0,"#,
                r#""not_crash_safe":0,"connections":0,"connect_failures":0,"rejected_by_peer":0,"#,
                r#""rda_caches_retained":0,"rda_caches_expired":0,"rda_caches_evicted":0,"#,
                r#""rda_caches_released":0,"rda_lookups":0,"rda_lookup_ids":0,"#,
                r#""rda_lookup_misses":0,"rda_binds":0,"rda_runs_moved":0}"#
            )
        );
    }
}
