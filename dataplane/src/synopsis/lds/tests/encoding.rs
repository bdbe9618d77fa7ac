//! Encoding: round trips, and bad input (truncated, wrong header, over capacity, random or
//! arbitrary bytes) refused without panic.

use super::*;

fn sample_sketch() -> (LdsConfig, Lds) {
    let cfg = LdsConfig { vlda_len: 2, flow_capacity: 64, ..LdsConfig::new(3, 40) };
    let mut l = Lds::new(&cfg).unwrap();
    for p in stream(13, 80, 3_000) {
        observe(&mut l, &p, p.send_ns);
    }
    (cfg, l)
}

#[test]
fn encoding_round_trips() {
    let (cfg, l) = sample_sketch();
    let bytes = l.encode();
    let back = Lds::decode(&cfg, &bytes).unwrap();
    assert_eq!(back, l);
    assert_eq!(back.encode(), bytes);
    assert_eq!(l.flows().len(), 64);
    assert!(l.flows().unrecorded_packets() > 0);
    // The decoded pair estimates like the originals.
    let (s, r) = run(&cfg, &stream(14, 30, 1_000), |i| i % 50 == 0);
    let (s2, r2) = (Lds::decode(&cfg, &s.encode()).unwrap(), Lds::decode(&cfg, &r.encode()).unwrap());
    assert_eq!(estimate_all(&s, &r, r.flows()).unwrap(), estimate_all(&s2, &r2, r2.flows()).unwrap());
}

#[test]
fn decode_refuses_bad_input() {
    let (cfg, l) = sample_sketch();
    let bytes = l.encode();
    for cut in 0..bytes.len() {
        assert!(Lds::decode(&cfg, &bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut long = bytes.clone();
    long.push(0);
    assert_eq!(Lds::decode(&cfg, &long), Err(DecodeError::TrailingBytes { extra: 1 }));
    let mut kind = bytes.clone();
    kind[0] = 2;
    assert!(matches!(Lds::decode(&cfg, &kind), Err(DecodeError::WrongKind { .. })));
    let mut version = bytes.clone();
    version[1] = 9;
    assert!(matches!(Lds::decode(&cfg, &version), Err(DecodeError::UnsupportedVersion { .. })));
    let mut fp = bytes.clone();
    fp[2] ^= 1;
    assert!(matches!(Lds::decode(&cfg, &fp), Err(DecodeError::ConfigMismatch { .. })));
    // A flow count above the configured capacity.
    let count_at = 10 + 3 * 40 * 16;
    let mut over = bytes.clone();
    over[count_at..count_at + 4].copy_from_slice(&65u32.to_le_bytes());
    assert!(matches!(Lds::decode(&cfg, &over), Err(DecodeError::Invalid { field: "lds.flows.count", .. })));
    // An invalid config is refused, not used.
    let bad = LdsConfig { rows: 0, ..cfg.clone() };
    let mut hdr = Vec::new();
    crate::synopsis::codec::write_header(
        &mut crate::synopsis::codec::Writer::new(&mut hdr),
        crate::synopsis::SynopsisKind::Lds,
        Lds::FORMAT_VERSION,
        bad.fingerprint(),
    );
    assert!(matches!(Lds::decode(&bad, &hdr), Err(DecodeError::Invalid { field: "lds.config", .. })));
}

#[test]
fn random_bytes_never_panic() {
    let (cfg, l) = sample_sketch();
    let good = l.encode();
    let mut rng = sim::rng(15);
    for round in 0..3_000 {
        let mut b = if round % 2 == 0 {
            // Valid header, random body.
            let mut b = good[..10].to_vec();
            let n = rng.random_range(0..good.len() + 100);
            b.extend((0..n).map(|_| rng.random::<u8>()));
            b
        } else {
            good.clone()
        };
        // Flip a few bytes anywhere.
        for _ in 0..rng.random_range(0..8) {
            let i = rng.random_range(0..b.len().max(1));
            if let Some(x) = b.get_mut(i) {
                *x = rng.random();
            }
        }
        if let Ok(d) = Lds::decode(&cfg, &b) {
            // Whatever decodes must estimate without panicking or NaN.
            for e in estimate_all(&d, &l, d.flows()).unwrap() {
                if let Ok(m) = e.mean_delay_ns {
                    assert!(m.value.is_finite());
                }
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Arbitrary bodies behind a valid header (a tiny sketch, so the flow log is reached)
    /// decode or fail with an error, never a panic; what decodes estimates without NaN.
    #[test]
    fn arbitrary_bodies_never_panic(
        cells in proptest::collection::vec(proptest::num::u8::ANY, 0..=64),
        count in 0u32..6,
        tail in proptest::collection::vec(proptest::num::u8::ANY, 0..1_000),
        flows in proptest::collection::vec((proptest::num::u8::ANY, proptest::collection::vec(proptest::num::u8::ANY, 13..45)), 0..5),
    ) {
        // 64 bytes of cells, a plausible flow count, then either random bytes or entries with
        // random versions and lengths.
        let cfg = LdsConfig { vlda_len: 2, flow_capacity: 4, ..LdsConfig::new(1, 4) };
        let mut bytes = Lds::new(&cfg).unwrap().encode()[..crate::synopsis::codec::HEADER_LEN].to_vec();
        bytes.extend_from_slice(&cells);
        if cells.len() == 64 {
            bytes.extend_from_slice(&count.to_le_bytes());
            bytes.extend_from_slice(&[0u8; 8 + 512]);
            for (version, rest) in &flows {
                bytes.push(if version % 3 == 0 { *version } else { 4 + 2 * (version % 2) });
                bytes.extend_from_slice(rest);
            }
        }
        bytes.extend_from_slice(&tail);
        if let Ok(d) = Lds::decode(&cfg, &bytes) {
            let other = Lds::new(&cfg).unwrap();
            for e in estimate_all(&d, &other, d.flows()).unwrap() {
                if let Ok(m) = e.mean_delay_ns {
                    proptest::prop_assert!(m.value.is_finite());
                }
            }
        }
    }
}
