//! Fridge tests, one submodule per concept: [`oracles`] (deterministic oracles of spec §3, §8
//! P2–P8, P21 on one fridge set), [`epochs`] (the synopsis over a mixed stream: kinds, subsets,
//! epochs and merges), [`reporting`] (the report of an exact histogram), [`encoding`] (round
//! trips and refusals of bad or extreme input), [`quantiles`] (the report's quantile rule) and
//! [`statistical`] (seeded, against ground truth). Here: the specs, streams and feeding they
//! share.

use super::*;
use crate::packet::{Exchange, FlowKey};
use crate::synopsis::codec::DecodeError;
use crate::synopsis::hash;

mod encoding;
mod epochs;
mod oracles;
mod quantiles;
mod reporting;
mod statistical;

fn spec(slots: u32, p: f64) -> FridgeSpec {
    FridgeSpec { slots, entry_probability: p }
}

/// A small mixed stream: handshakes and DNS (port 53 and 5353 servers), some TCP data (not
/// configured), through `update`.
fn stream(seed: u64, n: usize) -> Vec<(FlowKey, u64, Exchange)> {
    use rand::Rng;
    let mut r = crate::sim::rng(seed);
    let mut out = Vec::new();
    let mut pending: Vec<(u64, FlowKey, Exchange)> = Vec::new();
    let mut ts = 0u64;
    for i in 0..n as u64 {
        ts += r.random_range(100..2000);
        let client = std::net::Ipv4Addr::from(0x0a00_0000 | (r.random::<u32>() & 0xffff));
        let (kind, sport) = match r.random_range(0..10) {
            0..=4 => (ExchangeKind::TcpHandshake, 443),
            5..=7 => (ExchangeKind::Dns, 53),
            8 => (ExchangeKind::Dns, 5353),
            _ => (ExchangeKind::TcpData, 80),
        };
        let req = FlowKey::new(client.into(), "192.0.2.1".parse().unwrap(), 40000, sport, 6);
        let id = hash::mix64(i ^ seed);
        out.push((req, ts, Exchange { kind, role: Role::Request, id }));
        if r.random::<f64>() < 0.6 {
            let d = r.random_range(1_000..5_000_000);
            pending.push((ts + d, req.reversed(), Exchange { kind, role: Role::Response, id }));
        }
    }
    for (t, f, e) in pending {
        out.push((f, t, e));
    }
    out.sort_by_key(|(_, t, e)| (*t, e.role == Role::Response));
    out
}

fn test_config() -> FridgeConfig {
    FridgeConfig {
        kinds: vec![
            KindConfig { kind: ExchangeKind::TcpHandshake, fridges: vec![spec(64, 0.5), spec(64, 0.125)] },
            KindConfig { kind: ExchangeKind::Dns, fridges: vec![spec(128, 1.0)] },
        ],
        subsets: SubsetRule::ServerPort { ports: vec![53, 443] },
        report_thresholds_ns: vec![1_000_000],
        ..FridgeConfig::default()
    }
}

fn feed(syn: &mut FridgeSynopsis, carry: &mut FridgeCarry, events: &[(FlowKey, u64, Exchange)]) {
    for (flow, ts_ns, ex) in events {
        let ob = Observation {
            ts_ns: *ts_ns,
            flow,
            flow_hash: 0,
            identity: 0,
            exchange: Some(*ex),
            encap: crate::packet::Encap::NONE,
        };
        syn.update(carry, &ob);
    }
}
