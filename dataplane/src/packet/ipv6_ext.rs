//! IPv6 extension headers: checked views and the bounded walk to the upper-layer header.
//!
//! Knows the generic TLV-style headers (hop-by-hop, routing, destination options, mobility,
//! HIP, shim6, experimental: length in 8-byte units after the first 8), the authentication
//! header (length in 4-byte units after the first 8) and the fixed 8-byte fragment header. ESP
//! ends the walk: what follows it is encrypted. The walk stops after [`MAX_EXT_HEADERS`]
//! headers, so a crafted chain cannot make it loop long. Never interprets option contents.

use super::class::HeaderError;
use super::field::{be16, be32};

/// Most extension headers the walk follows before calling the chain malformed. RFC 8200's
/// recommended order has at most 7 distinct headers (destination options may appear twice).
pub const MAX_EXT_HEADERS: usize = 8;

/// Next-header values of IPv6 extension headers and related protocols.
pub mod next_header {
    /// Hop-by-hop options.
    pub const HOP_BY_HOP: u8 = 0;
    /// Routing header.
    pub const ROUTING: u8 = 43;
    /// Fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Encapsulating security payload (ends the walk).
    pub const ESP: u8 = 50;
    /// Authentication header.
    pub const AUTH: u8 = 51;
    /// No next header.
    pub const NO_NEXT_HEADER: u8 = 59;
    /// Destination options.
    pub const DEST_OPTS: u8 = 60;
    /// Mobility header.
    pub const MOBILITY: u8 = 135;
    /// Host identity protocol.
    pub const HIP: u8 = 139;
    /// Shim6.
    pub const SHIM6: u8 = 140;
    /// Experimental use.
    pub const EXPERIMENT_1: u8 = 253;
    /// Experimental use.
    pub const EXPERIMENT_2: u8 = 254;
}

/// True for next-header values the walk steps over.
#[inline(always)]
pub const fn is_extension(nh: u8) -> bool {
    use next_header::*;
    matches!(
        nh,
        HOP_BY_HOP
            | ROUTING
            | FRAGMENT
            | AUTH
            | DEST_OPTS
            | MOBILITY
            | HIP
            | SHIM6
            | EXPERIMENT_1
            | EXPERIMENT_2
    )
}

/// Length of the fragment header.
pub const FRAGMENT_HEADER_LEN: usize = 8;

/// A view of a fragment header known to be present.
#[derive(Clone, Copy, Debug)]
pub struct FragmentHeader<'a> {
    header: &'a [u8; FRAGMENT_HEADER_LEN],
}

impl<'a> FragmentHeader<'a> {
    /// A view over the start of `buf`, or [`HeaderError::Truncated`].
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, HeaderError> {
        let header = buf.first_chunk::<FRAGMENT_HEADER_LEN>().ok_or(HeaderError::Truncated)?;
        Ok(Self { header })
    }

    /// Header of the fragmentable part.
    pub fn next_header(&self) -> u8 {
        self.header[0]
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        be16::<2, FRAGMENT_HEADER_LEN>(self.header) & 0xfff8
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.header[3] & 0x01 != 0
    }

    /// Identification.
    pub fn ident(&self) -> u32 {
        be32::<4, FRAGMENT_HEADER_LEN>(self.header)
    }

    /// An atomic fragment (offset 0, no more fragments; RFC 6946) is a whole packet that
    /// happens to carry a fragment header, and is measured like one.
    #[inline(always)]
    pub fn is_atomic(&self) -> bool {
        self.frag_offset() == 0 && !self.more_frags()
    }
}

/// A view of one extension header of any known kind: its first two bytes (next header, length)
/// and the bytes after the whole header.
#[derive(Clone, Copy, Debug)]
pub struct ExtHeader<'a> {
    header: &'a [u8],
    rest: &'a [u8],
}

