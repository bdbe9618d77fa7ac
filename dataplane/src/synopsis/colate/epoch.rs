//! Counter epochs: the T-closed unit COLATE stores (spec §2, §3), built on the control side from
//! the runtime's per-window vectors, and their compact, lossless encoding for the archive.
//!
//! The accumulator adds each harvested window (already merged across cores, exactly) into the
//! open epoch, and closes the epoch first when adding the window would push its timestamp sum
//! past T or any counter past 2^b − 1 (spec §8 P8: check before the add). Epochs therefore
//! cover whole windows; see the module docs of [`super`] for what that means for accuracy.
//! Pure: no I/O (the control crate writes the encoded epochs to disk).

use super::config::ColateConfig;
use super::pack::{bits_needed, pack, packed_len, unpack};
use super::state::Colate;
use crate::synopsis::codec::{DecodeError, Reader, Writer};
use crate::synopsis::{Synopsis, SynopsisConfig};
use serde::Serialize;
use thiserror::Error;

/// Anomalies recorded with an epoch (bit set in [`CounterEpoch::flags`]).
pub mod flags {
    /// A per-window u64 cell wrapped: the epoch's sums are unusable.
    pub const COUNTER_WRAPPED: u8 = 1;
    /// One window alone exceeded T (the epoch holds that window only).
    pub const OVER_THRESHOLD: u8 = 2;
    /// One window alone pushed a counter past 2^b − 1 (stored losslessly, wider).
    pub const WIDER_THAN_B: u8 = 4;
    /// Window indices were not consecutive inside the epoch (windows missing).
    pub const WINDOW_GAP: u8 = 8;
    /// Every defined bit.
    pub const ALL: u8 = COUNTER_WRAPPED | OVER_THRESHOLD | WIDER_THAN_B | WINDOW_GAP;
}

/// One closed counter epoch of one point: the sum of the vectors of windows
/// `first_window..=last_window`, with the ticks of its first and last recorded packet.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterEpoch {
    /// The observation point that recorded it.
    pub point: u32,
    /// Sequence number at that point (0, 1, 2, … in closing order).
    pub seq: u64,
    /// Index of the first runtime window in it.
    pub first_window: u64,
    /// Index of the last runtime window in it.
    pub last_window: u64,
    /// How many windows were added (≤ last − first + 1; fewer means a gap).
    pub windows: u64,
    /// [`flags`] bits.
    pub flags: u8,
    /// The accumulated vector.
    pub data: Colate,
}

/// What the archive index needs of an epoch, without its cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EpochMeta {
    /// The point.
    pub point: u32,
    /// Sequence number at the point.
    pub seq: u64,
    /// First window index.
    pub first_window: u64,
    /// Last window index.
    pub last_window: u64,
    /// Tick of the first and last recorded packet (`None` if it recorded none).
    pub ticks: Option<(u64, u64)>,
    /// Packets recorded.
    pub packets: u64,
    /// [`flags`] bits.
    pub flags: u8,
}

/// Why a window could not be added to the open epoch.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AccumulateError {
    /// The window was built with another configuration.
    #[error("window vector has configuration {theirs:#018x}, the accumulator {ours:#018x}")]
    ConfigMismatch {
        /// The accumulator's fingerprint.
        ours: u64,
        /// The window's fingerprint.
        theirs: u64,
    },
    /// Windows must arrive in increasing index order.
    #[error("window {got} arrived after window {last}")]
    OutOfOrder {
        /// Last accepted window.
        last: u64,
        /// The refused one.
        got: u64,
    },
}

/// Storage accounting of one epoch (spec §8 P13).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StorageStats {
    /// Bytes of the encoded epoch (its archive record body).
    pub stored_bytes: usize,
    /// Packets it recorded.
    pub packets: u64,
    /// 8·stored_bytes / packets: what the archive really spends.
    pub stored_bits_per_packet: f64,
    /// The paper's accounting, n·b / packets.
    pub nominal_bits_per_packet: f64,
}

impl CounterEpoch {
    /// The epoch's index entry.
    pub fn meta(&self) -> EpochMeta {
        EpochMeta {
            point: self.point,
            seq: self.seq,
            first_window: self.first_window,
            last_window: self.last_window,
            ticks: self.data.tick_range(),
            packets: self.data.packets(),
            flags: self.flags,
        }
    }

