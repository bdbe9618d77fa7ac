//! Request/response exchanges: what the fridge pairs.

use serde::{Deserialize, Serialize};

/// Which protocol exchange a packet belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExchangeKind {
    /// TCP SYN (request) -> SYN/ACK (response); paired on the reversed 5-tuple and ack = seq + 1.
    TcpHandshake,
    /// DNS query -> reply (UDP or TCP port 53); paired on the reversed 5-tuple and the DNS id.
    Dns,
    /// TCP data segment -> the ACK that covers it (optional classifier).
    TcpData,
}

impl ExchangeKind {
    /// Every kind.
    pub const ALL: [ExchangeKind; 3] = [ExchangeKind::TcpHandshake, ExchangeKind::Dns, ExchangeKind::TcpData];

    /// The snake_case name records and metrics use (its serialised form).
    pub fn name(self) -> &'static str {
        match self {
            ExchangeKind::TcpHandshake => "tcp_handshake",
            ExchangeKind::Dns => "dns",
            ExchangeKind::TcpData => "tcp_data",
        }
    }
}

/// Whether a packet opens or closes an exchange.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Starts the delay measurement (SYN, DNS query, data segment).
    Request,
    /// Ends it (SYN/ACK, DNS reply, covering ACK).
    Response,
}

/// A packet classified as one side of an exchange. A request and its response carry the same
/// `id`: a seeded 64-bit hash over the fields that pair them (see the classifier docs).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Exchange {
    /// The protocol exchange.
    pub kind: ExchangeKind,
    /// Request or response.
    pub role: Role,
    /// Pairing id, equal for a request and its response.
    pub id: u64,
}
