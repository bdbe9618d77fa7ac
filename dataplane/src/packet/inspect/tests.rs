//! Tests of the inspector, one submodule per concept: hand-built frames that are [`measured`],
//! frames that are [`skipped`] with their reason, the identity's [`invariance`] (what must not
//! and what must change it), request/response [`classification`], and [`prop`] (cross-checks
//! against etherparse and property tests). Here: the addresses, frame builders and verdict
//! helpers they share.

use super::*;
use crate::packet::class::SkipReason::*;
use crate::packet::classify::pairing_id;
use crate::packet::exchange::{ExchangeKind, Role};
use crate::packet::synth::{FrameSpec, IpSpec, L4Spec, internet_checksum};
use crate::packet::tcp::flags::{ACK, FIN, PSH, RST, SYN};

const C4: [u8; 4] = [192, 0, 2, 10];

const S4: [u8; 4] = [198, 51, 100, 20];

const C6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a];

const S6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x14];

fn cfg() -> PacketConfig {
    PacketConfig::default()
}

fn measured(frame: &[u8], cfg: &PacketConfig) -> Measurement {
    match measure(frame, cfg) {
        Ok(m) => m,
        Err(r) => panic!("expected a measurement, got {r:?} for {frame:02x?}"),
    }
}

fn skipped(frame: &[u8]) -> SkipReason {
    match measure(frame, &cfg()) {
        Ok(m) => panic!("expected a skip, got {m:?}"),
        Err(r) => r,
    }
}

fn tcp4(seq: u32, ack: u32, flags: u8, payload: &[u8]) -> FrameSpec {
    FrameSpec::new(IpSpec::v4(C4, S4, 0x1234), L4Spec::tcp(40000, 80, seq, ack, flags), payload.to_vec())
}

fn udp6(payload: &[u8]) -> FrameSpec {
    FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::udp(5000, 6000), payload.to_vec())
}

/// A DNS header with `id` and the QR bit.
fn dns_msg(id: u16, response: bool) -> Vec<u8> {
    let mut m = vec![0u8; 12];
    m[0..2].copy_from_slice(&id.to_be_bytes());
    m[2] = if response { 0x81 } else { 0x01 };
    m[5] = 1;
    m.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
    m
}

/// Swaps source and destination of a spec's IP and transport headers.
fn reversed(mut s: FrameSpec) -> FrameSpec {
    match &mut s.ip {
        IpSpec::V4 { src, dst, .. } => std::mem::swap(src, dst),
        IpSpec::V6 { src, dst, .. } => std::mem::swap(src, dst),
    }
    match &mut s.l4 {
        L4Spec::Tcp { src_port, dst_port, .. } | L4Spec::Udp { src_port, dst_port, .. } => {
            std::mem::swap(src_port, dst_port)
        }
        _ => {}
    }
    s
}

fn identity(frame: &[u8]) -> u64 {
    measured(frame, &cfg()).identity
}

mod classification;
mod invariance;
mod measured;
mod prop;
mod skipped;
