//! Synthetic traffic: client↔server conversations simulated event by event, so every response
//! is caused by its request's actual arrival (a server answers `think` after the request reached
//! it, which is after it crossed the segment).
//!
//! Conversation kinds (their mix is configurable):
//! - **TCP flows**: SYN (MSS, SACK-permitted, timestamps, window scale) → SYN/ACK → ACK, then
//!   request/response rounds (the server answers with several segments, the client ACKs every
//!   second one), then FIN exchange. The flow's packet budget is heavy-tailed (Pareto or
//!   log-normal). A lost SYN or SYN/ACK makes the client retransmit the SYN after an RTO that
//!   doubles; every TCP segment carries a timestamp option, so retransmitted copies differ.
//!   A lost data segment is not retransmitted: the conversation goes on as if it had arrived
//!   one nominal delay later (only the handshake matters to the fridge's ground truth).
//! - **DNS over UDP**: query → reply after the resolver's think time; retried with the same id
//!   and port after an RTO when no reply came (fridge spec P6: the latest copy counts).
//! - **DNS over TCP**: handshake, one length-prefixed query and reply, FIN exchange.
//! - **UDP flows**: heavy-tailed bidirectional datagram streams with mixed sizes.
//! - **ICMP echo**: a few pings.
//! - **ARP** request/reply pairs (not IP: forwarded, never measured).
//!
//! Frames are 60–1514 bytes as captured (64–1518 on the wire with FCS); 20 % of conversations
//! (configurable) use IPv6. Every retransmitted copy gets a fresh IPv4 id / IPv6 flow label (as
//! Linux rehashes the label after an RTO), so no two measured packets share their invariant
//! bytes. Everything is drawn from streams seeded by the generator's seed, in event order.

use crate::error::{Result, TraceError};
use crate::frame::{self, DnsType, IpFields, MacPair, TcpFields};
use crate::parse::tcp_flags;
use crate::segment::to_ns;
use crate::topology::{Direction, DirectionTaps};
use etherparse::TcpOptionElement;
use rand::Rng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use wirelat_dataplane::sim::{self, DelayModel, DelaySampler, SimRng};
use wirelat_dataplane::synopsis::hash::derive;

mod dns;
mod ping;
mod tcp;
mod udp;

use dns::DnsUdpConv;
use ping::{ArpConv, IcmpConv};
use tcp::TcpConv;
use udp::UdpConv;

/// Heavy-tailed number of packets of a TCP or UDP flow.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum FlowSize {
    /// Pareto: ⌊min · U^(−1/shape)⌋.
    Pareto {
        /// Tail index α (1.1–1.5 is internet-like).
        shape: f64,
        /// Smallest flow, packets.
        min: f64,
    },
    /// Log-normal: ⌈exp(N(mu, sigma²))⌉.
    LogNormal {
        /// Mean of the log.
        mu: f64,
        /// Std-dev of the log.
        sigma: f64,
    },
}

impl FlowSize {
    fn sample(&self, rng: &mut SimRng, cap: u32) -> u32 {
        let x = match *self {
            FlowSize::Pareto { shape, min } => {
                let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
                min * u.powf(-1.0 / shape)
            }
            FlowSize::LogNormal { mu, sigma } => {
                let n: f64 = rand_distr::StandardNormal.sample(rng);
                (mu + sigma * n).exp().ceil()
            }
        };
        if x.is_finite() { (x as u64).clamp(1, u64::from(cap.max(1))) as u32 } else { cap.max(1) }
    }

    fn validate(&self) -> Result<()> {
        let ok = match *self {
            FlowSize::Pareto { shape, min } => shape > 0.0 && min >= 1.0 && min.is_finite(),
            FlowSize::LogNormal { mu, sigma } => mu.is_finite() && sigma >= 0.0 && sigma.is_finite(),
        };
        if ok { Ok(()) } else { Err(TraceError::Config(format!("flow size model out of range: {self:?}"))) }
    }
}

/// Relative weights of the conversation kinds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mix {
    /// TCP flows.
    pub tcp: f64,
    /// DNS over UDP.
    pub dns_udp: f64,
    /// DNS over TCP.
    pub dns_tcp: f64,
    /// UDP flows.
    pub udp: f64,
    /// ICMP echo.
    pub icmp: f64,
}

