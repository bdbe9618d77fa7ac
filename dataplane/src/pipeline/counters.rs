//! The counters one worker's pipeline keeps and publishes: the worker writes them with plain
//! relaxed stores ([`super::Pipeline::publish`]), the control thread reads them
//! ([`SharedCounters::snapshot`]) for its statistics and metrics.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters one worker publishes for the control thread's statistics (relaxed plain stores by
/// the worker, relaxed loads by the control thread). Pad per worker (`CachePadded`).
#[derive(Debug, Default)]
pub struct SharedCounters {
    /// Frames inspected.
    pub frames: AtomicU64,
    /// Frames measured.
    pub measured: AtomicU64,
    /// Skipped: ARP.
    pub arp: AtomicU64,
    /// Skipped: other non-IP ethertypes.
    pub unknown_ethertype: AtomicU64,
    /// Skipped: fragments.
    pub fragment: AtomicU64,
    /// Skipped: truncated frames.
    pub truncated: AtomicU64,
    /// Skipped: malformed headers.
    pub malformed: AtomicU64,
    /// Skipped: an encapsulation (too deep, or an MPLS, PPPoE, GRE, VXLAN or GTP-U layer that
    /// carries nothing to measure or is malformed; the packet layer counts each apart).
    pub encapsulation: AtomicU64,
    /// Frames without a usable timestamp (not inspected).
    pub untimed: AtomicU64,
    /// Measured packets older than the worker's current epoch (not applied).
    pub late: AtomicU64,
    /// Epochs not measured because no buffer was free (policy `skip`).
    pub overrun_epochs: AtomicU64,
    /// Measured packets not applied because their epoch was overrun.
    pub overrun_packets: AtomicU64,
    /// Times the worker waited for a buffer (policy `wait`).
    pub waits: AtomicU64,
    /// Measured packets not applied because neither address is inside (`[monitor] inside`).
    pub split_neither: AtomicU64,
    /// Measured packets not applied because both addresses are inside (`[monitor] inside`).
    pub split_both: AtomicU64,
}

/// A plain copy of [`SharedCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CounterSnapshot {
    /// See [`SharedCounters::frames`].
    pub frames: u64,
    /// See [`SharedCounters::measured`].
    pub measured: u64,
    /// See [`SharedCounters::arp`].
    pub arp: u64,
    /// See [`SharedCounters::unknown_ethertype`].
    pub unknown_ethertype: u64,
    /// See [`SharedCounters::fragment`].
    pub fragment: u64,
    /// See [`SharedCounters::truncated`].
    pub truncated: u64,
    /// See [`SharedCounters::malformed`].
    pub malformed: u64,
    /// See [`SharedCounters::encapsulation`].
    pub encapsulation: u64,
    /// See [`SharedCounters::untimed`].
    pub untimed: u64,
    /// See [`SharedCounters::late`].
    pub late: u64,
    /// See [`SharedCounters::overrun_epochs`].
    pub overrun_epochs: u64,
    /// See [`SharedCounters::overrun_packets`].
    pub overrun_packets: u64,
    /// See [`SharedCounters::waits`].
    pub waits: u64,
    /// See [`SharedCounters::split_neither`].
    pub split_neither: u64,
    /// See [`SharedCounters::split_both`].
    pub split_both: u64,
}

impl CounterSnapshot {
    /// Field-wise sum (totals over workers).
    pub fn add(&mut self, o: &CounterSnapshot) {
        self.frames += o.frames;
        self.measured += o.measured;
        self.arp += o.arp;
        self.unknown_ethertype += o.unknown_ethertype;
        self.fragment += o.fragment;
        self.truncated += o.truncated;
        self.malformed += o.malformed;
        self.encapsulation += o.encapsulation;
        self.untimed += o.untimed;
        self.late += o.late;
        self.overrun_epochs += o.overrun_epochs;
        self.overrun_packets += o.overrun_packets;
        self.waits += o.waits;
        self.split_neither += o.split_neither;
        self.split_both += o.split_both;
    }

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

impl SharedCounters {
    /// Reads every counter (relaxed: each value is exact, the set is not one instant).
    pub fn snapshot(&self) -> CounterSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CounterSnapshot {
            frames: l(&self.frames),
            measured: l(&self.measured),
            arp: l(&self.arp),
            unknown_ethertype: l(&self.unknown_ethertype),
            fragment: l(&self.fragment),
            truncated: l(&self.truncated),
            malformed: l(&self.malformed),
            encapsulation: l(&self.encapsulation),
            untimed: l(&self.untimed),
            late: l(&self.late),
            overrun_epochs: l(&self.overrun_epochs),
            overrun_packets: l(&self.overrun_packets),
            waits: l(&self.waits),
            split_neither: l(&self.split_neither),
            split_both: l(&self.split_both),
        }
    }
}
