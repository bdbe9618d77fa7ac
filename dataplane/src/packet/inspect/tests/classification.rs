//! Request/response classification: TCP handshakes over IPv4 and IPv6, DNS over UDP and TCP,
//! and TCP data with its covering ACK when enabled.

use super::*;

fn exchange(spec: &FrameSpec, cfg: &PacketConfig) -> Option<Exchange> {
    measured(&spec.build(), cfg).exchange
}

#[test]
fn syn_and_syn_ack_pair() {
    let c = cfg();
    let syn = tcp4(1000, 0, SYN, b"");
    let syn_ack = reversed(tcp4(5000, 1001, SYN | ACK, b""));
    let req = exchange(&syn, &c).unwrap();
    let resp = exchange(&syn_ack, &c).unwrap();
    assert_eq!((req.kind, req.role), (ExchangeKind::TcpHandshake, Role::Request));
    assert_eq!((resp.kind, resp.role), (ExchangeKind::TcpHandshake, Role::Response));
    assert_eq!(req.id, resp.id);
    let flow = measured(&syn.build(), &c).flow;
    assert_eq!(req.id, pairing_id(ExchangeKind::TcpHandshake, &flow, 1001, c.identity_seed));

    // P6: a retransmitted SYN (same ISN, later IP id) has the same id again.
    let mut again = syn.clone();
    let IpSpec::V4 { ident, .. } = &mut again.ip else { unreachable!() };
    *ident = 0x9999;
    assert_eq!(exchange(&again, &c).unwrap().id, req.id);
    // P7: a duplicated SYN/ACK too; the fridge erases on the first match.
    assert_eq!(exchange(&syn_ack.clone(), &c).unwrap().id, resp.id);

    // Non-matching responses: wrong ack, wrong direction, other port, other ISN.
    let wrong_ack = reversed(tcp4(5000, 1000, SYN | ACK, b""));
    assert_ne!(exchange(&wrong_ack, &c).unwrap().id, req.id);
    let same_dir = tcp4(5000, 1001, SYN | ACK, b"");
    assert_ne!(exchange(&same_dir, &c).unwrap().id, req.id);
    let mut other_port = syn_ack.clone();
    let L4Spec::Tcp { dst_port, .. } = &mut other_port.l4 else { unreachable!() };
    *dst_port = 40001;
    assert_ne!(exchange(&other_port, &c).unwrap().id, req.id);
    assert_ne!(exchange(&tcp4(2000, 0, SYN, b""), &c).unwrap().id, req.id);

    // The third packet of the handshake, RSTs and a disabled classifier give nothing.
    assert_eq!(exchange(&tcp4(1001, 5001, ACK, b""), &c), None);
    assert_eq!(exchange(&tcp4(1000, 0, SYN | RST, b""), &c), None);
    let mut off = cfg();
    off.classify.tcp_handshake = false;
    assert_eq!(exchange(&syn, &off), None);
    // Sequence wrap: seq + 1 wraps to 0.
    let wrap = tcp4(u32::MAX, 0, SYN, b"");
    let wrap_resp = reversed(tcp4(7, 0, SYN | ACK, b""));
    assert_eq!(exchange(&wrap, &c).unwrap().id, exchange(&wrap_resp, &c).unwrap().id);
}

#[test]
fn syn_ack_pair_over_ipv6() {
    let c = cfg();
    let syn = FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::tcp(1234, 443, 77, 0, SYN), vec![]);
    let syn_ack =
        reversed(FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::tcp(1234, 443, 900, 78, SYN | ACK), vec![]));
    assert_eq!(exchange(&syn, &c).unwrap().id, exchange(&syn_ack, &c).unwrap().id);
}

#[test]
fn dns_over_udp_pairs_on_reversed_tuple_and_id() {
    let c = cfg();
    let q = FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(53001, 53), dns_msg(0xbeef, false));
    let r = reversed(FrameSpec::new(IpSpec::v4(C4, S4, 2), L4Spec::udp(53001, 53), dns_msg(0xbeef, true)));
    let (req, resp) = (exchange(&q, &c).unwrap(), exchange(&r, &c).unwrap());
    assert_eq!(
        (req.kind, req.role, resp.kind, resp.role),
        (ExchangeKind::Dns, Role::Request, ExchangeKind::Dns, Role::Response)
    );
    assert_eq!(req.id, resp.id);
    // Another id, another client port, or a reply from elsewhere does not match.
    let other_id =
        reversed(FrameSpec::new(IpSpec::v4(C4, S4, 2), L4Spec::udp(53001, 53), dns_msg(0xbeee, true)));
    assert_ne!(exchange(&other_id, &c).unwrap().id, req.id);
    let other_port =
        reversed(FrameSpec::new(IpSpec::v4(C4, S4, 2), L4Spec::udp(53002, 53), dns_msg(0xbeef, true)));
    assert_ne!(exchange(&other_port, &c).unwrap().id, req.id);
    // A query and a reply over IPv6 pair too.
    let q6 = FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::udp(40000, 53), dns_msg(7, false));
    let r6 = reversed(FrameSpec::new(IpSpec::v6(C6, S6), L4Spec::udp(40000, 53), dns_msg(7, true)));
    assert_eq!(exchange(&q6, &c).unwrap().id, exchange(&r6, &c).unwrap().id);
    // Not DNS: wrong port, a "reply" sent to port 53, a header cut short, classifier off.
    assert_eq!(
        exchange(&FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(1, 54), dns_msg(1, false)), &c),
        None
    );
    assert_eq!(
        exchange(&FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(1, 53), dns_msg(1, true)), &c),
        None
    );
    assert_eq!(exchange(&FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(1, 53), vec![0; 11]), &c), None);
    let mut off = cfg();
    off.classify.dns = false;
    assert_eq!(exchange(&q, &off), None);
    // Extra DNS ports.
    let mut mdns = cfg();
    mdns.classify.dns_ports = vec![53, 5353];
    let q = FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(5353, 5353), dns_msg(0, false));
    let r = reversed(FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(5353, 5353), dns_msg(0, true)));
    assert_eq!(exchange(&q, &mdns).unwrap().id, exchange(&r, &mdns).unwrap().id);
    assert_eq!(exchange(&q, &c), None);
}

