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

use wirelat_dataplane::packet::ethernet::{self, ethertype};
use wirelat_dataplane::packet::vlan;

/// Most VLAN tags walked.
const MAX_TAGS: usize = 4;

/// Offsets of the source and destination addresses' first octets in `frame`, or `None` when it
/// is not Ethernet (+ tags) + IPv4/IPv6 long enough to hold both addresses.
fn address_offsets(frame: &[u8]) -> Option<(usize, usize)> {
    // The ethertype field: the Ethernet header's last two bytes, then each tag's.
    let mut at = ethernet::HEADER_LEN - 2;
    for _ in 0..=MAX_TAGS {
        let ip = at + 2;
        match u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]) {
            ethertype::IPV4 if frame.len() >= ip + 20 => return Some((ip + 12, ip + 16)),
            ethertype::IPV6 if frame.len() >= ip + 40 => return Some((ip + 8, ip + 24)),
            t if vlan::is_tpid(t) => at += vlan::TAG_LEN,
            _ => return None,
        }
    }
    None
}

/// The copy of `frame` that emulated worker `worker` (1..=127; worker 0 gets the frame itself)
/// receives, or `None` when `frame` has no IP header whose addresses a copy could offset (the
/// worker then gets the frame unchanged).
pub fn copy_for(frame: &[u8], worker: usize) -> Option<Vec<u8>> {
    // Workers are at most 127 (the CLI's range), so the index fits an octet.
    let salt = u8::try_from(worker).unwrap_or(u8::MAX);
    let (src, dst) = address_offsets(frame)?;
    let mut copy = frame.to_vec();
    for i in [src, dst] {
        if let Some(b) = copy.get_mut(i) {
            *b ^= salt;
        }
    }
    Some(copy)
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
            let Some(copy) = copy_for(&f.data, 3) else { continue };
            offset += 1;
            let m = packet::measure(&copy, &cfg).expect("a copy measures like its original");
            assert_ne!(m.identity, original.identity, "a copy's id is its own");
            assert_ne!(m.flow, original.flow);
            // The reply of the copied flow is the copy of the original's reply.
            let back = copy_for(&copy, 3).expect("a copy has its IP header");
            assert_eq!(packet::measure(&back, &cfg).expect("measures").identity, original.identity);
            assert_eq!(copy.len(), f.data.len());
        }
        assert!(offset > 0, "the sample holds IP frames");
    }

    #[test]
    fn frames_without_an_ip_header_are_left_alone() {
        let arp = [vec![0xff; 12], vec![0x08, 0x06], vec![0; 28]].concat();
        assert_eq!(copy_for(&arp, 5), None);
        let short_v4 = [vec![0; 12], vec![0x08, 0x00], vec![0x45; 10]].concat();
        assert_eq!(copy_for(&short_v4, 5), None);
        assert_eq!(copy_for(&[], 2), None);
        // Tagged twice, then IPv4: the addresses after both tags.
        let mut tagged =
            [vec![0; 12], vec![0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2, 0x08, 0x00], vec![0; 20]].concat();
        tagged[22 + 12] = 10;
        tagged[22 + 16] = 192;
        let c = copy_for(&tagged, 1).expect("an IPv4 header after two tags");
        assert_eq!((c[22 + 12], c[22 + 16]), (11, 193));
    }
}
