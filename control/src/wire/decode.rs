//! Decoding a frame: its length and checksum, then the body of the message its header
//! announces, with the body layout of each message type (see [`super`]) and the checks on
//! what it carries.

use super::*;

impl Message {
    /// Decodes one whole frame (header and body, no MAC) from `bytes`, which must hold exactly
    /// one frame.
    pub fn decode(bytes: &[u8], max_body: u32) -> Result<Message, WireError> {
        let h = Header::parse(bytes, max_body)?;
        let want = HEADER_LEN + h.body_len as usize;
        if bytes.len() < want {
            return Err(WireError::Truncated { needed: want, available: bytes.len() });
        }
        if bytes.len() > want {
            return Err(WireError::Body {
                kind: h.msg_type.name(),
                reason: format!("{} bytes after the frame", bytes.len() - want),
            });
        }
        let (head, body) = bytes.split_at(HEADER_LEN);
        Self::from_parts(&h, head, body)
    }

    /// Checks the checksum over `header_bytes` (the raw 48 header bytes) and `body`, then
    /// decodes the body of the message `h` announces.
    pub fn from_parts(h: &Header, header_bytes: &[u8], body: &[u8]) -> Result<Message, WireError> {
        if body.len() != h.body_len as usize {
            return Err(WireError::Truncated { needed: h.body_len as usize, available: body.len() });
        }
        let found = checksum(header_bytes, body);
        if found != h.checksum {
            return Err(WireError::BadChecksum { expected: h.checksum, found });
        }
        Self::decode_body(h, body)
    }

    /// Decodes the body of the message `h` announces, without checking the checksum (the
    /// caller has; the fuzz target calls it directly to reach every body parser).
    pub fn decode_body(h: &Header, body: &[u8]) -> Result<Message, WireError> {
        let t = h.msg_type;
        let mut r = Reader::new(body);
        let m = decode_body_inner(h, &mut r).map_err(|e| WireError::body(t, e))?;
        r.finish().map_err(|e| WireError::body(t, e))?;
        Ok(m)
    }
}

pub(super) fn invalid(field: &'static str, reason: impl Into<String>) -> DecodeError {
    DecodeError::Invalid { field, reason: reason.into() }
}

pub(super) fn key_of(h: &Header) -> Result<MessageKey, DecodeError> {
    let kind = h.kind.ok_or_else(|| invalid("kind", "this message needs a synopsis kind"))?;
    Ok(MessageKey { point: h.point, segment: h.segment, epoch: h.epoch, kind })
}

pub(super) fn cache_of(h: &Header) -> Result<CacheRef, DecodeError> {
    if h.kind != Some(SynopsisKind::Rda) {
        return Err(invalid("kind", "look-ups and binds concern RDA only"));
    }
    Ok(CacheRef { point: h.point, segment: h.segment, epoch: h.epoch })
}

/// The next N bytes as an array.
pub(super) fn array<const N: usize>(r: &mut Reader<'_>) -> Result<[u8; N], DecodeError> {
    let b = r.bytes(N)?;
    let mut a = [0u8; N];
    a.copy_from_slice(b);
    Ok(a)
}

pub(super) fn nonce(r: &mut Reader<'_>) -> Result<[u8; NONCE_LEN], DecodeError> {
    array(r)
}

/// Reads everything after the fixed-size part of a body.
pub(super) fn rest(r: &mut Reader<'_>) -> Result<Vec<u8>, DecodeError> {
    Ok(r.bytes(r.remaining())?.to_vec())
}

