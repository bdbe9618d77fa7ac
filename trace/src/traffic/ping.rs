//! Short fixed exchanges: ICMP echo (a few pings) and ARP request/reply (not IP: forwarded,
//! never measured).

use super::*;

pub(super) struct IcmpConv {
    ends: Ends,
    id: u16,
    count: u16,
}

impl IcmpConv {
    pub(super) fn new(ctx: &mut Ctx, v6: bool) -> Self {
        let ends = Ends::new(ctx, v6, 0, None);
        IcmpConv { ends, id: ctx.rng.random(), count: ctx.rng.random_range(1..=4) }
    }

    pub(super) fn echo(&mut self, request: bool, seq: u16) -> Result<Vec<u8>> {
        let payload: Vec<u8> = (0..56u16).map(|i| (i as u8) ^ (seq as u8)).collect();
        let (h, peer) =
            if request { (&mut self.ends.c, self.ends.s.addr) } else { (&mut self.ends.s, self.ends.c.addr) };
        let ip = h.ip();
        frame::icmp_echo(
            h.macs,
            h.addr.ip(),
            peer.ip(),
            &ip,
            frame::Echo { request, id: self.id, seq },
            &payload,
        )
    }

    pub(super) fn start(&mut self, t: u64, out: &mut Out) -> Result<()> {
        let f = self.echo(true, 0)?;
        out.send(t, Direction::Forward, Tag::Echo(0), f);
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
        if let Tag::Echo(i) = tag {
            if delivered {
                let t = arr + ctx.short();
                let f = self.echo(false, i)?;
                out.send(t, Direction::Reverse, Tag::EchoReply, f);
            }
            if i + 1 < self.count {
                let f = self.echo(true, i + 1)?;
                out.send(sent + 10_000_000, Direction::Forward, Tag::Echo(i + 1), f);
            }
        }
        Ok(())
    }
}

pub(super) struct ArpConv {
    client_mac: [u8; 6],
    client_ip: Ipv4Addr,
    gw_ip: Ipv4Addr,
}

const GW_MAC: [u8; 6] = [0x02, 0x00, 0x5e, 0x20, 0x00, 0x01];

impl ArpConv {
    pub(super) fn new(ctx: &mut Ctx) -> Self {
        let i = ctx.rng.random_range(1..250u8);
        ArpConv {
            client_mac: [0x02, 0x00, 0x5e, 0x30, 0x00, i],
            client_ip: Ipv4Addr::new(198, 51, 100, i),
            gw_ip: Ipv4Addr::new(198, 51, 100, 254),
        }
    }

    pub(super) fn start(&mut self, t: u64, out: &mut Out) -> Result<()> {
        let l2 = MacPair { src: self.client_mac, dst: [0xff; 6] };
        let f = frame::arp(l2, true, self.client_mac, self.client_ip, [0; 6], self.gw_ip)?;
        out.send(t, Direction::Forward, Tag::ArpReq, f);
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
        if tag == Tag::ArpReq && delivered {
            let l2 = MacPair { src: GW_MAC, dst: self.client_mac };
            let f = frame::arp(l2, false, GW_MAC, self.gw_ip, self.client_mac, self.client_ip)?;
            out.send(arr + ctx.short(), Direction::Reverse, Tag::ArpRep, f);
        }
        Ok(())
    }
}
