//! The fixed 48-byte header of a frame (layout in [`super`]): parsed and validated, written, and
//! the checksum over it and the body.

use super::*;

/// The parsed fixed header of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message type.
    pub msg_type: MessageType,
    /// Flag bits ([`FLAG_COMPLETE`]).
    pub flags: u16,
    /// Point id.
    pub point: u32,
    /// Segment id.
    pub segment: u32,
    /// Epoch (watermark for `Progress`).
    pub epoch: u64,
    /// Synopsis kind, if the message concerns one.
    pub kind: Option<SynopsisKind>,
    /// Body length.
    pub body_len: u32,
    /// Configuration fingerprint of the synopsis (0 if none).
    pub fingerprint: u64,
    /// Checksum of header and body.
    pub checksum: u64,
}

impl Header {
    /// Parses and validates the fixed header: magic, version, type, kind, reserved bytes and
    /// the body length against `max_body`. The checksum is checked later, with the body.
    pub fn parse(bytes: &[u8], max_body: u32) -> Result<Header, WireError> {
        let Some(h) = bytes.get(..HEADER_LEN) else {
            return Err(WireError::Truncated { needed: HEADER_LEN, available: bytes.len() });
        };
        let mut r = Reader::new(h);
        // The slice holds HEADER_LEN bytes, so no read below can fail; map errors anyway.
        let trunc = |_| WireError::Truncated { needed: HEADER_LEN, available: bytes.len() };
        let magic: [u8; 4] = array(&mut r).map_err(trunc)?;
        if magic != MAGIC {
            return Err(WireError::BadMagic { found: magic });
        }
        let version = r.u8().map_err(trunc)?;
        if version != WIRE_VERSION {
            return Err(WireError::UnknownVersion { found: version });
        }
        let t = r.u8().map_err(trunc)?;
        let msg_type = MessageType::from_u8(t).ok_or(WireError::UnknownType { found: t })?;
        let flags = r.u16().map_err(trunc)?;
        let point = r.u32().map_err(trunc)?;
        let segment = r.u32().map_err(trunc)?;
        let epoch = r.u64().map_err(trunc)?;
        let k = r.u8().map_err(trunc)?;
        let kind = match k {
            0 => None,
            b => Some(SynopsisKind::from_u8(b).ok_or(WireError::UnknownKind { found: b })?),
        };
        let reserved: [u8; 3] = array(&mut r).map_err(trunc)?;
        if reserved != [0; 3] {
            return Err(WireError::Reserved);
        }
        let body_len = r.u32().map_err(trunc)?;
        if body_len > max_body {
            return Err(WireError::Oversized { len: body_len, cap: max_body });
        }
        let fingerprint = r.u64().map_err(trunc)?;
        let checksum = r.u64().map_err(trunc)?;
        Ok(Header { msg_type, flags, point, segment, epoch, kind, body_len, fingerprint, checksum })
    }

    /// Writes the header's 48 bytes.
    pub(super) fn write(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        w.bytes(&MAGIC);
        w.u8(WIRE_VERSION);
        w.u8(self.msg_type as u8);
        w.u16(self.flags);
        w.u32(self.point);
        w.u32(self.segment);
        w.u64(self.epoch);
        w.u8(self.kind.map_or(0, |k| k as u8));
        w.bytes(&[0; 3]);
        w.u32(self.body_len);
        w.u64(self.fingerprint);
        w.u64(self.checksum);
    }
}

/// The checksum of a frame: xxh3-64 over the first 40 header bytes and the body.
pub fn checksum(header_prefix: &[u8], body: &[u8]) -> u64 {
    let mut h = Xxh3::new();
    h.update(header_prefix.get(..CHECKED_LEN).unwrap_or(header_prefix));
    h.update(body);
    h.digest()
}
