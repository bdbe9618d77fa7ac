//! DNS: resolvers, questions and the length prefix of DNS over TCP, and DNS over UDP
//! (query, reply after the resolver's think time, retried with the same id and port).

use super::*;

pub(super) fn length_prefixed(msg: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(msg.len() + 2);
    v.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    v.extend_from_slice(msg);
    v
}

pub(super) fn resolver(ctx: &mut Ctx, v6: bool) -> IpAddr {
    let k = ctx.rng.random_range(0..2u8);
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x53, 0, 0, 0, 0, 0x53 + u16::from(k)))
    } else {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 53 + k))
    }
}

const DOMAINS: [&str; 8] = [
    "example.com",
    "example.net",
    "example.org",
    "cdn.example.com",
    "api.example.net",
    "mail.example.org",
    "static.assets.example.com",
    "a.very.long.name.for.testing.example.net",
];

pub(super) fn dns_question(ctx: &mut Ctx, v6: bool) -> (u16, String, DnsType) {
    let r = &mut ctx.rng;
    let d = DOMAINS[r.random_range(0..DOMAINS.len())];
    let name = if r.random::<f64>() < 0.5 {
        format!("h{}.{d}", r.random_range(0..10_000))
    } else {
        format!("www.{d}")
    };
    let qt = if v6 || r.random::<f64>() < 0.3 { DnsType::Aaaa } else { DnsType::A };
    (r.random(), name, qt)
}

pub(super) struct DnsUdpConv {
    ends: Ends,
    id: u16,
    name: String,
    qtype: DnsType,
    answered: bool,
}

impl DnsUdpConv {
    pub(super) fn new(ctx: &mut Ctx, v6: bool) -> Self {
        let server = resolver(ctx, v6);
        let ends = Ends::new(ctx, v6, 53, Some(server));
        let (id, name, qtype) = dns_question(ctx, v6);
        DnsUdpConv { ends, id, name, qtype, answered: false }
    }

    pub(super) fn send_query(&mut self, ctx: &mut Ctx, t: u64, attempt: u8, out: &mut Out) -> Result<()> {
        if attempt > 0 {
            self.ends.c.flow_label = ctx.rng.random_range(1..0x10_0000);
        }
        let q = frame::dns_query(self.id, &self.name, self.qtype)?;
        let ip = self.ends.c.ip();
        let f = frame::udp(self.ends.c.macs, self.ends.c.addr, self.ends.s.addr, &ip, &q)?;
        out.send(t, Direction::Forward, Tag::Query(attempt), f);
        out.timer(t + ctx.cfg.dns_rto_ns, Tag::QueryTimer(attempt));
        Ok(())
    }

    pub(super) fn timer(&mut self, ctx: &mut Ctx, t: u64, tag: Tag, out: &mut Out) -> Result<()> {
        if let Tag::QueryTimer(k) = tag
            && !self.answered
            && k + 1 < ctx.cfg.max_attempts
        {
            self.send_query(ctx, t, k + 1, out)?;
        }
        Ok(())
    }

    pub(super) fn arrival(
        &mut self,
        ctx: &mut Ctx,
        tag: Tag,
        arr: u64,
        delivered: bool,
        out: &mut Out,
    ) -> Result<()> {
        match tag {
            Tag::Query(k) if delivered => {
                if k > 0 {
                    self.ends.s.flow_label = ctx.rng.random_range(1..0x10_0000);
                }
                let t = arr + ctx.think(1);
                let answers = ctx.rng.random_range(1..5);
                let r = frame::dns_reply(self.id, &self.name, self.qtype, answers, ctx.rng.random())?;
                let ip = self.ends.s.ip();
                let f = frame::udp(self.ends.s.macs, self.ends.s.addr, self.ends.c.addr, &ip, &r)?;
                out.send(t, Direction::Reverse, Tag::Reply, f);
            }
            Tag::Reply if delivered => self.answered = true,
            _ => {}
        }
        Ok(())
    }
}
