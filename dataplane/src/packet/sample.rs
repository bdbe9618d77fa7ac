//! A small, deterministic set of varied Ethernet frames: what the bundled
//! `data/sample.pcap` holds, and what tests and demos feed through the appliance.
//!
//! Covers what a bump in the wire must pass untouched: TCP (handshake and data), UDP (DNS
//! query and answer), ICMP echo, ARP, an 802.1Q VLAN tag, QinQ, IPv6 (TCP and ICMPv6), an IPv4
//! fragment, PTP and LLDP, an unknown ethertype, a truncated frame (snap-length cut: fewer bytes
//! captured than were on the wire) and a ~9000-byte jumbo frame. Checksums are not computed:
//! the appliance must forward frames byte for byte whatever they contain.
//!
//! Pure data: no I/O (the `wirelat sample-pcap` command writes it as a pcap file).

/// One frame with its capture metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleFrame {
    /// Capture time in nanoseconds since the Unix epoch (whole microseconds, as pcap stores).
    pub ts_ns: u64,
    /// Length of the frame on the wire (larger than `data.len()` for a truncated capture).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
    /// What the frame is, for test messages.
    pub what: &'static str,
}

/// Total length of the jumbo frame in the sample.
pub const JUMBO_FRAME_BYTES: usize = 9000;

const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];
const IP_A: [u8; 4] = [10, 0, 0, 1];
const IP_B: [u8; 4] = [10, 0, 0, 2];
const IP6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const IP6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// First capture time: 2024-01-01T00:00:00Z.
const START_NS: u64 = 1_704_067_200_000_000_000;

/// The sample frames, in capture order, 100 µs apart.
pub fn frames() -> Vec<SampleFrame> {
    let plain: Vec<(&'static str, Vec<u8>)> = vec![
        (
            "TCP SYN",
            eth(MAC_A, MAC_B, 0x0800, &ipv4(IP_A, IP_B, 6, 0x4000, &tcp(40000, 80, 1000, 0, 0x02, &[]))),
        ),
        (
            "TCP SYN/ACK",
            eth(MAC_B, MAC_A, 0x0800, &ipv4(IP_B, IP_A, 6, 0x4000, &tcp(80, 40000, 5000, 1001, 0x12, &[]))),
        ),
        (
            "TCP ACK",
            eth(MAC_A, MAC_B, 0x0800, &ipv4(IP_A, IP_B, 6, 0x4000, &tcp(40000, 80, 1001, 5001, 0x10, &[]))),
        ),
        (
            "TCP data",
            eth(
                MAC_A,
                MAC_B,
                0x0800,
                &ipv4(IP_A, IP_B, 6, 0x4000, &tcp(40000, 80, 1001, 5001, 0x18, b"GET / HTTP/1.1\r\n\r\n")),
            ),
        ),
        (
            "UDP DNS query",
            eth(MAC_A, MAC_B, 0x0800, &ipv4(IP_A, IP_B, 17, 0, &udp(53000, 53, &dns(0x1234, false)))),
        ),
        (
            "UDP DNS answer",
            eth(MAC_B, MAC_A, 0x0800, &ipv4(IP_B, IP_A, 17, 0, &udp(53, 53000, &dns(0x1234, true)))),
        ),
        ("ICMP echo request", eth(MAC_A, MAC_B, 0x0800, &ipv4(IP_A, IP_B, 1, 0, &icmp_echo(8, 7, 1)))),
        ("ICMP echo reply", eth(MAC_B, MAC_A, 0x0800, &ipv4(IP_B, IP_A, 1, 0, &icmp_echo(0, 7, 1)))),
        ("ARP request", eth([0xff; 6], MAC_A, 0x0806, &arp(1, MAC_A, IP_A, [0; 6], IP_B))),
        ("ARP reply", eth(MAC_A, MAC_B, 0x0806, &arp(2, MAC_B, IP_B, MAC_A, IP_A))),
        (
            "802.1Q VLAN 100 UDP",
            vlan(MAC_A, MAC_B, &[(0x8100, 100)], 0x0800, &ipv4(IP_A, IP_B, 17, 0, &udp(5000, 6000, b"vlan"))),
        ),
        (
            "QinQ 802.1ad 10 / 802.1Q 20 TCP",
            vlan(
                MAC_A,
                MAC_B,
                &[(0x88a8, 10), (0x8100, 20)],
                0x0800,
                &ipv4(IP_A, IP_B, 6, 0x4000, &tcp(1, 2, 3, 4, 0x02, &[])),
            ),
        ),
        (
            "IPv6 TCP SYN",
            eth(MAC_A, MAC_B, 0x86dd, &ipv6(IP6_A, IP6_B, 6, &tcp(40001, 443, 7, 0, 0x02, &[]))),
        ),
        ("IPv6 ICMPv6 echo", eth(MAC_B, MAC_A, 0x86dd, &ipv6(IP6_B, IP6_A, 58, &icmp_echo(128, 9, 1)))),
        (
            "IPv4 first fragment UDP",
            eth(MAC_A, MAC_B, 0x0800, &ipv4(IP_A, IP_B, 17, 0x2000, &udp(7000, 7001, &[0x5a; 64]))),
        ),
        (
            "PTP sync (ethertype 0x88f7)",
            eth([0x01, 0x1b, 0x19, 0, 0, 0], MAC_A, 0x88f7, &[0x00, 0x02, 0x00, 0x2c, 0, 0, 0, 0]),
        ),
        (
            "LLDP (ethertype 0x88cc)",
            eth(
                [0x01, 0x80, 0xc2, 0, 0, 0x0e],
                MAC_B,
                0x88cc,
                &[0x02, 0x07, 0x04, 2, 0, 0, 0, 0, 0x0b, 0, 0],
            ),
        ),
        ("unknown ethertype 0x9999", eth(MAC_A, MAC_B, 0x9999, b"opaque payload")),
    ];
    let mut list: Vec<(&'static str, Vec<u8>, Option<u32>)> =
        plain.into_iter().map(|(w, d)| (w, d, None)).collect();
    // Truncated: a TCP data frame captured with a 54-byte snap length (Ethernet + IPv4 + 20
    // bytes of TCP header): the IP total length says more than the frame holds.
    let full = eth(
        MAC_A,
        MAC_B,
        0x0800,
        &ipv4(IP_A, IP_B, 6, 0x4000, &tcp(40000, 80, 1019, 5001, 0x18, &[0x42; 200])),
    );
    let orig_len = full.len() as u32;
    list.push(("truncated TCP (54 of 274 bytes captured)", full[..54].to_vec(), Some(orig_len)));
    // Jumbo: IPv4/UDP padded to JUMBO_FRAME_BYTES on the wire, with a non-repeating payload.
    let payload_len = JUMBO_FRAME_BYTES - 14 - 20 - 8;
    let payload: Vec<u8> = (0..payload_len).map(|i| (i * 7 + i / 251) as u8).collect();
    list.push((
        "jumbo IPv4 UDP (9000 bytes)",
        eth(MAC_A, MAC_B, 0x0800, &ipv4(IP_A, IP_B, 17, 0x4000, &udp(9000, 9001, &payload))),
        None,
    ));
    // A last small frame so that the jumbo frame is not at the end of the file.
    list.push((
        "TCP FIN",
        eth(MAC_A, MAC_B, 0x0800, &ipv4(IP_A, IP_B, 6, 0x4000, &tcp(40000, 80, 1019, 5001, 0x11, &[]))),
        None,
    ));

    list.into_iter()
        .enumerate()
        .map(|(i, (what, data, orig))| SampleFrame {
            ts_ns: START_NS + i as u64 * 100_000,
            orig_len: orig.unwrap_or(data.len() as u32),
            data,
            what,
        })
        .collect()
}

fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    vlan(dst, src, &[], ethertype, payload)
}

