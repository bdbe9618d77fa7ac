//! The two directions of a bump in the wire, one type for the workers, the pipeline, the
//! records and the trace generator.
//!
//! Forward is what arrives on port 0 (client → server) and leaves on port 1; reverse the other
//! way. A two-point segment keeps the same names: forward crosses from point A to point B.

use serde::{Deserialize, Serialize};

/// A direction of travel through the box (and of a segment between two points).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Received on port 0, sent on port 1: client → server.
    Forward = 0,
    /// Received on port 1, sent on port 0: server → client.
    Reverse = 1,
}

impl Direction {
    /// Both, forward first (the order a worker processes its bursts in; it polls port 1 first,
    /// see `worker::run`).
    pub const BOTH: [Direction; 2] = [Direction::Forward, Direction::Reverse];

    /// The direction of packets received on `port` (0 or 1; anything else is port 1).
    #[inline(always)]
    pub fn of_port(port: usize) -> Self {
        if port == 0 { Direction::Forward } else { Direction::Reverse }
    }

    /// Index 0 (forward) or 1 (reverse), for per-direction arrays.
    #[inline(always)]
    pub fn index(self) -> usize {
        self as usize
    }

    /// Index of the port frames of this direction arrive on.
    #[inline(always)]
    pub fn rx_port_index(self) -> usize {
        self as usize
    }

    /// Lower-case name for logs and reports (the same as its serialised form).
    pub fn name(self) -> &'static str {
        match self {
            Direction::Forward => "forward",
            Direction::Reverse => "reverse",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_indices_and_names_agree() {
        for (i, d) in Direction::BOTH.into_iter().enumerate() {
            assert_eq!(Direction::of_port(i), d);
            assert_eq!((d.index(), d.rx_port_index()), (i, i));
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{}\"", d.name()));
        }
    }
}