/// Synthetic traffic parameters. Times in ns; think-time models in ns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrafficConfig {
    /// Target mean packet rate over both directions (conversations start as a Poisson process
    /// at this rate divided by the expected packets per conversation; truncation at the end
    /// makes the realised rate somewhat lower).
    pub packet_rate_pps: f64,
    /// Length of the trace: nothing is sent at or after start + duration.
    pub duration_ns: u64,
    /// Fraction of conversations over IPv6.
    pub ipv6_fraction: f64,
    /// Conversation mix.
    pub mix: Mix,
    /// Packets per TCP / UDP flow.
    pub flow_packets: FlowSize,
    /// Cap on a flow's packets.
    pub max_flow_packets: u32,
    /// Server time from request arrival to response (TCP, ICMP, UDP), ns.
    pub server_think: DelayModel,
    /// Resolver time from query arrival to reply, ns.
    pub dns_think: DelayModel,
    /// Client time between a response and its next request, ns.
    pub client_think: DelayModel,
    /// Floor on any think time, ns (keeps a response strictly after its request at each tap,
    /// also in µs mode).
    pub min_think_ns: u64,
    /// Initial SYN retransmission timeout, ns (doubles per attempt).
    pub syn_rto_ns: u64,
    /// DNS retry timeout, ns.
    pub dns_rto_ns: u64,
    /// Attempts of a SYN or DNS query, including the first.
    pub max_attempts: u8,
    /// Mean time between ARP exchanges, ns (0: none).
    pub arp_interval_ns: u64,
    /// Number of client hosts (≤ 500).
    pub clients: u16,
    /// Number of server hosts (≤ 250).
    pub servers: u16,
}

impl Default for TrafficConfig {
    fn default() -> Self {
        Self {
            packet_rate_pps: 20_000.0,
            duration_ns: 2_000_000_000,
            ipv6_fraction: 0.2,
            mix: Mix { tcp: 0.45, dns_udp: 0.35, dns_tcp: 0.03, udp: 0.1, icmp: 0.07 },
            flow_packets: FlowSize::Pareto { shape: 1.3, min: 8.0 },
            max_flow_packets: 20_000,
            // Medians 300 µs, 1 ms and 200 µs with heavy right tails.
            server_think: DelayModel::LogNormal { mu: 300_000f64.ln(), sigma: 1.0 },
            dns_think: DelayModel::LogNormal { mu: 1_000_000f64.ln(), sigma: 1.2 },
            client_think: DelayModel::LogNormal { mu: 200_000f64.ln(), sigma: 1.0 },
            min_think_ns: 10_000,
            syn_rto_ns: 200_000_000,
            dns_rto_ns: 150_000_000,
            max_attempts: 3,
            arp_interval_ns: 50_000_000,
            clients: 200,
            servers: 40,
        }
    }
}

impl TrafficConfig {
    /// Checks every parameter.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(TraceError::Config(m));
        if !(self.packet_rate_pps.is_finite() && self.packet_rate_pps > 0.0 && self.packet_rate_pps <= 1e8) {
            return bad(format!("packet rate {} pps not in (0, 1e8]", self.packet_rate_pps));
        }
        if self.duration_ns == 0 || self.duration_ns > 86_400_000_000_000 {
            return bad(format!("duration {} ns not in (0, 1 day]", self.duration_ns));
        }
        if !(0.0..=1.0).contains(&self.ipv6_fraction) {
            return bad(format!("ipv6 fraction {} not in [0, 1]", self.ipv6_fraction));
        }
        let m = self.mix;
        let w = [m.tcp, m.dns_udp, m.dns_tcp, m.udp, m.icmp];
        if w.iter().any(|x| !(x.is_finite() && *x >= 0.0)) || w.iter().sum::<f64>() <= 0.0 {
            return bad(format!("conversation mix {m:?} needs non-negative weights with a positive sum"));
        }
        self.flow_packets.validate()?;
        for (name, d) in [
            ("server_think", self.server_think),
            ("dns_think", self.dns_think),
            ("client_think", self.client_think),
        ] {
            if d.sampler().is_none() {
                return bad(format!("{name} model out of range: {d:?}"));
            }
        }
        if self.max_attempts == 0 || self.max_attempts > 8 {
            return bad(format!("max_attempts {} not in 1..=8", self.max_attempts));
        }
        if self.clients == 0 || self.clients > 500 || self.servers == 0 || self.servers > 250 {
            return bad(format!("clients {} (1..=500) / servers {} (1..=250)", self.clients, self.servers));
        }
        if self.max_flow_packets < 8 {
            return bad("max_flow_packets below 8".into());
        }
        Ok(())
    }
}

