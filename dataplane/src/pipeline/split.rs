//! Monitor mode on one port that carries both directions (a mirror/SPAN port, or a tap whose
//! two fibres are merged onto one port): each measured packet's direction comes from the
//! operator's *inside* prefixes (`[monitor] inside`) instead of the port it arrived on.
//!
//! Inside is the side port 0 faces in inline mode (the clients of the forward segment):
//! a packet from an inside address to an outside one is [`Direction::Forward`] (as if received
//! on port 0), one from outside to inside [`Direction::Reverse`]. A packet whose two addresses
//! are both inside or both outside has no direction: it is counted ([`Unsplit`]) and not
//! measured, since inline it would not have crossed the box.
//!
//! The prefixes are compiled once into masks; a packet costs at most two compares per prefix
//! and never allocates.

use super::Direction;
use crate::packet::FlowKey;
use crate::synopsis::lds::IpPrefix;
use crate::synopsis::lds::weights::PrefixMask;
use std::net::IpAddr;
use thiserror::Error;

/// Most inside prefixes (each packet may be tested against all of them, twice).
pub const MAX_INSIDE_PREFIXES: usize = 64;

/// Why a packet got no direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsplit {
    /// Neither address is inside.
    Neither,
    /// Both addresses are inside.
    Both,
}

/// An inside-prefix list that cannot be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SplitError {
    /// A prefix is not `address/length` with a length within its family's.
    #[error("inside prefix {text:?}: {reason}")]
    BadPrefix {
        /// The prefix as written.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// No prefix: every packet would be `neither`.
    #[error("no inside prefix given")]
    Empty,
    /// More than [`MAX_INSIDE_PREFIXES`].
    #[error("{0} inside prefixes exceed the limit of {MAX_INSIDE_PREFIXES}")]
    TooMany(usize),
}

/// Directions by inside prefixes (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectionSplit {
    inside: Vec<PrefixMask>,
}

impl DirectionSplit {
    /// Compiles `prefixes` (1 to [`MAX_INSIDE_PREFIXES`]).
    pub fn new(prefixes: &[IpPrefix]) -> Result<Self, SplitError> {
        if prefixes.is_empty() {
            return Err(SplitError::Empty);
        }
        if prefixes.len() > MAX_INSIDE_PREFIXES {
            return Err(SplitError::TooMany(prefixes.len()));
        }
        Ok(Self { inside: prefixes.iter().map(PrefixMask::new).collect() })
    }

    /// Compiles prefixes written `10.0.0.0/8`, `2001:db8::/32` or a bare address (a host).
    pub fn parse<S: AsRef<str>>(prefixes: &[S]) -> Result<Self, SplitError> {
        let parsed = prefixes.iter().map(|p| parse_prefix(p.as_ref())).collect::<Result<Vec<_>, _>>()?;
        Self::new(&parsed)
    }

    #[inline(always)]
    fn is_inside(&self, version: u8, addr: &[u8; 16]) -> bool {
        self.inside.iter().any(|m| m.matches(version, addr))
    }

    /// The direction of a packet of `flow`.
    #[inline]
    pub fn direction(&self, flow: &FlowKey) -> Result<Direction, Unsplit> {
        let src = self.is_inside(flow.ip_version, &flow.src_addr);
        let dst = self.is_inside(flow.ip_version, &flow.dst_addr);
        match (src, dst) {
            (true, false) => Ok(Direction::Forward),
            (false, true) => Ok(Direction::Reverse),
            (false, false) => Err(Unsplit::Neither),
            (true, true) => Err(Unsplit::Both),
        }
    }
}

/// One prefix: `address/length`, or an address alone (all bits).
pub fn parse_prefix(text: &str) -> Result<IpPrefix, SplitError> {
    let bad = |reason: String| SplitError::BadPrefix { text: text.to_owned(), reason };
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (text, None),
    };
    let addr: IpAddr = addr.trim().parse().map_err(|e| bad(format!("bad address: {e}")))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => l.trim().parse::<u8>().map_err(|e| bad(format!("bad length: {e}")))?,
    };
    if len > max {
        return Err(bad(format!("length {len} exceeds {max} for this address family")));
    }
    Ok(IpPrefix { addr, len })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(src: &str, dst: &str) -> FlowKey {
        FlowKey::new(src.parse().unwrap(), dst.parse().unwrap(), 1000, 80, 6)
    }

    #[test]
    fn directions_come_from_which_side_is_inside() {
        let s = DirectionSplit::parse(&["10.0.0.0/8", "2001:db8:1::/48", "192.0.2.7"]).unwrap();
        assert_eq!(s.direction(&key("10.1.2.3", "198.51.100.1")), Ok(Direction::Forward));
        assert_eq!(s.direction(&key("198.51.100.1", "10.1.2.3")), Ok(Direction::Reverse));
        assert_eq!(s.direction(&key("192.0.2.7", "192.0.2.8")), Ok(Direction::Forward));
        assert_eq!(s.direction(&key("192.0.2.8", "198.51.100.1")), Err(Unsplit::Neither));
        assert_eq!(s.direction(&key("10.0.0.1", "192.0.2.7")), Err(Unsplit::Both));
        assert_eq!(s.direction(&key("2001:db8:1:5::1", "2001:db8:2::1")), Ok(Direction::Forward));
        assert_eq!(s.direction(&key("2001:db8:2::1", "2001:db8:1::9")), Ok(Direction::Reverse));
        // An IPv4 prefix never matches an IPv6 address, even an IPv4-mapped-looking one.
        assert_eq!(s.direction(&key("::ffff:10.0.0.1", "2001:db8:2::1")), Err(Unsplit::Neither));
        // Host bits of a prefix are ignored; /0 is everything of its family.
        let all4 = DirectionSplit::parse(&["10.9.9.9/8", "0.0.0.0/0"]).unwrap();
        assert_eq!(all4.direction(&key("10.0.0.1", "2.2.2.2")), Err(Unsplit::Both));
    }

    #[test]
    fn bad_prefix_lists_are_refused_with_the_reason() {
        assert_eq!(DirectionSplit::parse::<&str>(&[]), Err(SplitError::Empty));
        for bad in ["10.0.0.0/33", "2001:db8::/129", "10.0.0/8", "10.0.0.0/x", "", "10.0.0.0/-1"] {
            assert!(
                matches!(DirectionSplit::parse(&[bad]), Err(SplitError::BadPrefix { ref text, .. }) if text == bad),
                "{bad}"
            );
        }
        let many: Vec<String> = (0..=MAX_INSIDE_PREFIXES).map(|i| format!("10.{i}.0.0/16")).collect();
        assert_eq!(DirectionSplit::parse(&many), Err(SplitError::TooMany(MAX_INSIDE_PREFIXES + 1)));
    }
}
