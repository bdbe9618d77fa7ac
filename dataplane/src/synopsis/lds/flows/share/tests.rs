use std::net::IpAddr;
use std::sync::Arc;

use super::*;
use crate::packet::{Encap, EncapKind, FlowKey};
use crate::synopsis::codec::Writer;

/// Flow `i` of worker `w`: every third one IPv6 (the longer encoding), some in a tunnel.
fn entry(w: u32, i: u32) -> FlowEntry {
    let n = w << 20 | i;
    let src: IpAddr = if n.is_multiple_of(3) {
        IpAddr::V6(std::net::Ipv6Addr::from(u128::from(n) << 64 | 1))
    } else {
        IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 | n))
    };
    let dst: IpAddr =
        if n.is_multiple_of(3) { "2001:db8::2".parse().unwrap() } else { "192.168.0.1".parse().unwrap() };
    let key = FlowKey::new(src, dst, (n % 65_000) as u16, 443, 6);
    let encap = if n.is_multiple_of(4) { Encap::NONE } else { Encap::new(EncapKind::Vxlan, 5000 + n) };
    FlowEntry { key, flow_hash: key.hash(7), encap }
}

/// Workers' sets of `sizes` flows each, `capacity` each, with some unrecorded traffic.
fn worker_sets(sizes: &[u32], capacity: u32) -> Vec<FlowSet> {
    sizes
        .iter()
        .enumerate()
        .map(|(w, &n)| {
            let mut s = FlowSet::new(capacity);
            for i in 0..n {
                let e = entry(w as u32, i);
                s.record(&e.key, e.flow_hash, e.encap);
            }
            s.unrecorded_packets = u64::from(n % 7);
            if let Some(word) = s.unrecorded_bitmap.get_mut(w) {
                *word = 0x5 << w;
            }
            s
        })
        .collect()
}

fn encoded(s: &FlowSet) -> Vec<u8> {
    let mut out = Vec::new();
    s.encode(&mut Writer::new(&mut out));
    out
}

/// Gathers `sets` into `acc` the shared way with `helpers` threads working the job while the
/// "control thread" waits, then takes it back.
fn share(
    acc: &mut FlowSet,
    sets: &mut [FlowSet],
    job: &mut Arc<FlowListJob>,
    helpers: usize,
) -> (bool, SharedLists) {
    let mut refs: Vec<&mut FlowSet> = sets.iter_mut().collect();
    let lent = acc.lend_lists(&mut refs, Arc::get_mut(job).unwrap());
    if lent {
        std::thread::scope(|s| {
            for _ in 0..helpers {
                let job = job.clone();
                s.spawn(move || while job.help() {});
            }
        });
    }
    let shared = acc.take_back_lists(&mut refs, Arc::get_mut(job).unwrap());
    (lent, shared)
}

#[test]
fn shared_gathering_lists_and_encodes_what_gathering_does() {
    let cases: [&[u32]; 6] =
        [&[1], &[4095, 4096, 4097], &[10_000], &[0, 5000, 0], &[3, 9000, 1, 8192, 700], &[4096; 4]];
    for sizes in cases {
        for helpers in [0, 1, 3] {
            let capacity = 20_000;
            let mut want = FlowSet::new(capacity);
            let mut plain = worker_sets(sizes, capacity);
            let mut refs: Vec<&mut FlowSet> = plain.iter_mut().collect();
            assert!(want.gather(&mut refs));

            let mut acc = FlowSet::new(capacity);
            let mut job = Arc::new(FlowListJob::default());
            // Twice, so the second epoch reuses the buffers the first left.
            for round in 0..2 {
                let mut sets = worker_sets(sizes, capacity);
                let (lent, shared) = share(&mut acc, &mut sets, &mut job, helpers);
                let case = format!("{sizes:?}, {helpers} helpers, round {round}");
                assert!(lent, "{case}");
                let chunks: usize = sizes.iter().map(|&n| (n as usize).div_ceil(CHUNK_FLOWS)).sum();
                assert_eq!(shared.by_helpers + shared.by_control, chunks, "{case}");
                if helpers == 0 {
                    assert_eq!(shared.by_helpers, 0, "{case}");
                }
                assert_eq!(acc.entries(), want.entries(), "{case}");
                assert_eq!(acc, want, "{case}");
                assert_eq!(encoded(&acc), encoded(&want), "{case}");
                assert!(acc.encoded.valid, "{case}: the body comes from the workers' encoding");
                assert!(
                    sets.iter().all(|s| s.is_empty() && s.unrecorded_packets() == 0),
                    "{case}: the sets go back cleared"
                );
                assert!(
                    sets.iter().zip(sizes).all(|(s, _)| s.capacity() == capacity as usize),
                    "{case}: their own sets"
                );
            }
        }
    }
}