/// What the simulation hands a packet to: the segment model of its direction. Returns the
/// arrival time at the downstream tap, or `None` if the packet was lost.
pub trait Network {
    /// `frame` enters the segment of `dir` at true time `t_ns` (seen by the upstream tap).
    fn send(&mut self, dir: Direction, t_ns: u64, frame: Vec<u8>) -> Option<u64>;

    /// A typical delay of `dir`, ns: when a packet is lost, endpoints that do not model its
    /// loss (data segments, UDP flows) act as if it had arrived this long after it was sent.
    fn nominal_delay_ns(&self, dir: Direction) -> u64;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    Syn(u8),
    SynTimer(u8),
    SynAck,
    HsAck,
    Req,
    Resp,
    CAck,
    Fin,
    FinAck,
    LastAck,
    Query(u8),
    QueryTimer(u8),
    Reply,
    UdpC(u32),
    UdpS(u32),
    Echo(u16),
    EchoReply,
    ArpReq,
    ArpRep,
}

enum What {
    Start(Kind),
    Send { dir: Direction, tag: Tag, frame: Vec<u8> },
    Timer(Tag),
}

struct Ev {
    t_ns: u64,
    seq: u64,
    conv: usize,
    what: What,
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        (self.t_ns, self.seq) == (o.t_ns, o.seq)
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.t_ns, self.seq).cmp(&(o.t_ns, o.seq))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Tcp,
    DnsUdp,
    DnsTcp,
    Udp,
    Icmp,
    Arp,
}

/// Actions a conversation asks for; applied by the event loop.
struct Out {
    acts: Vec<(u64, What)>,
}

impl Out {
    fn send(&mut self, t: u64, dir: Direction, tag: Tag, frame: Vec<u8>) {
        self.acts.push((t, What::Send { dir, tag, frame }));
    }
    fn timer(&mut self, t: u64, tag: Tag) {
        self.acts.push((t, What::Timer(tag)));
    }
}

/// Shared state of the simulation that conversations draw from.
struct Ctx {
    cfg: TrafficConfig,
    rng: SimRng,
    server_think: DelaySampler,
    dns_think: DelaySampler,
    client_think: DelaySampler,
}

impl Ctx {
    fn think(&mut self, which: u8) -> u64 {
        let s = match which {
            0 => &self.server_think,
            1 => &self.dns_think,
            _ => &self.client_think,
        };
        to_ns(s.sample(&mut self.rng)).max(self.cfg.min_think_ns)
    }

    /// A short host-internal delay (ACK generation, ping reply), 5–50 µs.
    fn short(&mut self) -> u64 {
        self.rng.random_range(5_000..50_000)
    }

    /// Time between back-to-back segments: 1514 B at 1 Gb/s plus exponential jitter (mean 5 µs).
    fn seg_gap(&mut self) -> u64 {
        let j: f64 = Exp::new(1.0 / 5_000.0).map(|e| e.sample(&mut self.rng)).unwrap_or(0.0);
        12_304 + to_ns(j)
    }

    fn payload(&mut self, len: usize, tag: u64) -> Vec<u8> {
        let mut p = vec![0u8; len];
        self.rng.fill(&mut p[..]);
        // The first bytes carry a per-packet tag so payloads never repeat.
        for (i, b) in tag.to_be_bytes().iter().enumerate() {
            if let Some(x) = p.get_mut(i) {
                *x = *b;
            }
        }
        p
    }
}

/// One end of a conversation and the per-host IP state it keeps.
struct Host {
    addr: SocketAddr,
    ttl: u8,
    ipv4_id: u16,
    flow_label: u32,
    ts_offset: u32,
    macs: MacPair,
}

impl Host {
    fn ip(&mut self) -> IpFields {
        self.ipv4_id = self.ipv4_id.wrapping_add(1);
        IpFields { ttl: self.ttl, dscp: 0, ipv4_id: self.ipv4_id, flow_label: self.flow_label }
    }

