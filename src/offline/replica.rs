//! `wirelat offline --replicas`: every emulated worker gets its own copy of the whole trace, so
//! N workers carry N times the trace's rate, as N queues of a busy NIC would. Without it the
//! trace is split among the workers, and each worker's fixed cost per epoch (draining its
//! shards) is spread over 1/N of the packets a full-rate worker would bring: the control
//! thread's cost per packet then grows with N for a reason a real deployment does not have.
//!
//! A copy differs from the trace only in the first octet of both IP addresses, XORed with the
//! worker's index: its flows, packet ids and request/response pairs stay consistent (a reply's
//! source is its request's destination in every copy) but are nobody else's, so no id repeats
//! across workers. Frames without a plain Ethernet (802.1Q/802.1ad tagged or not) IPv4 or IPv6
//! header are copied unchanged and counted: measured, their ids would repeat across workers and
//! RDA would exclude them as duplicates. Not a data path: it allocates per frame.

/// Ethertypes walked to the IP header.
const IPV4: u16 = 0x0800;
const IPV6: u16 = 0x86dd;
const VLAN_TAGS: [u16; 3] = [0x8100, 0x88a8, 0x9100];
/// Most VLAN tags walked.
const MAX_TAGS: usize = 4;

/// Offsets of the source and destination addresses' first octets in `frame`, or `None` when it
/// is not Ethernet (+ tags) + IPv4/IPv6 long enough to hold both addresses.
fn address_offsets(frame: &[u8]) -> Option<(usize, usize)> {
    let mut at = 12;
    for _ in 0..=MAX_TAGS {
        let ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        let ip = at + 2;
        match ethertype {
            IPV4 if frame.len() >= ip + 20 => return Some((ip + 12, ip + 16)),
            IPV6 if frame.len() >= ip + 40 => return Some((ip + 8, ip + 24)),
            t if VLAN_TAGS.contains(&t) => at += 4,
            _ => return None,
        }
    }
    None
}

/// The copy of `frame` that emulated worker `worker` receives (`worker` 0: the frame itself),
/// and whether its addresses were offset.
pub fn copy_for(frame: &[u8], worker: usize) -> (Vec<u8>, bool) {
    let mut copy = frame.to_vec();
    // Workers are at most 127 (the CLI's range), so the index fits an octet.
    let salt = u8::try_from(worker).unwrap_or(u8::MAX);
    if salt == 0 {
        return (copy, true);
    }
    match address_offsets(frame) {
        Some((src, dst)) => {
            for i in [src, dst] {
                if let Some(b) = copy.get_mut(i) {
                    *b ^= salt;
                }
            }
            (copy, true)
        }
        None => (copy, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelat_dataplane::packet::{self, PacketConfig, sample};

    #[test]
    fn copies_are_new_flows_and_ids_whose_replies_still_match() {
        let cfg = PacketConfig::default();
        let frames = sample::frames();
        let mut offset = 0;
        for f in &frames {
            let Ok(original) = packet::measure(&f.data, &cfg) else { continue };
            let (copy, changed) = copy_for(&f.data, 3);
            if !changed {
                continue;
            }
            offset += 1;
            let m = packet::measure(&copy, &cfg).expect("a copy measures like its original");
            assert_ne!(m.identity, original.identity, "a copy's id is its own");
            assert_ne!(m.flow, original.flow);
            // The reply of the copied flow is the copy of the original's reply.
            let (back, _) = copy_for(&copy, 3);
            assert_eq!(packet::measure(&back, &cfg).expect("measures").identity, original.identity);
            assert_eq!(copy.len(), f.data.len());
        }
        assert!(offset > 0, "the sample holds IP frames");
        let (same, changed) = copy_for(&frames[0].data, 0);
        assert!(changed);
        assert_eq!(same, frames[0].data);
    }

    #[test]
    fn frames_without_an_ip_header_are_left_alone() {
        let arp = [vec![0xff; 12], vec![0x08, 0x06], vec![0; 28]].concat();
        assert_eq!(copy_for(&arp, 5), (arp.clone(), false));
        let short_v4 = [vec![0; 12], vec![0x08, 0x00], vec![0x45; 10]].concat();
        assert_eq!(copy_for(&short_v4, 5), (short_v4.clone(), false));
        assert_eq!(copy_for(&[], 2), (Vec::new(), false));
        // Tagged twice, then IPv4: the addresses after both tags.
        let mut tagged =
            [vec![0; 12], vec![0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2, 0x08, 0x00], vec![0; 20]].concat();
        tagged[22 + 12] = 10;
        tagged[22 + 16] = 192;
        let (c, changed) = copy_for(&tagged, 1);
        assert!(changed);
        assert_eq!((c[22 + 12], c[22 + 16]), (11, 193));
    }
}