#[test]
fn sets_gathering_would_refuse_are_not_lent() {
    let mut job = FlowListJob::default();
    // Together more than the accumulator holds.
    let mut sets = worker_sets(&[600, 600], 1000);
    let mut acc = FlowSet::new(1000);
    let mut refs: Vec<&mut FlowSet> = sets.iter_mut().collect();
    assert!(!acc.lend_lists(&mut refs, &mut job));
    assert!(refs.iter().all(|s| s.len() == 600) && !job.is_open());
    // Another capacity.
    let mut acc = FlowSet::new(5000);
    assert!(!acc.lend_lists(&mut refs, &mut job));
    // Nothing recorded.
    let mut empty = worker_sets(&[0, 0], 1000);
    let mut refs: Vec<&mut FlowSet> = empty.iter_mut().collect();
    let mut acc = FlowSet::new(1000);
    assert!(!acc.lend_lists(&mut refs, &mut job));
    // A job still open.
    let mut sets = worker_sets(&[10], 1000);
    let mut refs: Vec<&mut FlowSet> = sets.iter_mut().collect();
    assert!(acc.lend_lists(&mut refs, &mut job));
    let mut more = worker_sets(&[10], 1000);
    let mut other: Vec<&mut FlowSet> = more.iter_mut().collect();
    assert!(!FlowSet::new(1000).lend_lists(&mut other, &mut job));
    acc.take_back_lists(&mut refs, &mut job);
    assert_eq!(acc.len(), 10);
}

#[test]
fn a_list_changed_after_the_shared_encoding_is_encoded_afresh() {
    let capacity = 20_000;
    let mut acc = FlowSet::new(capacity);
    let mut job = Arc::new(FlowListJob::default());
    let mut sets = worker_sets(&[5000, 3000], capacity);
    share(&mut acc, &mut sets, &mut job, 1);
    let extra = entry(9, 1);
    acc.record(&extra.key, extra.flow_hash, extra.encap);
    assert!(!acc.encoded.valid);
    let mut want = FlowSet::new(capacity);
    for e in acc.entries() {
        want.record(&e.key, e.flow_hash, e.encap);
    }
    want.unrecorded_packets = acc.unrecorded_packets;
    want.unrecorded_bitmap.clone_from(&acc.unrecorded_bitmap);
    assert_eq!(encoded(&acc), encoded(&want));
    acc.clear();
    assert!(!acc.encoded.valid);
    assert_eq!(encoded(&acc), encoded(&FlowSet::new(capacity)));
}

#[test]
fn helpers_racing_do_each_chunk_once() {
    let capacity = 200_000;
    let sizes = [40_000, 1, 70_000, 33_333];
    let mut want = FlowSet::new(capacity);
    let mut plain = worker_sets(&sizes, capacity);
    let mut refs: Vec<&mut FlowSet> = plain.iter_mut().collect();
    assert!(want.gather(&mut refs));
    let mut acc = FlowSet::new(capacity);
    let mut job = Arc::new(FlowListJob::default());
    for _ in 0..3 {
        let mut sets = worker_sets(&sizes, capacity);
        let (_, shared) = share(&mut acc, &mut sets, &mut job, 4);
        assert_eq!(shared.by_control, 0);
        assert_eq!(encoded(&acc), encoded(&want));
    }
}
