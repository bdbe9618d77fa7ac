//! TCP conversations (flows and DNS over TCP): handshake with SYN retransmission after a
//! doubling RTO, request/response rounds, FIN exchange; every segment carries a timestamp
//! option.

use super::dns::{dns_question, length_prefixed, resolver};
use super::*;

fn tcp_opts(syn: bool, tsval: u32, tsecr: u32, v6: bool) -> Vec<TcpOptionElement> {
    use TcpOptionElement::*;
    if syn {
        vec![
            MaximumSegmentSize(if v6 { 1440 } else { 1460 }),
            SelectiveAcknowledgementPermitted,
            Timestamp(tsval, tsecr),
            Noop,
            WindowScale(7),
        ]
    } else {
        vec![Noop, Noop, Timestamp(tsval, tsecr)]
    }
}

/// Largest TCP payload with the 12-byte timestamp option in a 1514-byte frame.
fn mss(v6: bool) -> usize {
    if v6 { 1500 - 40 - 32 } else { 1500 - 20 - 32 }
}

pub(super) struct TcpConv {
    ends: Ends,
    isn_c: u32,
    isn_s: u32,
    c_next: u32,
    s_next: u32,
    c_ts_seen: u32,
    s_ts_seen: u32,
    established: bool,
    server_open: bool,
    syn_acked: bool,
    budget: u32,
    emitted: u32,
    resp_total: u32,
    resp_arrived: u32,
    /// Sequence number after each response segment of the current round.
    resp_ends: Vec<u32>,
    /// When the client last sent an ACK (its ACKs leave in order).
    c_ack_t: u64,
    dns: Option<(u16, String, DnsType)>,
    done: bool,
}

impl TcpConv {
    pub(super) fn new(ctx: &mut Ctx, v6: bool, dns: bool) -> Self {
        let port = if dns {
            53
        } else if ctx.rng.random::<f64>() < 0.7 {
            443
        } else {
            80
        };
        let server = if dns { Some(resolver(ctx, v6)) } else { None };
        let ends = Ends::new(ctx, v6, port, server);
        let budget =
            if dns { 12 } else { ctx.cfg.flow_packets.sample(&mut ctx.rng, ctx.cfg.max_flow_packets) };
        let isn_c: u32 = ctx.rng.random();
        let isn_s: u32 = ctx.rng.random();
        let dns = if dns { Some(dns_question(ctx, v6)) } else { None };
        TcpConv {
            ends,
            isn_c,
            isn_s,
            c_next: isn_c.wrapping_add(1),
            s_next: isn_s.wrapping_add(1),
            c_ts_seen: 0,
            s_ts_seen: 0,
            established: false,
            server_open: false,
            syn_acked: false,
            budget: budget.max(8),
            emitted: 0,
            resp_total: 0,
            resp_arrived: 0,
            resp_ends: Vec::new(),
            c_ack_t: 0,
            dns,
            done: false,
        }
    }

    pub(super) fn client_seg(
        &mut self,
        t: u64,
        seq: u32,
        flags: u8,
        ack: Option<u32>,
        payload: &[u8],
    ) -> Result<Vec<u8>> {
        let v6 = self.ends.v6();
        let syn = flags & tcp_flags::SYN != 0;
        let tsval = self.ends.c.tsval(t);
        let f = TcpFields {
            seq,
            ack,
            flags,
            window: 502,
            options: tcp_opts(syn, tsval, if syn { 0 } else { self.s_ts_seen }, v6),
        };
        let ip = self.ends.c.ip();
        self.emitted += 1;
        frame::tcp(self.ends.c.macs, self.ends.c.addr, self.ends.s.addr, &ip, &f, payload)
    }

    pub(super) fn server_seg(
        &mut self,
        t: u64,
        seq: u32,
        flags: u8,
        ack: u32,
        payload: &[u8],
    ) -> Result<Vec<u8>> {
        let v6 = self.ends.v6();
        let syn = flags & tcp_flags::SYN != 0;
        let tsval = self.ends.s.tsval(t);
        let f = TcpFields {
            seq,
            ack: Some(ack),
            flags,
            window: 509,
            options: tcp_opts(syn, tsval, self.c_ts_seen, v6),
        };
        let ip = self.ends.s.ip();
        self.emitted += 1;
        frame::tcp(self.ends.s.macs, self.ends.s.addr, self.ends.c.addr, &ip, &f, payload)
    }

    pub(super) fn send_syn(&mut self, ctx: &mut Ctx, t: u64, attempt: u8, out: &mut Out) -> Result<()> {
        if attempt > 0 {
            self.ends.c.flow_label = ctx.rng.random_range(1..0x10_0000);
        }
        let f = self.client_seg(t, self.isn_c, tcp_flags::SYN, None, &[])?;
        out.send(t, Direction::Forward, Tag::Syn(attempt), f);
        out.timer(t + (ctx.cfg.syn_rto_ns << attempt), Tag::SynTimer(attempt));
        Ok(())
    }

    pub(super) fn start(&mut self, ctx: &mut Ctx, t: u64, out: &mut Out) -> Result<()> {
        self.send_syn(ctx, t, 0, out)
    }

    pub(super) fn timer(&mut self, ctx: &mut Ctx, t: u64, tag: Tag, out: &mut Out) -> Result<()> {
        if let Tag::SynTimer(k) = tag
            && !self.established
            && k + 1 < ctx.cfg.max_attempts
        {
            self.send_syn(ctx, t, k + 1, out)?;
        }
        Ok(())
    }