    /// Appends the encoding: fixed fields, then the sums packed at the width of the largest sum
    /// and (with packet counts) the counts packed at the width of the largest count. Lossless.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let d = &self.data;
        let n = d.counters();
        let sum_width = bits_needed(d.max_sum());
        let count_width = bits_needed((0..n).filter_map(|i| d.count(i)).max().unwrap_or(0));
        let mut w = Writer::new(out);
        w.u32(self.point);
        w.u64(self.seq);
        w.u64(self.first_window);
        w.u64(self.last_window);
        w.u64(self.windows);
        w.u8(self.flags);
        w.u64(d.packets);
        w.u64(d.skipped);
        w.u64(d.total_ticks as u64);
        w.u64((d.total_ticks >> 64) as u64);
        w.u64(d.first_tick);
        w.u64(d.last_tick);
        w.u8(sum_width);
        w.u8(count_width);
        pack(&mut w, (0..n).map(|i| d.sum(i)), sum_width);
        if d.count(0).is_some() {
            pack(&mut w, (0..n).map(|i| d.count(i).unwrap_or(0)), count_width);
        }
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode_into(&mut v);
        v
    }

    /// Decodes an epoch encoded under `cfg`. Never panics; every length is checked against
    /// `cfg` before anything is allocated; the vector's invariants are re-checked.
    pub fn decode(cfg: &ColateConfig, bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let e = Self::decode_from(cfg, &mut r)?;
        r.finish()?;
        Ok(e)
    }

    /// Reads only the index fields (no cells are unpacked or allocated).
    pub fn decode_meta(bytes: &[u8]) -> Result<EpochMeta, DecodeError> {
        let mut r = Reader::new(bytes);
        let point = r.u32()?;
        let seq = r.u64()?;
        let first_window = r.u64()?;
        let last_window = r.u64()?;
        let _windows = r.u64()?;
        let flags = r.u8()?;
        let packets = r.u64()?;
        let _skipped = r.u64()?;
        let _total = (r.u64()?, r.u64()?);
        let first = r.u64()?;
        let last = r.u64()?;
        Ok(EpochMeta {
            point,
            seq,
            first_window,
            last_window,
            ticks: (packets > 0).then_some((first, last)),
            packets,
            flags,
        })
    }

    fn decode_from(cfg: &ColateConfig, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let invalid = |field: &'static str, reason: String| DecodeError::Invalid { field, reason };
        cfg.validate().map_err(|e| invalid("config", e.to_string()))?;
        let point = r.u32()?;
        let seq = r.u64()?;
        let first_window = r.u64()?;
        let last_window = r.u64()?;
        let windows = r.u64()?;
        let flag_bits = r.u8()?;
        let packets = r.u64()?;
        let skipped = r.u64()?;
        let total_ticks = r.u64()? as u128 | (r.u64()? as u128) << 64;
        let first_tick = r.u64()?;
        let last_tick = r.u64()?;
        let sum_width = r.u8()?;
        let count_width = r.u8()?;
        if first_window > last_window || windows == 0 || windows - 1 > last_window - first_window {
            return Err(invalid("windows", format!("{windows} windows in {first_window}..={last_window}")));
        }
        if flag_bits & !flags::ALL != 0 {
            return Err(invalid("flags", format!("unknown bits {flag_bits:#04x}")));
        }
        if sum_width > 64 || count_width > 64 {
            return Err(invalid("width", format!("{sum_width}/{count_width} bits")));
        }
        if !cfg.packet_counts && count_width != 0 {
            return Err(invalid("width", "packet counts in an epoch configured without them".into()));
        }
        let n = cfg.counters as usize;
        let need = packed_len(n, sum_width)
            .zip(packed_len(n, count_width))
            .and_then(|(a, b)| a.checked_add(b))
            .ok_or_else(|| invalid("width", "length overflows".into()))?;
        r.require(need)?;
        let mut data = Colate::new(cfg).map_err(|e| invalid("config", e.to_string()))?;
        let mut sums = Vec::new();
        unpack(r, n, sum_width, &mut sums)?;
        let mut counts = Vec::new();
        if cfg.packet_counts {
            unpack(r, n, count_width, &mut counts)?;
        }
        for (i, cell) in data.cells.chunks_mut(cfg.stride()).enumerate() {
            for (slot, v) in cell.iter_mut().zip([sums.get(i), counts.get(i)]) {
                *slot = v.copied().unwrap_or(0);
            }
        }
        data.packets = packets;
        data.skipped = skipped;
        data.total_ticks = total_ticks;
        data.first_tick = first_tick;
        data.last_tick = last_tick;
        data.check_invariants()?;
        // Unless a window wrapped, the sums add up exactly, not only modulo 2^64.
        if flag_bits & flags::COUNTER_WRAPPED == 0 && data.cell_sum() != total_ticks {
            return Err(invalid("cells", "sums differ from the total without the wrap flag".into()));
        }
        Ok(Self { point, seq, first_window, last_window, windows, flags: flag_bits, data })
    }

    /// Storage accounting: the encoded size and bits per packet, actual and nominal (n·b).
    pub fn storage(&self) -> StorageStats {
        let stored_bytes = self.encode().len();
        let packets = self.data.packets();
        let per = |bits: f64| if packets > 0 { bits / packets as f64 } else { 0.0 };
        StorageStats {
            stored_bytes,
            packets,
            stored_bits_per_packet: per(8.0 * stored_bytes as f64),
            nominal_bits_per_packet: per(self.data.config().memory_bits() as f64),
        }
    }
}

