use super::*;
use wirelat_dataplane::synopsis::lda::LdaConfig;

fn traffic_cfg() -> SimTraffic {
    SimTraffic {
        seed: 3,
        epochs: 4,
        epoch_len_ns: 1_000_000,
        first_epoch: 10,
        packets_per_epoch: 300,
        flows: 20,
        mean_delay_ns: 20_000.0,
        loss: 0.01,
        blackout_epochs: vec![2],
        dns_per_epoch: 5,
    }
}

#[test]
fn both_points_see_the_same_packets_and_blackouts_lose_everything() {
    let seg = SimSegments { forward: 1, reverse: 2 };
    let [a, b] = traffic(&traffic_cfg(), seg).unwrap();
    let fwd = |v: &[Seen], e: u64| {
        v.iter()
            .filter(|p| p.segment == 1 && p.ts_ns < (11 + e) * 1_000_000 && p.ts_ns >= (10 + e) * 1_000_000)
            .count()
    };
    assert_eq!(fwd(&a, 0), 300);
    assert_eq!(fwd(&b, 2), 0, "b sees no forward packet in the blackout epoch");
    let syn = SynopsesConfig { lda: Some(LdaConfig::single_bank(64, 1.0, 1)), ..Default::default() };
    let [ha, hb] = simulate(&traffic_cfg(), &syn, &PacketConfig::default(), seg, [7, 8]).unwrap();
    // Four epochs, plus the reverse packets that reach a after the last boundary.
    assert_eq!(ha.len(), 5);
    assert!(ha.iter().all(|h| h.messages.iter().all(|m| m.point == 7)));
    assert!(hb.iter().all(|h| h.messages.iter().all(|m| m.point == 8)));
    // Deterministic.
    let [ha2, _] = simulate(&traffic_cfg(), &syn, &PacketConfig::default(), seg, [7, 8]).unwrap();
    assert_eq!(
        ha.iter().map(|h| h.messages.clone()).collect::<Vec<_>>(),
        ha2.iter().map(|h| h.messages.clone()).collect::<Vec<_>>()
    );
}

#[test]
fn streaming_harvests_equal_one_harvest_of_the_whole_run() {
    // Long delays (mean 0.6 E, heavy tail) so that many packets arrive epochs later and
    // stay pending across steps; DNS exchanges so that the fridge's carry crosses steps.
    let t = SimTraffic { mean_delay_ns: 600_000.0, epochs: 12, ..traffic_cfg() };
    let seg = SimSegments { forward: 1, reverse: 2 };
    let syn = SynopsesConfig {
        lda: Some(LdaConfig::single_bank(64, 1.0, 1)),
        fridge: Some(wirelat_dataplane::synopsis::fridge::FridgeConfig::default()),
        ..Default::default()
    };
    let packet = PacketConfig::default();
    let streamed = simulate(&t, &syn, &packet, seg, [7, 8]).unwrap();
    let seen = traffic(&t, seg).unwrap();
    for (which, packets) in seen.into_iter().enumerate() {
        let mut whole = PointHarvester {
            point: [7, 8][which],
            pending: packets,
            carry: syn.fridge.as_ref().map(FridgeSynopsis::new_carry),
        };
        let once = whole.harvest(u64::MAX, t.epoch_len_ns, &syn, &packet).unwrap();
        let view = |v: &[Harvest]| -> Vec<(u64, Vec<EpochMessage>)> {
            v.iter().map(|h| (h.epoch, h.messages.clone())).collect()
        };
        assert_eq!(view(&streamed[which]), view(&once), "point {which}");
        assert!(once.iter().any(|h| {
            h.messages.iter().any(|m| m.kind == wirelat_dataplane::synopsis::SynopsisKind::Fridge)
        }));
    }
    // Only one point simulated: the same harvests for it.
    let mut only_b = Simulation::new(&t, &syn, &packet, seg, [7, 8], Some(1)).unwrap();
    let mut b = Vec::new();
    while let Some(step) = only_b.step() {
        let [a, bs] = step.unwrap();
        assert!(a.is_empty());
        b.extend(bs);
    }
    assert_eq!(b.len(), streamed[1].len());
    assert!(b.iter().zip(&streamed[1]).all(|(x, y)| x.messages == y.messages));
}