impl<'a> ExtHeader<'a> {
    /// A view of the extension header `kind` at the start of `buf`, or
    /// [`HeaderError::Truncated`] when `buf` ends before the length the header declares.
    #[inline(always)]
    pub fn new_checked(kind: u8, buf: &'a [u8]) -> Result<Self, HeaderError> {
        let [_, len_field] = *buf.first_chunk::<2>().ok_or(HeaderError::Truncated)?;
        let len = match kind {
            next_header::FRAGMENT => FRAGMENT_HEADER_LEN,
            next_header::AUTH => (usize::from(len_field) + 2) * 4,
            _ => (usize::from(len_field) + 1) * 8,
        };
        if buf.len() < len {
            return Err(HeaderError::Truncated);
        }
        let (header, rest) = buf.split_at(len);
        Ok(Self { header, rest })
    }

    /// The next-header value in this header.
    #[inline(always)]
    pub fn next_header(&self) -> u8 {
        self.header.first().copied().unwrap_or(next_header::NO_NEXT_HEADER)
    }

    /// Length of the whole header in bytes.
    pub fn len(&self) -> usize {
        self.header.len()
    }

    /// Never true: every extension header is at least 8 bytes (here for clippy's `len` rule).
    pub fn is_empty(&self) -> bool {
        self.header.is_empty()
    }

    /// The whole header.
    pub fn bytes(&self) -> &'a [u8] {
        self.header
    }

    /// What follows the header.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

/// Where the extension-header walk ended.
#[derive(Clone, Copy, Debug)]
pub struct UpperLayer<'a> {
    /// The upper-layer protocol (for a non-atomic fragment: the fragment header's next header).
    pub protocol: u8,
    /// The upper-layer packet (for a non-atomic fragment: the fragment's data).
    pub payload: &'a [u8],
    /// The fragment header, if the chain had one.
    pub fragment: Option<FragmentHeader<'a>>,
}

impl UpperLayer<'_> {
    /// True when the packet is a fragment other than an atomic one.
    #[inline(always)]
    pub fn is_fragment(&self) -> bool {
        self.fragment.is_some_and(|f| !f.is_atomic())
    }
}

/// Follows the extension headers starting with `first` over `payload` (the IPv6 payload) to the
/// upper-layer header. Stops at a non-atomic fragment header (nothing after it is the start of
/// an upper-layer packet unless the offset is 0, and the worker does not reassemble). Errors:
/// truncated when a header runs past `payload`, malformed after [`MAX_EXT_HEADERS`] headers.
#[inline]
pub fn walk(first: u8, payload: &[u8]) -> Result<UpperLayer<'_>, HeaderError> {
    let mut nh = first;
    let mut rest = payload;
    let mut fragment = None;
    for _ in 0..MAX_EXT_HEADERS {
        if !is_extension(nh) {
            return Ok(UpperLayer { protocol: nh, payload: rest, fragment });
        }
        let ext = ExtHeader::new_checked(nh, rest)?;
        if nh == next_header::FRAGMENT {
            let f = FragmentHeader::new_checked(ext.bytes())?;
            fragment = Some(f);
            if !f.is_atomic() {
                return Ok(UpperLayer { protocol: f.next_header(), payload: ext.rest(), fragment });
            }
        }
        nh = ext.next_header();
        rest = ext.rest();
    }
    if is_extension(nh) {
        Err(HeaderError::Malformed)
    } else {
        Ok(UpperLayer { protocol: nh, payload: rest, fragment })
    }
}

#[cfg(test)]
mod tests {
    use super::next_header::*;
    use super::*;

    /// A generic extension header of `8 · (len + 1)` bytes pointing at `next`.
    fn ext(next: u8, len: u8) -> Vec<u8> {
        let mut h = vec![0u8; (usize::from(len) + 1) * 8];
        h[0] = next;
        h[1] = len;
        h
    }

    fn frag(next: u8, offset_bytes: u16, more: bool) -> Vec<u8> {
        let mut h = vec![next, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef];
        h[2..4].copy_from_slice(&(offset_bytes | u16::from(more)).to_be_bytes());
        h
    }