fn vlan(dst: [u8; 6], src: [u8; 6], tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + 4 * tags.len() + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    for &(tpid, vid) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, flags_frag: u16, payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut p = vec![0x45, 0x00];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0x1c, 0x46]); // identification
    p.extend_from_slice(&flags_frag.to_be_bytes());
    p.extend_from_slice(&[64, proto, 0, 0]); // TTL, protocol, checksum (not computed)
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(payload);
    p
}

fn ipv6(src: [u8; 16], dst: [u8; 16], next: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0x00, 0x00, 0x00];
    p.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    p.extend_from_slice(&[next, 64]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(payload);
    p
}

fn tcp(sport: u16, dport: u16, seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(20 + payload.len());
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]); // offset 5, window, csum, urg
    t.extend_from_slice(payload);
    t
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + payload.len());
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

fn icmp_echo(kind: u8, id: u16, seq: u16) -> Vec<u8> {
    let mut i = vec![kind, 0, 0, 0];
    i.extend_from_slice(&id.to_be_bytes());
    i.extend_from_slice(&seq.to_be_bytes());
    i.extend_from_slice(b"wirelat ping");
    i
}

fn arp(op: u16, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut a = vec![0x00, 0x01, 0x08, 0x00, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&sha);
    a.extend_from_slice(&spa);
    a.extend_from_slice(&tha);
    a.extend_from_slice(&tpa);
    a
}

/// A DNS message for `example.com A`, with one answer when `answer` is set.
fn dns(id: u16, answer: bool) -> Vec<u8> {
    let mut d = id.to_be_bytes().to_vec();
    d.extend_from_slice(if answer { &[0x81, 0x80] } else { &[0x01, 0x00] });
    d.extend_from_slice(&[0, 1, 0, u8::from(answer), 0, 0, 0, 0]);
    d.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
    if answer {
        d.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 93, 184, 216, 34]);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_has_every_kind_of_frame() {
        let f = frames();
        let ethertype = |d: &[u8]| u16::from_be_bytes([d[12], d[13]]);
        assert!(f.iter().any(|x| ethertype(&x.data) == 0x0806), "ARP");
        assert!(f.iter().any(|x| ethertype(&x.data) == 0x8100), "802.1Q");
        assert!(f.iter().any(|x| ethertype(&x.data) == 0x86dd), "IPv6");
        let ipv4_proto =
            |p: u8| f.iter().any(|x| ethertype(&x.data) == 0x0800 && x.data.len() > 23 && x.data[23] == p);
        assert!(ipv4_proto(6) && ipv4_proto(17) && ipv4_proto(1), "TCP, UDP, ICMP over IPv4");
        assert!(f.iter().any(|x| (x.orig_len as usize) > x.data.len()), "truncated capture");
        assert!(f.iter().any(|x| x.data.len() == JUMBO_FRAME_BYTES), "jumbo frame");
        assert!(f.windows(2).all(|w| w[0].ts_ns < w[1].ts_ns), "increasing timestamps");
        assert!(f.iter().all(|x| x.ts_ns % 1000 == 0), "whole microseconds");
    }

    #[test]
    fn lengths_in_headers_match_the_frames() {
        for x in frames().iter().filter(|x| x.orig_len as usize == x.data.len()) {
            let d = &x.data;
            if u16::from_be_bytes([d[12], d[13]]) == 0x0800 {
                let total = u16::from_be_bytes([d[16], d[17]]) as usize;
                assert_eq!(total + 14, d.len(), "{}", x.what);
            }
        }
    }
}