#[test]
fn dns_over_tcp_skips_the_length_prefix() {
    let c = cfg();
    let framed = |m: Vec<u8>| {
        let mut v = (m.len() as u16).to_be_bytes().to_vec();
        v.extend(m);
        v
    };
    let q = tcp4(100, 500, PSH | ACK, &framed(dns_msg(0x4242, false)));
    let L4Spec::Tcp { dst_port, .. } = &mut q.clone().l4 else { unreachable!() };
    assert_eq!(*dst_port, 80);
    let mut q = q;
    let L4Spec::Tcp { dst_port, .. } = &mut q.l4 else { unreachable!() };
    *dst_port = 53;
    let mut r = reversed(tcp4(500, 140, PSH | ACK, &framed(dns_msg(0x4242, true))));
    let L4Spec::Tcp { src_port, .. } = &mut r.l4 else { unreachable!() };
    *src_port = 53;
    let (req, resp) = (exchange(&q, &c).unwrap(), exchange(&r, &c).unwrap());
    assert_eq!((req.kind, req.role, resp.role), (ExchangeKind::Dns, Role::Request, Role::Response));
    assert_eq!(req.id, resp.id);
    // The same DNS id over UDP is another exchange (the protocol is part of the flow key).
    let udp_q = FrameSpec::new(IpSpec::v4(C4, S4, 1), L4Spec::udp(40000, 53), dns_msg(0x4242, false));
    assert_ne!(exchange(&udp_q, &c).unwrap().id, req.id);
    // A pure ACK on port 53 and a segment without the length prefix are not DNS.
    let mut ack = q.clone();
    ack.payload.clear();
    assert_eq!(exchange(&ack, &c), None);
    let mut unframed = q.clone();
    unframed.payload = dns_msg(0x4242, false);
    unframed.payload[1] = 5; // read as a length prefix of 0x4205... and a header from byte 2
    let x = exchange(&unframed, &c);
    assert!(x.is_none_or(|x| x.id != req.id));
}

#[test]
fn tcp_data_and_covering_ack_when_enabled() {
    let mut c = cfg();
    let data = tcp4(1000, 1, PSH | ACK, &[0u8; 100]);
    let ack = reversed(tcp4(1, 1100, ACK, b""));
    assert_eq!(exchange(&data, &c), None, "off by default");
    assert_eq!(exchange(&ack, &c), None);
    c.classify.tcp_data = true;
    let (req, resp) = (exchange(&data, &c).unwrap(), exchange(&ack, &c).unwrap());
    assert_eq!(
        (req.kind, req.role, resp.kind, resp.role),
        (ExchangeKind::TcpData, Role::Request, ExchangeKind::TcpData, Role::Response)
    );
    assert_eq!(req.id, resp.id);
    // An ACK that covers less, or that is sent in the same direction, does not match.
    assert_ne!(exchange(&reversed(tcp4(1, 1099, ACK, b"")), &c).unwrap().id, req.id);
    assert_ne!(exchange(&tcp4(1, 1100, ACK, b""), &c).unwrap().id, req.id);
    // FIN takes a sequence number.
    let fin = tcp4(1000, 1, FIN | ACK, &[0u8; 100]);
    let fin_ack = reversed(tcp4(1, 1101, ACK, b""));
    assert_eq!(exchange(&fin, &c).unwrap().id, exchange(&fin_ack, &c).unwrap().id);
    // The handshake classifier keeps SYNs; RSTs are nothing.
    assert_eq!(exchange(&tcp4(1, 0, SYN, b""), &c).unwrap().kind, ExchangeKind::TcpHandshake);
    assert_eq!(exchange(&tcp4(1, 0, RST | ACK, b""), &c), None);
}