    fn tsval(&self, t_ns: u64) -> u32 {
        ((t_ns / 1_000_000) as u32).wrapping_add(self.ts_offset)
    }
}

struct Ends {
    c: Host,
    s: Host,
}

impl Ends {
    fn new(ctx: &mut Ctx, v6: bool, server_port: u16, server: Option<IpAddr>) -> Self {
        let r = &mut ctx.rng;
        let ci = r.random_range(0..ctx.cfg.clients);
        let si = r.random_range(0..ctx.cfg.servers);
        let (cip, sip) = if v6 {
            (
                IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xc, 0, 0, 0, 0, ci + 1)),
                IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x5, 0, 0, 0, 0, si + 1)),
            )
        } else {
            let c = if ci < 250 {
                Ipv4Addr::new(198, 51, 100, (ci + 1) as u8)
            } else {
                Ipv4Addr::new(203, 0, 113, (ci - 249) as u8)
            };
            (IpAddr::V4(c), IpAddr::V4(Ipv4Addr::new(192, 0, 2, (si + 1) as u8)))
        };
        let sip = server.unwrap_or(sip);
        let cport = r.random_range(32_768..61_000);
        let c = Host {
            addr: SocketAddr::new(cip, cport),
            ttl: if r.random::<f64>() < 0.7 { 64 } else { 128 },
            ipv4_id: r.random(),
            flow_label: r.random_range(1..0x10_0000),
            ts_offset: r.random(),
            macs: Direction::Forward.upstream().macs(),
        };
        let s = Host {
            addr: SocketAddr::new(sip, server_port),
            ttl: if r.random::<f64>() < 0.8 { 64 } else { 255 },
            ipv4_id: r.random(),
            flow_label: r.random_range(1..0x10_0000),
            ts_offset: r.random(),
            macs: Direction::Reverse.upstream().macs(),
        };
        Ends { c, s }
    }

    fn v6(&self) -> bool {
        self.c.addr.is_ipv6()
    }
}

enum Conv {
    Pending,
    Tcp(Box<TcpConv>),
    DnsUdp(DnsUdpConv),
    Udp(UdpConv),
    Icmp(IcmpConv),
    Arp(ArpConv),
}

/// Expected packets per conversation of each kind (for the conversation start rate), from
/// 20,000 draws of the flow-size model on a dedicated stream.
fn expected_packets(cfg: &TrafficConfig, seed: u64) -> f64 {
    let mut r = sim::rng(derive(11, seed));
    let n = 20_000;
    let mean_size =
        (0..n).map(|_| f64::from(cfg.flow_packets.sample(&mut r, cfg.max_flow_packets).max(8))).sum::<f64>()
            / n as f64;
    let m = cfg.mix;
    let total = m.tcp + m.dns_udp + m.dns_tcp + m.udp + m.icmp;
    (m.tcp * mean_size + m.dns_udp * 2.0 + m.dns_tcp * 10.0 + m.udp * mean_size + m.icmp * 5.0) / total
}