    #[test]
    fn no_extension_headers() {
        let up = walk(6, &[1, 2, 3]).unwrap();
        assert_eq!((up.protocol, up.payload, up.is_fragment()), (6, &[1u8, 2, 3][..], false));
    }

    #[test]
    fn chain_of_options_routing_auth() {
        let mut p = ext(ROUTING, 0); // hop-by-hop, 8 bytes
        p.extend(ext(AUTH, 1)); // routing, 16 bytes
        let mut ah = vec![0u8; 12]; // AH with length field 1: (1 + 2) · 4 = 12 bytes
        ah[0] = DEST_OPTS;
        ah[1] = 1;
        p.extend(ah);
        p.extend(ext(17, 0)); // destination options -> UDP
        p.extend([9, 9]);
        let up = walk(HOP_BY_HOP, &p).unwrap();
        assert_eq!(up.protocol, 17);
        assert_eq!(up.payload, &[9, 9]);
        assert!(up.fragment.is_none());
    }

    #[test]
    fn fragments_first_non_first_and_atomic() {
        let mut first = frag(6, 0, true);
        first.extend([1, 2, 3, 4]);
        let up = walk(FRAGMENT, &first).unwrap();
        assert!(up.is_fragment());
        assert_eq!(up.protocol, 6);
        let f = up.fragment.unwrap();
        assert_eq!((f.frag_offset(), f.more_frags(), f.ident()), (0, true, 0xdead_beef));

        let mut later = ext(FRAGMENT, 0);
        later.extend(frag(6, 1448, false));
        later.extend([5, 6]);
        let up = walk(HOP_BY_HOP, &later).unwrap();
        assert!(up.is_fragment());
        assert_eq!(up.fragment.unwrap().frag_offset(), 1448);

        let mut atomic = frag(17, 0, false);
        atomic.extend([7, 8]);
        let up = walk(FRAGMENT, &atomic).unwrap();
        assert!(!up.is_fragment());
        assert_eq!((up.protocol, up.payload), (17, &[7u8, 8][..]));
    }

    #[test]
    fn truncated_chains() {
        let mut p = ext(ROUTING, 0);
        p.extend(ext(6, 2)); // routing header of 24 bytes
        for n in 0..p.len() {
            assert_eq!(walk(HOP_BY_HOP, &p[..n]).err(), Some(HeaderError::Truncated), "cut at {n}");
        }
        assert!(walk(HOP_BY_HOP, &p).is_ok());
        for n in 0..FRAGMENT_HEADER_LEN {
            assert_eq!(walk(FRAGMENT, &frag(6, 0, true)[..n]).err(), Some(HeaderError::Truncated));
        }
        // AH whose length field points past the buffer.
        assert_eq!(walk(AUTH, &[6, 200, 0, 0, 0, 0, 0, 0]).err(), Some(HeaderError::Truncated));
    }

    #[test]
    fn endless_chain_is_malformed() {
        let mut p = Vec::new();
        for _ in 0..MAX_EXT_HEADERS {
            p.extend(ext(DEST_OPTS, 0));
        }
        p.extend([0u8; 16]);
        assert_eq!(walk(DEST_OPTS, &p).err(), Some(HeaderError::Malformed));
        // The same chain ending in TCP after exactly MAX_EXT_HEADERS headers is fine.
        let last = (MAX_EXT_HEADERS - 1) * 8;
        p[last] = 6;
        assert_eq!(walk(DEST_OPTS, &p).map(|u| u.protocol), Ok(6));
    }

    #[test]
    fn esp_and_no_next_header_end_the_walk() {
        assert_eq!(walk(ESP, &[1, 2, 3, 4]).map(|u| u.protocol), Ok(ESP));
        let p = ext(NO_NEXT_HEADER, 0);
        let up = walk(DEST_OPTS, &p).unwrap();
        assert_eq!((up.protocol, up.payload.len()), (NO_NEXT_HEADER, 0));
    }
}