pub(super) fn decode_body_inner(h: &Header, r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    Ok(match h.msg_type {
        MessageType::ClientHello => Message::ClientHello { nonce: nonce(r)? },
        MessageType::ServerHello => Message::ServerHello { nonce: nonce(r)? },
        MessageType::Hello => {
            let watermark = r.u64()?;
            let packet_identity = r.u64()?;
            let n = r.u8()? as usize;
            if n > SynopsisKind::ALL.len() {
                return Err(invalid(
                    "fingerprints",
                    format!("{n} entries, at most {}", SynopsisKind::ALL.len()),
                ));
            }
            let mut fingerprints = Vec::with_capacity(n);
            for _ in 0..n {
                let b = r.u8()?;
                let k =
                    SynopsisKind::from_u8(b).ok_or_else(|| invalid("fingerprints.kind", format!("{b}")))?;
                if fingerprints.iter().any(|(x, _)| *x == k) {
                    return Err(invalid("fingerprints.kind", format!("{k} listed twice")));
                }
                fingerprints.push((k, r.u64()?));
            }
            Message::Hello(Hello { point: h.point, watermark, packet_identity, fingerprints })
        }
        MessageType::Epoch => {
            let key = key_of(h)?;
            let epoch_len_ns = r.u64()?;
            if epoch_len_ns == 0 {
                return Err(invalid("epoch_len_ns", "0"));
            }
            Message::Epoch(EpochFrame {
                key,
                fingerprint: h.fingerprint,
                complete: h.flags & FLAG_COMPLETE != 0,
                epoch_len_ns,
                synopsis: rest(r)?,
            })
        }
        MessageType::Ack => Message::Ack(key_of(h)?),
        MessageType::Progress => {
            let n = r.u8()? as usize;
            if n > GiveUp::ALL.len() {
                return Err(invalid("given_up", format!("{n} entries, at most {}", GiveUp::ALL.len())));
            }
            let mut given_up = Vec::with_capacity(n);
            for _ in 0..n {
                let b = r.u8()?;
                let g = GiveUp::from_u8(b).ok_or_else(|| invalid("given_up.reason", format!("{b}")))?;
                given_up.push((g, r.u64()?));
            }
            Message::Progress { point: h.point, watermark: h.epoch, given_up }
        }
        MessageType::LookupRequest => {
            let cache = cache_of(h)?;
            let request_id = r.u64()?;
            let n = r.u32()? as usize;
            r.require(n.saturating_mul(8))?;
            let mut ids = Vec::with_capacity(n);
            for _ in 0..n {
                ids.push(r.u64()?);
            }
            Message::LookupRequest { request_id, cache, ids }
        }
        MessageType::LookupResponse => {
            let request_id = r.u64()?;
            let s = r.u8()?;
            let status = LookupStatus::from_u8(s).ok_or_else(|| invalid("status", format!("{s}")))?;
            let n = r.u32()? as usize;
            r.require(n.saturating_mul(9))?;
            let mut timestamps = Vec::with_capacity(n);
            for _ in 0..n {
                let found = r.u8()?;
                let ts = r.u64()?;
                timestamps.push(match found {
                    0 => None,
                    1 => Some(ts),
                    b => return Err(invalid("found", format!("{b}"))),
                });
            }
            Message::LookupResponse { request_id, status, timestamps }
        }
        MessageType::BindRequest => {
            let cache = cache_of(h)?;
            Message::BindRequest { request_id: r.u64()?, cache, buckets_per_bank: r.u32()? }
        }
        MessageType::BindResponse => {
            let request_id = r.u64()?;
            let s = r.u8()?;
            let status = LookupStatus::from_u8(s).ok_or_else(|| invalid("status", format!("{s}")))?;
            Message::BindResponse { request_id, status, banks: rest(r)? }
        }
        MessageType::Reject => {
            let bytes = rest(r)?;
            if bytes.len() > MAX_REASON_BYTES {
                return Err(invalid("reason", format!("{} bytes, at most {MAX_REASON_BYTES}", bytes.len())));
            }
            // Invalid UTF-8 is replaced (which can lengthen it), then cut like on encoding.
            Message::Reject { reason: cut_reason(&String::from_utf8_lossy(&bytes)).to_owned() }
        }
    })
}
