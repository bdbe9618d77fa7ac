//! The per-queue rx and tx handles a worker owns: one burst call each, nothing else.

use std::marker::PhantomData;

use crate::dpdk::mbuf::MbufBurst;

/// The receive side of one queue of a port, owned by one worker.
pub struct RxQueue<'port> {
    pub(super) port: u16,
    pub(super) queue: u16,
    pub(super) _port: PhantomData<&'port ()>,
}

impl RxQueue<'_> {
    /// Receives up to `max` mbufs into `burst` (which is emptied first) and returns how many.
    #[inline]
    pub fn recv(&mut self, burst: &mut MbufBurst, max: u16) -> u16 {
        let (slots, max) = burst.rx_slots(max);
        // SAFETY: `slots` points to at least `max` writable mbuf pointers; this handle is the
        // only user of (port, queue), which is set up and started.
        let n = unsafe { dpdk_sys::rte_eth_rx_burst(self.port, self.queue, slots, max) };
        burst.set_received(n);
        n
    }

    /// Port id.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Queue index.
    pub fn queue(&self) -> u16 {
        self.queue
    }
}

/// The transmit side of one queue of a port, owned by one worker.
pub struct TxQueue<'port> {
    pub(super) port: u16,
    pub(super) queue: u16,
    pub(super) _port: PhantomData<&'port ()>,
}

impl TxQueue<'_> {
    /// Hands as many of `burst`'s mbufs to the driver as its ring accepts, front first, and
    /// returns how many. The rest stay in `burst` (for a retry, or to be freed and counted).
    #[inline]
    pub fn send(&mut self, burst: &mut MbufBurst) -> u16 {
        let (window, n) = burst.tx_window();
        if n == 0 {
            return 0;
        }
        // SAFETY: `window` holds `n` owned mbufs; the driver takes ownership of the first
        // `sent`; this handle is the only user of (port, queue).
        let sent = unsafe { dpdk_sys::rte_eth_tx_burst(self.port, self.queue, window, n) };
        burst.consume_front(sent);
        sent
    }

    /// Port id.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Queue index.
    pub fn queue(&self) -> u16 {
        self.queue
    }
}