    pub(super) fn send_request(&mut self, ctx: &mut Ctx, t: u64, out: &mut Out) -> Result<()> {
        let payload = match &self.dns {
            Some((id, name, qt)) => length_prefixed(&frame::dns_query(*id, name, *qt)?),
            None => {
                let n = ctx.rng.random_range(40..600);
                ctx.payload(n, u64::from(self.c_next))
            }
        };
        let seq = self.c_next;
        self.c_next = self.c_next.wrapping_add(payload.len() as u32);
        let f = self.client_seg(t, seq, tcp_flags::PSH, Some(self.s_next), &payload)?;
        out.send(t, Direction::Forward, Tag::Req, f);
        Ok(())
    }

    pub(super) fn send_fin(&mut self, t: u64, out: &mut Out) -> Result<()> {
        let f = self.client_seg(t, self.c_next, tcp_flags::FIN, Some(self.s_next), &[])?;
        self.c_next = self.c_next.wrapping_add(1);
        out.send(t, Direction::Forward, Tag::Fin, f);
        Ok(())
    }

    pub(super) fn arrival(
        &mut self,
        ctx: &mut Ctx,
        tag: Tag,
        sent: u64,
        arr: u64,
        delivered: bool,
        out: &mut Out,
    ) -> Result<()> {
        if self.done {
            return Ok(());
        }
        match tag {
            Tag::Syn(_) if delivered => {
                self.c_ts_seen = self.ends.c.tsval(sent);
                if !self.server_open {
                    // A duplicate SYN makes the server resend its SYN/ACK at once.
                    let think = if self.syn_acked { ctx.cfg.min_think_ns } else { ctx.think(0) };
                    self.syn_acked = true;
                    let t = arr + think;
                    let f =
                        self.server_seg(t, self.isn_s, tcp_flags::SYN, self.isn_c.wrapping_add(1), &[])?;
                    out.send(t, Direction::Reverse, Tag::SynAck, f);
                }
            }
            Tag::SynAck if delivered && !self.established => {
                self.established = true;
                self.s_ts_seen = self.ends.s.tsval(sent);
                let t = arr + ctx.short();
                let f = self.client_seg(t, self.c_next, 0, Some(self.s_next), &[])?;
                out.send(t, Direction::Forward, Tag::HsAck, f);
                let t2 = t + ctx.short();
                self.send_request(ctx, t2, out)?;
            }
            Tag::HsAck => self.server_open = true,
            Tag::Req => {
                self.server_open = true;
                self.c_ts_seen = self.ends.c.tsval(sent);
                let mut t = arr + ctx.think(if self.dns.is_some() { 1 } else { 0 });
                let segs: Vec<Vec<u8>> = match &self.dns {
                    Some((id, name, qt)) => {
                        let answers = ctx.rng.random_range(1..5);
                        vec![length_prefixed(&frame::dns_reply(*id, name, *qt, answers, ctx.rng.random())?)]
                    }
                    None => {
                        let left = self.budget.saturating_sub(self.emitted + 4);
                        let mean = 6.0f64;
                        let g: f64 = Exp::new(1.0 / mean).map(|e| e.sample(&mut ctx.rng)).unwrap_or(1.0);
                        let k = (g.ceil() as u32).clamp(1, (left * 2 / 3).max(1));
                        let mss = mss(self.ends.v6());
                        (0..k)
                            .map(|i| {
                                let n = if i + 1 == k { ctx.rng.random_range(1..=mss) } else { mss };
                                ctx.payload(n, u64::from(self.s_next) + u64::from(i))
                            })
                            .collect()
                    }
                };
                self.resp_total = segs.len() as u32;
                self.resp_arrived = 0;
                self.resp_ends.clear();
                for p in segs {
                    let seq = self.s_next;
                    self.s_next = self.s_next.wrapping_add(p.len() as u32);
                    self.resp_ends.push(self.s_next);
                    let f = self.server_seg(t, seq, tcp_flags::PSH, self.c_next, &p)?;
                    out.send(t, Direction::Reverse, Tag::Resp, f);
                    t += ctx.seg_gap();
                }
            }
            Tag::Resp => {
                self.resp_arrived += 1;
                self.s_ts_seen = self.ends.s.tsval(sent);
                let last = self.resp_arrived == self.resp_total;
                if self.resp_arrived.is_multiple_of(2) || last {
                    // Cumulative ACK of what has arrived (segments counted in arrival order).
                    let ack =
                        self.resp_ends.get(self.resp_arrived as usize - 1).copied().unwrap_or(self.s_next);
                    let t = (arr + ctx.short()).max(self.c_ack_t + 1_000);
                    self.c_ack_t = t;
                    let f = self.client_seg(t, self.c_next, 0, Some(ack), &[])?;
                    out.send(t, Direction::Forward, Tag::CAck, f);
                }
                if last {
                    // The next request (or FIN) leaves after the ACK just sent.
                    let t = (arr + ctx.think(2)).max(self.c_ack_t + 1_000);
                    if self.dns.is_some() || self.emitted + 6 >= self.budget {
                        self.send_fin(t, out)?;
                    } else {
                        self.send_request(ctx, t, out)?;
                    }
                }
            }
            Tag::Fin => {
                let t = arr + ctx.short();
                let f = self.server_seg(t, self.s_next, tcp_flags::FIN, self.c_next, &[])?;
                self.s_next = self.s_next.wrapping_add(1);
                out.send(t, Direction::Reverse, Tag::FinAck, f);
            }
            Tag::FinAck => {
                let t = arr + ctx.short();
                let f = self.client_seg(t, self.c_next, 0, Some(self.s_next), &[])?;
                out.send(t, Direction::Forward, Tag::LastAck, f);
                self.done = true;
            }
            _ => {}
        }
        Ok(())
    }
}