/// Builds counter epochs from the runtime's windows (control side, one per point).
///
/// Call [`EpochAccumulator::push_window`] once per harvested window, in window order, with the
/// window's vector already merged across cores; store every epoch it returns; call
/// [`EpochAccumulator::flush`] at shutdown. Pushing empty windows too keeps the epochs' window
/// ranges contiguous (a gap is flagged, not an error).
#[derive(Debug)]
pub struct EpochAccumulator {
    cfg: ColateConfig,
    fingerprint: u64,
    point: u32,
    next_seq: u64,
    last_window: Option<u64>,
    open: Option<CounterEpoch>,
}

impl EpochAccumulator {
    /// An accumulator for `point`, numbering its epochs from `first_seq` (continue an existing
    /// archive with its next sequence number).
    pub fn new(cfg: &ColateConfig, point: u32, first_seq: u64) -> Result<Self, crate::synopsis::ConfigError> {
        cfg.validate()?;
        Ok(Self {
            cfg: cfg.clone(),
            fingerprint: cfg.fingerprint(),
            point,
            next_seq: first_seq,
            last_window: None,
            open: None,
        })
    }

    /// Adds window `window`'s vector. Returns the epoch it closed, if adding this window would
    /// have pushed the open epoch's tick sum past T or one of its counters past 2^b − 1.
    pub fn push_window(&mut self, window: u64, v: &Colate) -> Result<Option<CounterEpoch>, AccumulateError> {
        if v.config() != &self.cfg {
            return Err(AccumulateError::ConfigMismatch {
                ours: self.fingerprint,
                theirs: v.config().fingerprint(),
            });
        }
        if let Some(last) = self.last_window
            && window <= last
        {
            return Err(AccumulateError::OutOfOrder { last, got: window });
        }
        let gap = self.last_window.is_some_and(|last| window != last + 1);
        self.last_window = Some(window);
        let wrapped = v.counters_wrapped();
        let threshold = self.cfg.epoch_threshold_ticks as u128;
        let limit = self.cfg.counter_limit();
        if let Some(open) = self.open.as_mut() {
            let absorbed = if open.data.packets() == 0 {
                // An epoch of empty windows takes any window: there is nothing to overflow into.
                open.data.add(v);
                true
            } else {
                open.data.total_ticks() + v.total_ticks() <= threshold && open.data.try_add_within(v, limit)
            };
            if absorbed {
                open.last_window = window;
                open.windows += 1;
                if gap {
                    open.flags |= flags::WINDOW_GAP;
                }
                if wrapped {
                    open.flags |= flags::COUNTER_WRAPPED;
                }
                Self::flag_oversize(open, threshold, limit);
                return Ok(None);
            }
        }
        let closed = self.open.take();
        let mut epoch = CounterEpoch {
            point: self.point,
            seq: self.next_seq,
            first_window: window,
            last_window: window,
            windows: 1,
            flags: if wrapped { flags::COUNTER_WRAPPED } else { 0 },
            data: v.clone(),
        };
        Self::flag_oversize(&mut epoch, threshold, limit);
        self.next_seq += 1;
        self.open = Some(epoch);
        Ok(closed)
    }

    fn flag_oversize(e: &mut CounterEpoch, threshold: u128, limit: u64) {
        if e.data.total_ticks() > threshold {
            e.flags |= flags::OVER_THRESHOLD;
        }
        if e.data.max_sum() > limit {
            e.flags |= flags::WIDER_THAN_B;
        }
    }

    /// Closes and returns the open epoch (at shutdown, or on an operator's request).
    pub fn flush(&mut self) -> Option<CounterEpoch> {
        self.open.take()
    }
}
