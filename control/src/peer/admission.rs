//! Admission of connections still in their handshake: a small budget of slots of their own, a
//! smaller one per source address, and a total deadline, so that unauthenticated peers cannot
//! keep authenticated ones out.
//!
//! Why evict rather than refuse when the budget is full: a slow or silent client holds its slot
//! for the whole deadline, while a real point completes its handshake in a few round trips. If
//! a full budget refused newcomers, a few dozen clients dripping a byte every few seconds (and
//! reconnecting when cut) would keep every point out indefinitely; evicting the oldest
//! handshake instead lets a newcomer in at once, and a point is done long before enough new
//! connections arrive to evict it in turn. The per-address budget makes one address evict its
//! own oldest first, so a flood from one host cannot push out handshakes from others.
//!
//! The deadline covers the whole handshake, not each read: the socket's read timeout restarts
//! with every byte received, so a byte every few seconds would keep it open forever. The
//! listener thread calls [`Handshakes::reap`] on every pass and shuts the expired ones down,
//! which ends their blocked reads.

use std::net::{IpAddr, Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// Most connections in their handshake at once.
pub const MAX_HANDSHAKES: usize = 16;
/// Most connections in their handshake at once from one source address.
pub const MAX_HANDSHAKES_PER_ADDR: usize = 4;

struct Pending {
    id: u64,
    addr: IpAddr,
    started: Instant,
    /// A clone of the connection's socket, to shut it down from the listener thread.
    stream: TcpStream,
}

/// The connections in their handshake (owned by the listener, behind a mutex).
#[derive(Default)]
pub struct Handshakes {
    next: u64,
    live: Vec<Pending>,
}

/// Why a handshake was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Its source address had [`MAX_HANDSHAKES_PER_ADDR`] handshakes and a newer one came.
    AddrBudget,
    /// [`MAX_HANDSHAKES`] were in progress and a newer one came.
    Budget,
    /// It took longer than the handshake deadline.
    Deadline,
}

impl Cut {
    /// Metrics label (`wirelat_peer_rejected_total{reason}`).
    pub fn name(self) -> &'static str {
        match self {
            Cut::AddrBudget => "handshake_evicted_addr",
            Cut::Budget => "handshake_evicted",
            Cut::Deadline => "handshake_deadline",
        }
    }
}

impl Handshakes {
    /// Registers a new connection from `addr` (with a clone of its socket); evicts the oldest
    /// handshake of that address, or the oldest of all, when a budget is full. Returns the
    /// new handshake's id and what was cut.
    pub fn admit(&mut self, addr: IpAddr, stream: TcpStream) -> (u64, Vec<(IpAddr, Cut)>) {
        let mut cut = Vec::new();
        if self.live.iter().filter(|p| p.addr == addr).count() >= MAX_HANDSHAKES_PER_ADDR
            && let Some(i) = self.live.iter().position(|p| p.addr == addr)
        {
            cut.push((self.evict(i), Cut::AddrBudget));
        }
        if self.live.len() >= MAX_HANDSHAKES {
            // `live` is in admission order: the first is the oldest.
            cut.push((self.evict(0), Cut::Budget));
        }
        let id = self.next;
        self.next += 1;
        self.live.push(Pending { id, addr, started: Instant::now(), stream });
        (id, cut)
    }

    fn evict(&mut self, i: usize) -> IpAddr {
        let p = self.live.remove(i);
        let _ = p.stream.shutdown(Shutdown::Both);
        p.addr
    }

    /// The handshake `id` ended (either way): it no longer holds a slot.
    pub fn done(&mut self, id: u64) {
        self.live.retain(|p| p.id != id);
    }

    /// Shuts down every handshake older than `deadline`; returns their addresses.
    pub fn reap(&mut self, deadline: Duration) -> Vec<IpAddr> {
        let now = Instant::now();
        let mut out = Vec::new();
        while let Some(i) = self.live.iter().position(|p| now.duration_since(p.started) > deadline) {
            out.push(self.evict(i));
        }
        out
    }

    /// Handshakes in progress.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// True when no handshake is in progress.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A connected pair: (server side, client side).
    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (l.accept().unwrap().0, c)
    }

    #[test]
    fn budgets_evict_the_oldest_and_the_deadline_cuts_a_slow_handshake() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut h = Handshakes::default();
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let mut servers = Vec::new();
        for _ in 0..MAX_HANDSHAKES_PER_ADDR {
            let (s, _c) = pair(&l);
            servers.push(s.try_clone().unwrap());
            assert!(h.admit(a, s).1.is_empty());
        }
        // A fifth from the same address evicts that address's oldest: its read ends at once.
        let (s, _c) = pair(&l);
        assert_eq!(h.admit(a, s).1, vec![(a, Cut::AddrBudget)]);
        let mut buf = [0u8; 1];
        assert_eq!(servers[0].read(&mut buf).unwrap(), 0, "the evicted socket is shut down");
        assert_eq!(h.len(), MAX_HANDSHAKES_PER_ADDR);
        // Other addresses fill the total budget; the next evicts the oldest of all.
        let mut last = 0;
        let mut clients = Vec::new();
        for n in 0u8.. {
            if h.len() == MAX_HANDSHAKES {
                break;
            }
            let (s, c) = pair(&l);
            clients.push(c);
            let (id, cut) = h.admit(IpAddr::from([127, 0, 1, n]), s);
            assert!(cut.is_empty());
            last = id;
        }
        let (s, _c) = pair(&l);
        let (_, cut) = h.admit("127.0.0.3".parse().unwrap(), s);
        assert_eq!(cut, vec![(a, Cut::Budget)]);
        h.done(last);
        assert_eq!(h.len(), MAX_HANDSHAKES - 1);
        assert!(h.reap(Duration::from_secs(60)).is_empty());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(h.reap(Duration::from_millis(1)).len(), MAX_HANDSHAKES - 1);
        assert!(h.is_empty());
    }
}