/// Runs the synthetic traffic of `cfg` from true time `start_ns` for `cfg.duration_ns`, handing
/// every packet to `net` in the order it enters the segment (non-decreasing time).
pub fn simulate(cfg: &TrafficConfig, seed: u64, start_ns: u64, net: &mut dyn Network) -> Result<()> {
    cfg.validate()?;
    let end_ns = start_ns
        .checked_add(cfg.duration_ns)
        .ok_or_else(|| TraceError::Time("start + duration overflows".into()))?;
    let sampler = |m: DelayModel| m.sampler().ok_or_else(|| TraceError::Config(format!("model {m:?}")));
    let mut ctx = Ctx {
        cfg: cfg.clone(),
        rng: sim::rng(derive(12, seed)),
        server_think: sampler(cfg.server_think)?,
        dns_think: sampler(cfg.dns_think)?,
        client_think: sampler(cfg.client_think)?,
    };
    let mut heap: BinaryHeap<Reverse<Ev>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut convs: Vec<Conv> = Vec::new();

    // Conversation starts: a Poisson process on a dedicated stream.
    let mut r = sim::rng(derive(13, seed));
    let conv_rate_per_ns = cfg.packet_rate_pps / expected_packets(cfg, seed) / 1e9;
    let m = cfg.mix;
    let weights = [m.tcp, m.dns_udp, m.dns_tcp, m.udp, m.icmp];
    let total: f64 = weights.iter().sum();
    let kinds = [Kind::Tcp, Kind::DnsUdp, Kind::DnsTcp, Kind::Udp, Kind::Icmp];
    let mut push_starts = |rate_per_ns: f64, pick: &mut dyn FnMut(&mut SimRng) -> Kind, r: &mut SimRng| {
        let Ok(exp) = Exp::new(rate_per_ns) else { return };
        let mut t = start_ns as f64;
        loop {
            t += exp.sample(r);
            if t >= end_ns as f64 {
                break;
            }
            let kind = pick(r);
            heap.push(Reverse(Ev { t_ns: t as u64, seq, conv: convs.len(), what: What::Start(kind) }));
            convs.push(Conv::Pending);
            seq += 1;
        }
    };
    push_starts(
        conv_rate_per_ns,
        &mut |r| {
            let mut u = r.random::<f64>() * total;
            for (k, w) in kinds.iter().zip(weights) {
                if u < w {
                    return *k;
                }
                u -= w;
            }
            Kind::Tcp
        },
        &mut r,
    );
    if cfg.arp_interval_ns > 0 {
        push_starts(1.0 / cfg.arp_interval_ns as f64, &mut |_| Kind::Arp, &mut r);
    }

    while let Some(Reverse(ev)) = heap.pop() {
        if ev.t_ns >= end_ns {
            // Everything later is cut off: the trace ends here.
            break;
        }
        let now = ev.t_ns;
        let mut out = Out { acts: Vec::new() };
        let Some(conv) = convs.get_mut(ev.conv) else {
            return Err(TraceError::Config("internal: conversation index out of range".into()));
        };
        match ev.what {
            What::Start(kind) => {
                let v6 = ctx.rng.random::<f64>() < cfg.ipv6_fraction;
                *conv = match kind {
                    Kind::Tcp | Kind::DnsTcp => {
                        let mut c = TcpConv::new(&mut ctx, v6, kind == Kind::DnsTcp);
                        c.start(&mut ctx, now, &mut out)?;
                        Conv::Tcp(Box::new(c))
                    }
                    Kind::DnsUdp => {
                        let mut c = DnsUdpConv::new(&mut ctx, v6);
                        c.send_query(&mut ctx, now, 0, &mut out)?;
                        Conv::DnsUdp(c)
                    }
                    Kind::Udp => {
                        let mut c = UdpConv::new(&mut ctx, v6);
                        c.start(&mut ctx, now, &mut out)?;
                        Conv::Udp(c)
                    }
                    Kind::Icmp => {
                        let mut c = IcmpConv::new(&mut ctx, v6);
                        c.start(now, &mut out)?;
                        Conv::Icmp(c)
                    }
                    Kind::Arp => {
                        let mut c = ArpConv::new(&mut ctx);
                        c.start(now, &mut out)?;
                        Conv::Arp(c)
                    }
                };
            }
            What::Timer(tag) => match conv {
                Conv::Tcp(c) => c.timer(&mut ctx, now, tag, &mut out)?,
                Conv::DnsUdp(c) => c.timer(&mut ctx, now, tag, &mut out)?,
                _ => {}
            },
            What::Send { dir, tag, frame } => {
                let arrival = net.send(dir, now, frame);
                let delivered = arrival.is_some();
                let arr = arrival.unwrap_or(now + net.nominal_delay_ns(dir));
                match conv {
                    Conv::Tcp(c) => c.arrival(&mut ctx, tag, now, arr, delivered, &mut out)?,
                    Conv::DnsUdp(c) => c.arrival(&mut ctx, tag, arr, delivered, &mut out)?,
                    Conv::Udp(c) => c.arrival(&mut ctx, tag, now, arr, &mut out)?,
                    Conv::Icmp(c) => c.arrival(&mut ctx, tag, now, arr, delivered, &mut out)?,
                    Conv::Arp(c) => c.arrival(&mut ctx, tag, arr, delivered, &mut out)?,
                    Conv::Pending => {}
                }
            }
        }
        for (t, what) in out.acts {
            heap.push(Reverse(Ev { t_ns: t.max(now), seq, conv: ev.conv, what }));
            seq += 1;
        }
    }
    Ok(())
}
