//! UDP flows: heavy-tailed bidirectional datagram streams with mixed frame sizes.

use super::*;

pub(super) struct UdpConv {
    ends: Ends,
    n_c: u32,
    n_s: u32,
    server_started: bool,
}

/// A datagram frame size: 40 % small (60–128 B), 20 % medium (500–700 B), 40 % large
/// (1200–1514 B).
fn udp_frame_len(ctx: &mut Ctx) -> usize {
    let u: f64 = ctx.rng.random();
    if u < 0.4 {
        ctx.rng.random_range(60..=128)
    } else if u < 0.6 {
        ctx.rng.random_range(500..=700)
    } else {
        ctx.rng.random_range(1200..=1514)
    }
}

impl UdpConv {
    pub(super) fn new(ctx: &mut Ctx, v6: bool) -> Self {
        let port = if ctx.rng.random::<f64>() < 0.8 { 443 } else { 3478 };
        let ends = Ends::new(ctx, v6, port, None);
        let n = ctx.cfg.flow_packets.sample(&mut ctx.rng, ctx.cfg.max_flow_packets).max(2);
        let frac: f64 = ctx.rng.random_range(0.2..0.5);
        let n_c = ((f64::from(n) * frac).round() as u32).clamp(1, n - 1);
        UdpConv { ends, n_c, n_s: n - n_c, server_started: false }
    }

    pub(super) fn datagram(&mut self, ctx: &mut Ctx, client: bool, i: u32) -> Result<Vec<u8>> {
        let overhead = if self.ends.v6() { 14 + 40 + 8 } else { 14 + 20 + 8 };
        let len = udp_frame_len(ctx).saturating_sub(overhead).max(8);
        let payload = ctx.payload(len, (u64::from(client) << 32) | u64::from(i));
        if client {
            let ip = self.ends.c.ip();
            frame::udp(self.ends.c.macs, self.ends.c.addr, self.ends.s.addr, &ip, &payload)
        } else {
            let ip = self.ends.s.ip();
            frame::udp(self.ends.s.macs, self.ends.s.addr, self.ends.c.addr, &ip, &payload)
        }
    }

    pub(super) fn gap(ctx: &mut Ctx) -> u64 {
        let g: f64 = Exp::new(1.0 / 1_000_000.0).map(|e| e.sample(&mut ctx.rng)).unwrap_or(1e6);
        to_ns(g).max(1_000)
    }

    pub(super) fn start(&mut self, ctx: &mut Ctx, t: u64, out: &mut Out) -> Result<()> {
        let f = self.datagram(ctx, true, 0)?;
        out.send(t, Direction::Forward, Tag::UdpC(0), f);
        Ok(())
    }

    pub(super) fn arrival(
        &mut self,
        ctx: &mut Ctx,
        tag: Tag,
        sent: u64,
        arr: u64,
        out: &mut Out,
    ) -> Result<()> {
        match tag {
            Tag::UdpC(i) => {
                if !self.server_started {
                    self.server_started = true;
                    let t = arr + ctx.think(0);
                    let f = self.datagram(ctx, false, 0)?;
                    out.send(t, Direction::Reverse, Tag::UdpS(0), f);
                }
                if i + 1 < self.n_c {
                    let t = sent + Self::gap(ctx);
                    let f = self.datagram(ctx, true, i + 1)?;
                    out.send(t, Direction::Forward, Tag::UdpC(i + 1), f);
                }
            }
            Tag::UdpS(i) if i + 1 < self.n_s => {
                let t = sent + Self::gap(ctx);
                let f = self.datagram(ctx, false, i + 1)?;
                out.send(t, Direction::Reverse, Tag::UdpS(i + 1), f);
            }
            _ => {}
        }
        Ok(())
    }
}
