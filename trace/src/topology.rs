//! The deployment a trace pair simulates, fixed by the project:
//!
//! ```text
//!  client side ⇄ [port0  A  port1] ⇄ network (the segment) ⇄ [port0  B  port1] ⇄ server side
//! ```
//!
//! - **forward** = client→server traffic: seen by A on port 0 rx at time a (the upstream tap),
//!   then, unless lost, by B on port 0 rx at b = a + d (the downstream tap);
//! - **reverse** = server→client traffic: seen by B on port 1 rx at b', then by A on port 1 rx at
//!   a' = b' + d'.
//!
//! A trace pair is therefore four pcaps, one per tap: `a_port0.pcap`, `a_port1.pcap`,
//! `b_port0.pcap`, `b_port1.pcap`. A's clock is the reference (true time); B's timestamps carry a
//! configurable offset (B's clock minus true time).

use crate::frame::MacPair;
use serde::{Deserialize, Serialize};

/// An appliance: A upstream (client side), B downstream (server side). Defined with the record
/// schema, which names points.
pub use wirelat_records::Point;

/// A direction of the segment between A and B: forward is client → server (A port 0 rx, then
/// B port 0 rx), reverse server → client (B port 1 rx, then A port 1 rx). The data plane's
/// type, so that records, the pipeline and the generator name directions the same way.
pub use wirelat_dataplane::direction::Direction;

/// Where a direction's packets are seen, at the two points of the generated pair.
pub trait DirectionTaps {
    /// Where a packet of this direction is seen first.
    fn upstream(self) -> Tap;
    /// Where it is seen after crossing the segment.
    fn downstream(self) -> Tap;
}

impl DirectionTaps for Direction {
    fn upstream(self) -> Tap {
        match self {
            Direction::Forward => Tap { point: Point::A, port: 0 },
            Direction::Reverse => Tap { point: Point::B, port: 1 },
        }
    }

    fn downstream(self) -> Tap {
        match self {
            Direction::Forward => Tap { point: Point::B, port: 0 },
            Direction::Reverse => Tap { point: Point::A, port: 1 },
        }
    }
}

/// A capture point: one rx port of one appliance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Tap {
    /// The appliance.
    pub point: Point,
    /// Its port, 0 (client side) or 1 (server side).
    pub port: u8,
}

impl Tap {
    /// The four taps in file order.
    pub const ALL: [Tap; 4] = [
        Tap { point: Point::A, port: 0 },
        Tap { point: Point::A, port: 1 },
        Tap { point: Point::B, port: 0 },
        Tap { point: Point::B, port: 1 },
    ];

    /// `a_port0` etc.; the pcap is `<name>.pcap`.
    pub fn name(self) -> String {
        format!("{}_port{}", self.point.name(), self.port)
    }

    /// Index into [`Tap::ALL`].
    pub fn index(self) -> usize {
        (self.point as usize) * 2 + usize::from(self.port.min(1))
    }

    /// The MAC addresses frames carry when this tap sees them: each tap sits on its own link,
    /// so the copies at the two points of a packet never share their L2 header.
    pub fn macs(self) -> MacPair {
        let id = self.index() as u8;
        MacPair { src: [0x02, 0x00, 0x5e, 0x10, id, 0x01], dst: [0x02, 0x00, 0x5e, 0x10, id, 0x02] }
    }
}
