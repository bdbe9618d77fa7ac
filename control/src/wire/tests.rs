use super::*;
use proptest::prelude::*;

fn samples() -> Vec<Message> {
    let key = MessageKey { point: 7, segment: 3, epoch: 99, kind: SynopsisKind::Lda };
    vec![
        Message::ClientHello { nonce: [1; NONCE_LEN] },
        Message::ServerHello { nonce: [2; NONCE_LEN] },
        Message::Hello(Hello {
            point: 7,
            watermark: 12,
            packet_identity: 0x0123_4567_89ab_cdef,
            fingerprints: vec![(SynopsisKind::Lda, 5), (SynopsisKind::Rda, 6)],
        }),
        Message::Epoch(EpochFrame {
            key,
            fingerprint: 0xfeed,
            complete: true,
            epoch_len_ns: 1_000_000,
            synopsis: vec![9, 8, 7],
        }),
        Message::Epoch(EpochFrame {
            key: MessageKey { kind: SynopsisKind::Fridge, segment: 0, ..key },
            fingerprint: 1,
            complete: false,
            epoch_len_ns: 5,
            synopsis: vec![],
        }),
        Message::Ack(key),
        Message::Progress { point: 7, watermark: 100, given_up: vec![(GiveUp::TooOld, 3)] },
        Message::LookupRequest {
            request_id: 4,
            cache: CacheRef { point: 2, segment: 1, epoch: 8 },
            ids: vec![1, 2, 3],
        },
        Message::LookupResponse {
            request_id: 4,
            status: LookupStatus::Ok,
            timestamps: vec![Some(10), None, Some(0)],
        },
        Message::BindRequest {
            request_id: 5,
            cache: CacheRef { point: 2, segment: 1, epoch: 8 },
            buckets_per_bank: 1024,
        },
        Message::BindResponse { request_id: 5, status: LookupStatus::NoCache, banks: vec![] },
        Message::Reject { reason: "fingerprint mismatch: lda".into() },
    ]
}

#[test]
fn every_message_round_trips() {
    for m in samples() {
        let bytes = m.encode();
        assert_eq!(Message::decode(&bytes, DEFAULT_MAX_BODY_BYTES), Ok(m.clone()), "{m:?}");
        let h = Header::parse(&bytes, DEFAULT_MAX_BODY_BYTES).unwrap();
        assert_eq!(h.msg_type, m.msg_type());
        assert_eq!(h.body_len as usize, bytes.len() - HEADER_LEN);
    }
}

#[test]
fn header_layout_is_the_documented_one() {
    let m = samples().remove(3);
    let b = m.encode();
    assert_eq!(&b[0..4], b"WLAT");
    assert_eq!(b[4], WIRE_VERSION);
    assert_eq!(b[5], MessageType::Epoch as u8);
    assert_eq!(u16::from_le_bytes([b[6], b[7]]), FLAG_COMPLETE);
    assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 7);
    assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 3);
    assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 99);
    assert_eq!(b[24], SynopsisKind::Lda as u8);
    assert_eq!(u32::from_le_bytes(b[28..32].try_into().unwrap()), 8 + 3);
    assert_eq!(u64::from_le_bytes(b[32..40].try_into().unwrap()), 0xfeed);
    assert_eq!(u64::from_le_bytes(b[40..48].try_into().unwrap()), checksum(&b[..48], &b[48..]));
}

