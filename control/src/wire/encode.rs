//! Encoding a message into a frame: the header fields each message sets and its body layout
//! (see [`super`]), then the checksum over both.

use super::*;

/// The frame of an epoch message whose synopsis bytes are borrowed: equal to
/// `Message::Epoch(EpochFrame { .., synopsis: synopsis.to_vec() }).encode()`, written into one
/// buffer with the body copied once. A point ships megabytes per epoch (LDS's flow list, COLATE's
/// counters); through an owned `EpochFrame` each body was copied three times, into three fresh
/// allocations whose pages the kernel zeroed first.
pub fn encode_epoch(
    key: &MessageKey,
    fingerprint: u64,
    complete: bool,
    epoch_len_ns: u64,
    synopsis: &[u8],
) -> Vec<u8> {
    let mut h = Header {
        msg_type: MessageType::Epoch,
        flags: if complete { FLAG_COMPLETE } else { 0 },
        point: 0,
        segment: 0,
        epoch: 0,
        kind: None,
        body_len: 0,
        fingerprint,
        checksum: 0,
    };
    set_key(&mut h, key);
    let len_bytes = epoch_len_ns.to_le_bytes();
    let body_len = len_bytes.len() + synopsis.len();
    h.body_len = u32::try_from(body_len).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(HEADER_LEN + body_len);
    h.write(&mut out);
    out.extend_from_slice(&len_bytes);
    out.extend_from_slice(synopsis);
    let (header, body) = out.split_at(HEADER_LEN.min(out.len()));
    let sum = checksum(header, body);
    if let Some(slot) = out.get_mut(CHECKED_LEN..HEADER_LEN) {
        slot.copy_from_slice(&sum.to_le_bytes());
    }
    out
}

impl Message {
    /// The frame: header and body (no MAC).
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        let mut h = Header {
            msg_type: self.msg_type(),
            flags: 0,
            point: 0,
            segment: 0,
            epoch: 0,
            kind: None,
            body_len: 0,
            fingerprint: 0,
            checksum: 0,
        };
        let mut w = Writer::new(&mut body);
        match self {
            Message::ClientHello { nonce } | Message::ServerHello { nonce } => w.bytes(nonce),
            Message::Hello(hello) => {
                h.point = hello.point;
                w.u64(hello.watermark);
                w.u64(hello.packet_identity);
                let n = hello.fingerprints.len().min(SynopsisKind::ALL.len());
                w.u8(n as u8);
                for (k, f) in hello.fingerprints.iter().take(n) {
                    w.u8(*k as u8);
                    w.u64(*f);
                }
            }
            Message::Epoch(e) => {
                return encode_epoch(&e.key, e.fingerprint, e.complete, e.epoch_len_ns, &e.synopsis);
            }
            Message::Ack(key) => set_key(&mut h, key),
            Message::Progress { point, watermark, given_up } => {
                h.point = *point;
                h.epoch = *watermark;
                let n = given_up.len().min(GiveUp::ALL.len());
                w.u8(n as u8);
                for (g, c) in given_up.iter().take(n) {
                    w.u8(*g as u8);
                    w.u64(*c);
                }
            }
            Message::LookupRequest { request_id, cache, ids } => {
                set_cache(&mut h, cache);
                w.u64(*request_id);
                w.u32(ids.len() as u32);
                for id in ids {
                    w.u64(*id);
                }
            }
            Message::LookupResponse { request_id, status, timestamps } => {
                w.u64(*request_id);
                w.u8(*status as u8);
                w.u32(timestamps.len() as u32);
                for t in timestamps {
                    w.u8(u8::from(t.is_some()));
                    w.u64(t.unwrap_or(0));
                }
            }
            Message::BindRequest { request_id, cache, buckets_per_bank } => {
                set_cache(&mut h, cache);
                w.u64(*request_id);
                w.u32(*buckets_per_bank);
            }
            Message::BindResponse { request_id, status, banks } => {
                w.u64(*request_id);
                w.u8(*status as u8);
                w.bytes(banks);
            }
            Message::Reject { reason } => w.bytes(cut_reason(reason).as_bytes()),
        }
        h.body_len = u32::try_from(body.len()).unwrap_or(u32::MAX);
        let mut out = Vec::with_capacity(HEADER_LEN + body.len());
        h.write(&mut out);
        let sum = checksum(&out, &body);
        if let Some(slot) = out.get_mut(CHECKED_LEN..HEADER_LEN) {
            slot.copy_from_slice(&sum.to_le_bytes());
        }
        out.extend_from_slice(&body);
        out
    }
}

fn set_key(h: &mut Header, key: &MessageKey) {
    h.point = key.point;
    h.segment = key.segment;
    h.epoch = key.epoch;
    h.kind = Some(key.kind);
}

fn set_cache(h: &mut Header, c: &CacheRef) {
    h.point = c.point;
    h.segment = c.segment;
    h.epoch = c.epoch;
    h.kind = Some(SynopsisKind::Rda);
}
