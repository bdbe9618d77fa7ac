//! A base capture (one vantage point seeing both directions) turned into the traffic of the two
//! directions of the simulated segment.
//!
//! Direction is decided per flow (the canonical, direction-free 5-tuple), so both directions of
//! a conversation stay consistent:
//! 1. TCP: the sender of the first SYN without ACK is the client; failing that, the receiver of
//!    the first SYN/ACK.
//! 2. Port 53 (UDP or TCP): the sender of the first DNS query is the client; failing that, the
//!    endpoint that is not port 53.
//! 3. Other flows with ports: the endpoint with the higher port is the client (servers listen on
//!    low, well-known ports); equal ports: the sender of the flow's first packet.
//! 4. IP without ports (ICMP, ...): the sender of the flow's first packet is the client.
//! 5. Non-IP frames (ARP, LLDP, ...) and fragments: forward.
//!
//! Client→server packets are forward (their base timestamp is when A sees them), the others
//! reverse (their base timestamp is when B sees them). Timestamps are optionally rebased to a
//! start time and scaled.

use crate::error::{Result, TraceError};
use crate::parse::{self, DNS_PORT, PROTO_TCP, tcp_flags};
use crate::pcap_io::Record;
use crate::topology::Direction;
use std::collections::HashMap;
use wirelat_dataplane::packet::{FlowKey, Role};

/// How base timestamps become true times at the upstream tap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// Rebase so the first record is at this time (ns since 1970); `None` keeps the base times.
    pub start_ns: Option<u64>,
    /// Multiply every gap from the first record by this factor (1.0 keeps them).
    pub time_scale: f64,
}

/// A base packet with its direction and the true time it enters the segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directed {
    /// Forward or reverse.
    pub direction: Direction,
    /// True time at the upstream tap, ns.
    pub t_ns: u64,
    /// The frame as the base capture has it.
    pub frame: Vec<u8>,
}

/// Decides the direction of every record (rules in the module docs).
pub fn directions(records: &[Record]) -> Vec<Direction> {
    // canonical flow → the client's (address, port) as stored in FlowKey form.
    let mut client: HashMap<FlowKey, ([u8; 16], u16)> = HashMap::new();
    let mut first_sender: HashMap<FlowKey, ([u8; 16], u16)> = HashMap::new();
    let views: Vec<_> = records.iter().map(|r| (parse::parse(&r.data), parse::exchange(&r.data))).collect();
    for (v, x) in &views {
        let Some(k) = v.flow_key() else { continue };
        let canon = k.canonical();
        let me = (k.src_addr, k.src_port);
        first_sender.entry(canon).or_insert(me);
        if client.contains_key(&canon) {
            continue;
        }
        let flags = v.l4.map(|l| l.tcp_flags).unwrap_or(0);
        if k.protocol == PROTO_TCP && flags & tcp_flags::SYN != 0 && flags & tcp_flags::RST == 0 {
            let c = if flags & tcp_flags::ACK == 0 { me } else { (k.dst_addr, k.dst_port) };
            client.insert(canon, c);
        } else if let Some(x) = x
            && x.kind == wirelat_dataplane::packet::ExchangeKind::Dns
        {
            let c = if x.role == Role::Request { me } else { (k.dst_addr, k.dst_port) };
            client.insert(canon, c);
        }
    }
    views
        .iter()
        .map(|(v, _)| {
            let Some(k) = v.flow_key() else { return Direction::Forward };
            let canon = k.canonical();
            let me = (k.src_addr, k.src_port);
            let c = match client.get(&canon) {
                Some(c) => *c,
                None if k.src_port == DNS_PORT && k.dst_port != DNS_PORT => (k.dst_addr, k.dst_port),
                None if k.dst_port == DNS_PORT && k.src_port != DNS_PORT => me,
                None if k.src_port != k.dst_port => {
                    if k.src_port > k.dst_port {
                        me
                    } else {
                        (k.dst_addr, k.dst_port)
                    }
                }
                None => first_sender.get(&canon).copied().unwrap_or(me),
            };
            if c == me { Direction::Forward } else { Direction::Reverse }
        })
        .collect()
}

/// The base records as directed packets in time order (stable for equal times).
pub fn directed(records: Vec<Record>, timing: Timing) -> Result<Vec<Directed>> {
    if !(timing.time_scale.is_finite() && timing.time_scale > 0.0) {
        return Err(TraceError::Config(format!("time scale {} must be positive", timing.time_scale)));
    }
    let dirs = directions(&records);
    let first = records.iter().map(|r| r.ts_ns).min().unwrap_or(0);
    let origin = timing.start_ns.unwrap_or(first);
    let mut out = Vec::with_capacity(records.len());
    for (r, direction) in records.into_iter().zip(dirs) {
        let gap = (r.ts_ns - first) as f64 * timing.time_scale;
        if gap.is_nan() || gap >= 1e18 {
            return Err(TraceError::Time(format!("scaled gap {gap} ns too large")));
        }
        let t_ns = origin
            .checked_add(gap.round() as u64)
            .ok_or_else(|| TraceError::Time("rebased timestamp overflows".into()))?;
        out.push(Directed { direction, t_ns, frame: r.data });
    }
    out.sort_by_key(|d| d.t_ns);
    Ok(out)
}