#[test]
fn bad_frames_are_refused_with_their_reason() {
    let good = samples().remove(3).encode();
    let cap = DEFAULT_MAX_BODY_BYTES;
    let mut b = good.clone();
    b[0] = b'X';
    assert_eq!(Message::decode(&b, cap).unwrap_err().reason(), "bad_magic");
    // The previous format (a point not yet upgraded) and a later one.
    for v in [1, WIRE_VERSION + 1] {
        let mut b = good.clone();
        b[4] = v;
        assert_eq!(Message::decode(&b, cap).unwrap_err(), WireError::UnknownVersion { found: v });
    }
    let mut b = good.clone();
    b[5] = 200;
    assert_eq!(Message::decode(&b, cap).unwrap_err().reason(), "unknown_type");
    let mut b = good.clone();
    b[24] = 77;
    assert_eq!(Message::decode(&b, cap).unwrap_err().reason(), "unknown_kind");
    let mut b = good.clone();
    b[26] = 1;
    assert_eq!(Message::decode(&b, cap).unwrap_err(), WireError::Reserved);
    // A flipped body bit: the checksum catches it.
    let mut b = good.clone();
    *b.last_mut().unwrap() ^= 1;
    assert_eq!(Message::decode(&b, cap).unwrap_err().reason(), "bad_checksum");
    // Truncated anywhere.
    for cut in [0, 10, HEADER_LEN - 1, HEADER_LEN, good.len() - 1] {
        assert_eq!(Message::decode(&good[..cut], cap).unwrap_err().reason(), "truncated", "cut {cut}");
    }
    // A length over the cap is refused from the header alone, before any body is read.
    assert_eq!(
        Header::parse(&good[..HEADER_LEN], 10).unwrap_err(),
        WireError::Oversized { len: 11, cap: 10 }
    );
    let mut b = good.clone();
    b[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(Message::decode(&b, cap).unwrap_err().reason(), "oversized_length");
}

/// A frame whose checksum is recomputed after a header edit, so the body parser sees it.
fn reframed(mut b: Vec<u8>) -> Vec<u8> {
    let body_len = (b.len() - HEADER_LEN) as u32;
    b[28..32].copy_from_slice(&body_len.to_le_bytes());
    let sum = checksum(&b[..HEADER_LEN], &b[HEADER_LEN..]);
    b[40..48].copy_from_slice(&sum.to_le_bytes());
    b
}

#[test]
fn malformed_bodies_are_refused() {
    let cap = DEFAULT_MAX_BODY_BYTES;
    // A look-up request claiming 2^32-1 ids with none present: refused without allocating.
    let mut b = samples().remove(7).encode();
    b.truncate(HEADER_LEN + 8);
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(Message::decode(&reframed(b), cap).unwrap_err().reason(), "malformed_body");
    // An epoch without a kind.
    let mut b = samples().remove(3).encode();
    b[24] = 0;
    assert_eq!(Message::decode(&reframed(b), cap).unwrap_err().reason(), "malformed_body");
    // A look-up for a non-RDA synopsis.
    let mut b = samples().remove(7).encode();
    b[24] = SynopsisKind::Lda as u8;
    assert_eq!(Message::decode(&reframed(b), cap).unwrap_err().reason(), "malformed_body");
    // A hello listing a kind twice.
    let hello = Message::Hello(Hello {
        point: 1,
        watermark: 0,
        packet_identity: 5,
        fingerprints: vec![(SynopsisKind::Lda, 1), (SynopsisKind::Lda, 2)],
    });
    assert_eq!(Message::decode(&hello.encode(), cap).unwrap_err().reason(), "malformed_body");
    // Trailing bytes after a fixed-size body.
    let mut b = samples().remove(5).encode();
    b.push(0);
    assert_eq!(Message::decode(&reframed(b), cap).unwrap_err().reason(), "malformed_body");
    // A found flag other than 0/1.
    let mut b = samples().remove(8).encode();
    b[HEADER_LEN + 13] = 7;
    assert_eq!(Message::decode(&reframed(b), cap).unwrap_err().reason(), "malformed_body");
}

#[test]
fn invalid_utf8_reasons_decode_to_a_stable_message() {
    // Found by the fuzzer: 1024 invalid bytes become 3072 bytes of replacement characters;
    // the decoded reason is cut like an encoded one, so it encodes back to itself.
    let mut b = Message::Reject { reason: String::new() }.encode();
    b.extend_from_slice(&[0xff; MAX_REASON_BYTES]);
    let m = Message::decode(&reframed(b), DEFAULT_MAX_BODY_BYTES).unwrap();
    assert_eq!(Message::decode(&m.encode(), DEFAULT_MAX_BODY_BYTES), Ok(m));
}

#[test]
fn long_reject_reasons_are_cut_at_a_char_boundary() {
    let m = Message::Reject { reason: "é".repeat(MAX_REASON_BYTES) };
    let Message::Reject { reason } = Message::decode(&m.encode(), DEFAULT_MAX_BODY_BYTES).unwrap() else {
        panic!("not a reject")
    };
    assert_eq!(reason.len(), MAX_REASON_BYTES);
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Message::decode(&bytes, 1 << 16);
        if let Ok(h) = Header::parse(&bytes, 1 << 16) {
            let body = bytes.get(HEADER_LEN..).unwrap_or_default();
            let _ = Message::decode_body(&h, body);
        }
    }

    #[test]
    fn arbitrary_bodies_behind_valid_headers_never_panic(
        t in 1u8..=11, kind in 0u8..=5, body in proptest::collection::vec(any::<u8>(), 0..128)
    ) {
        let mut b = samples().remove(0).encode();
        b.truncate(HEADER_LEN);
        b[5] = t;
        b[24] = kind;
        b.extend_from_slice(&body);
        let b = reframed(b);
        let _ = Message::decode(&b, 1 << 16);
    }
}

#[test]
fn an_epoch_framed_from_borrowed_bytes_decodes_to_its_message() {
    for m in samples() {
        let Message::Epoch(e) = &m else { continue };
        let bytes = encode_epoch(&e.key, e.fingerprint, e.complete, e.epoch_len_ns, &e.synopsis);
        assert_eq!(Message::decode(&bytes, DEFAULT_MAX_BODY_BYTES), Ok(m.clone()), "{m:?}");
        assert_eq!(
            u64::from_le_bytes(bytes[40..48].try_into().unwrap()),
            checksum(&bytes[..48], &bytes[48..])
        );
    }
}
