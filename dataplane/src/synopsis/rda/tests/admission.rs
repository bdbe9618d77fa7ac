//! What the timestamp cache admits: repeated identities leave the banks with every copy and
//! are counted, and a full cache keeps cache and banks consistent.

use super::*;

#[test]
fn duplicates_are_excluded_with_every_copy_and_counted() {
    let cfg = online(2, 64, 64);
    let mut r = Rda::new(&cfg).unwrap();
    r.update_raw(10, 0, 500);
    r.update_raw(10, 0, 900); // a repeat: both copies leave the banks
    r.update_raw(10, 0, 300); // and later ones never enter
    r.update_raw(11, 0, 400);
    r.update_raw(0, 0, 450); // identity 0 is packet id 1
    let c = *r.counters();
    assert_eq!((c.duplicates, c.duplicate_ids, c.cached, c.excluded_packets()), (2, 1, 2, 3));
    assert_eq!(c.cached + c.duplicate_ids + c.duplicates + c.cache_full + c.sampled_out, c.seen);
    assert_eq!(r.cache().get(10), Some(EXCLUDED));
    assert_eq!(r.cache().get(1), Some(450));
    assert_eq!(r.banks().unwrap().packets(), 2);
    assert_eq!(r.banks().unwrap(), &banks_from_cache(&cfg, r.cache(), 64), "banks hold the cache exactly");
    // The excluded id survives an export (so a collector answering look-ups knows it).
    let back = wire::decode_cache(&cfg, &wire::encode_cache(&cfg, r.cache())).unwrap();
    assert_eq!((back.get(10), back.get(11), back.excluded(), back.len()), (Some(EXCLUDED), Some(400), 1, 3));
}

/// Identity repeats the way issue 18 found them: at the sender only (one copy lost, or a loop
/// upstream), at the receiver only (a loop between the points) and at both (a retransmission
/// seen at both), with the copies' delays far from the rest. The mean over the packets seen
/// once at each point must come out exact, the one-sided ids must be told apart from loss and
/// reordering, and the counts must be those of the construction.
#[test]
fn repeated_identities_leave_the_mean_and_the_loss_alone() {
    let cfg = online(2, 512, 4_096);
    let (mut a, mut b) = (Rda::new(&cfg).unwrap(), Rda::new(&cfg).unwrap());
    let (mut sum, mut n, mut lost) = (0i128, 0i128, 0u64);
    for i in 1..=2_000u64 {
        let id = mix64(i) | 1;
        let sent = 1_000_000 + i * 1_000;
        let delay = 40_000 + (mix64(i ^ 0x18) % 20_000);
        a.update_raw(id, 0, sent);
        match i % 100 {
            // Sender-side repeat, one copy delivered (much later: a retransmission).
            3 => {
                a.update_raw(id, 0, sent + 500_000);
                b.update_raw(id, 0, sent + 500_000 + delay);
            }
            // A loop between the points: the receiver sees the packet twice.
            5 => {
                b.update_raw(id, 0, sent + delay);
                b.update_raw(id, 0, sent + delay + 3_000_000);
            }
            // A retransmission seen at both points, the second copy delayed 10×.
            7 => {
                a.update_raw(id, 0, sent + 200_000);
                b.update_raw(id, 0, sent + delay);
                b.update_raw(id, 0, sent + 200_000 + 10 * delay);
            }
            // A true loss.
            11 => lost += 1,
            _ => {
                b.update_raw(id, 0, sent + delay);
                sum += delay as i128;
                n += 1;
            }
        }
    }
    for (decoder, local, remote) in [(Side::Sender, &a, &b), (Side::Receiver, &b, &a)] {
        let r = estimate(
            &a,
            &b,
            LocalCache { side: decoder, cache: local.cache() },
            remote.cache(),
            &PeelGuards::default(),
        );
        let rec = &r.reconciliation;
        assert!(rec.complete, "{rec:?}");
        assert_eq!(
            r.mean_ns.as_ref().unwrap().value,
            estimator::exact_ratio(sum, n),
            "decoded at {decoder:?}"
        );
        assert_eq!(rec.lost.len() as u64, lost, "only the true losses are lost");
        assert!(rec.reordered.is_empty());
        // One-sided: the 20 sender-side repeats (receiver has them) and the 20 loops (sender has them).
        assert_eq!(rec.excluded_duplicates.len(), 40);
        let d = r.duplicates;
        assert_eq!((d.sender_ids, d.sender_packets), (40, 80));
        assert_eq!((d.receiver_ids, d.receiver_packets), (40, 80));
    }
}

#[test]
fn full_cache_keeps_cache_and_banks_consistent() {
    let cfg = online(2, 64, 10);
    let mut r = Rda::new(&cfg).unwrap();
    for id in 1..=25u64 {
        r.update_raw(id, 0, id * 10);
    }
    assert_eq!(r.counters().cached, 10);
    assert_eq!(r.counters().cache_full, 15);
    assert_eq!(r.banks().unwrap().packets(), 10);
    assert_eq!(r.banks().unwrap(), &banks_from_cache(&cfg, r.cache(), 64));
}
