//! The counters one worker's pipeline keeps and publishes: the worker writes them with plain
//! relaxed stores ([`super::Pipeline::publish`]), the control thread reads them
//! ([`SharedCounters::snapshot`]) for its statistics and metrics.

use serde::Serialize;

/// The measurement counters, listed once (`field => log key`, in log order): hands the list to
/// the macro it is given, after that macro's own arguments. It declares [`CounterSnapshot`] and
/// [`SharedCounters`] here (through [`counter_set!`](crate::counter_set)) and writes the
/// "measure counters" log line (through [`log_counters!`](crate::log_counters)).
#[macro_export]
macro_rules! measure_counters {
    ($($then:ident)::+ ! { $($args:tt)* }) => {
        $($then)::+! { $($args)* {
            /// Frames inspected.
            frames => frames,
            /// Frames measured.
            measured => measured,
            /// Skipped: ARP.
            arp => skipped_arp,
            /// Skipped: other non-IP ethertypes.
            unknown_ethertype => skipped_unknown_ethertype,
            /// Skipped: fragments.
            fragment => skipped_fragment,
            /// Skipped: truncated frames.
            truncated => skipped_truncated,
            /// Skipped: malformed headers.
            malformed => skipped_malformed,
            /// Skipped: an encapsulation (too deep, or an MPLS, PPPoE, GRE, VXLAN or GTP-U layer
            /// that carries nothing to measure or is malformed; the packet layer counts each
            /// apart).
            encapsulation => skipped_encapsulation,
            /// Frames without a usable timestamp (not inspected).
            untimed => untimed,
            /// Measured packets older than the worker's current epoch (not applied).
            late => late,
            /// Epochs not measured because no buffer was free (policy `skip`).
            overrun_epochs => overrun_epochs,
            /// Measured packets not applied because their epoch was overrun.
            overrun_packets => overrun_packets,
            /// Times the worker waited for a buffer (policy `wait`).
            waits => waits,
            /// Measured packets not applied because neither address is inside (`[monitor]
            /// inside`).
            split_neither => split_neither,
            /// Measured packets not applied because both addresses are inside (`[monitor]
            /// inside`).
            split_both => split_both,
        } }
    };
}

crate::measure_counters!(crate::counter_set! {
    /// A plain copy of the measurement counters of one worker, or their sum over workers.
    #[derive(Serialize)]
    pub struct CounterSnapshot;
    /// The measurement counters one worker publishes for the control thread's statistics
    /// (relaxed plain stores by the worker, relaxed loads by the control thread). Pad per worker
    /// (`CachePadded`).
    pub atomic struct SharedCounters;
});

impl CounterSnapshot {
    /// Frames skipped by the packet layer, all reasons.
    pub fn skipped(&self) -> u64 {
        self.arp
            + self.unknown_ethertype
            + self.fragment
            + self.truncated
            + self.malformed
            + self.encapsulation
    }
}
