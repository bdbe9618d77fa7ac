//! Bursts of received mbufs, owned in a fixed array, and read-only views of single mbufs.
//!
//! Hot path: no allocation, no logging, no per-packet FFI call. Mbuf fields (data offset,
//! lengths, flags, the timestamp dynamic field) are read directly from the `rte_mbuf`.
//! [`MbufBurst::push_copy`] is the exception, for packet generators only: it takes mbufs from a
//! pool (one call per segment) and copies a frame into them.

use std::ffi::CStr;
use std::marker::PhantomData;

use dpdk_sys::rte_mbuf;

use super::mempool::Mempool;

/// Largest burst a [`MbufBurst`] holds (the rx/tx burst size is configured up to this).
pub const MAX_BURST: usize = 64;

/// Up to [`MAX_BURST`] mbufs owned by the caller between an rx burst and a tx burst.
///
/// Invariant: `mbufs[start..end]` are valid mbufs owned by this burst; slots outside that
/// window hold nothing owned. Mbufs still owned on drop are freed in bulk, so an mbuf is never
/// leaked; callers count what they free (see [`MbufBurst::free_all`]).
pub struct MbufBurst {
    mbufs: [*mut rte_mbuf; MAX_BURST],
    start: usize,
    end: usize,
}

impl Default for MbufBurst {
    fn default() -> Self {
        Self::new()
    }
}

impl MbufBurst {
    /// An empty burst.
    pub const fn new() -> Self {
        Self { mbufs: [std::ptr::null_mut(); MAX_BURST], start: 0, end: 0 }
    }

    /// Mbufs currently owned.
    #[inline]
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True when no mbuf is owned.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Views of the owned mbufs, in receive order.
    #[inline]
    pub fn iter(&self) -> impl ExactSizeIterator<Item = MbufView<'_>> + '_ {
        self.mbufs[self.start..self.end].iter().map(|&m| {
            // SAFETY: by the invariant every pointer in the window is a valid mbuf owned by
            // this burst, which is borrowed for the view's lifetime.
            unsafe { MbufView::new(m) }
        })
    }

    /// A view of the `i`-th owned mbuf, in receive order.
    #[inline]
    pub fn get(&self, i: usize) -> Option<MbufView<'_>> {
        let m = *self.mbufs.get(self.start.checked_add(i).filter(|&j| j < self.end)?)?;
        // SAFETY: the index is inside the owned window, so `m` is a valid owned mbuf, and the
        // burst is borrowed for the view's lifetime.
        Some(unsafe { MbufView::new(m) })
    }

    /// Frees every owned mbuf (one bulk call) and returns how many were freed.
    #[inline]
    pub fn free_all(&mut self) -> usize {
        let n = self.len();
        if n > 0 {
            // SAFETY: the window holds `n` owned mbufs; after the call they are no longer owned.
            unsafe {
                dpdk_sys::rte_pktmbuf_free_bulk(self.mbufs.as_mut_ptr().add(self.start), n as u32);
            }
        }
        self.start = 0;
        self.end = 0;
        n
    }

    /// Keeps the mbufs for which `keep` is true, in order, and frees the others in bulk.
    /// Returns how many were freed. When every mbuf is kept (the usual case) nothing is written.
    #[inline]
    pub fn retain(&mut self, mut keep: impl FnMut(&MbufView<'_>) -> bool) -> usize {
        // Read-only scan for the first mbuf to drop.
        let Some(first) = (self.start..self.end).find(|&i| {
            // SAFETY: `i` is inside the owned window.
            !keep(&unsafe { MbufView::new(self.mbufs[i]) })
        }) else {
            return 0;
        };
        let mut rejected = [std::ptr::null_mut::<rte_mbuf>(); MAX_BURST];
        rejected[0] = self.mbufs[first];
        let mut n_rejected = 1;
        let mut write = first;
        for read in first + 1..self.end {
            let m = self.mbufs[read];
            // SAFETY: `m` is an owned mbuf of the window (read > write, so not yet moved).
            let view = unsafe { MbufView::new(m) };
            if keep(&view) {
                self.mbufs[write] = m;
                write += 1;
            } else {
                rejected[n_rejected] = m;
                n_rejected += 1;
            }
        }
        self.end = write;
        // SAFETY: the rejected mbufs were removed from the window and are owned only here.
        unsafe { dpdk_sys::rte_pktmbuf_free_bulk(rejected.as_mut_ptr(), n_rejected as u32) };
        n_rejected
    }

    /// Copies `frame` into freshly allocated mbufs from `pool` and appends it to the burst, as
    /// one mbuf or, when longer than one mbuf's room, a chain (the first segment keeps the
    /// pool's headroom, the others use their whole buffer). For generators (`wirelat replay`),
    /// not for the forwarder: it allocates mbufs and makes one FFI call per segment.
    ///
    /// On error nothing is appended and nothing is leaked.
    pub fn push_copy(&mut self, pool: &Mempool<'_>, frame: &[u8]) -> Result<PushedFrame, PushError> {
        if self.start == self.end {
            // Everything was sent (or freed): reuse the array from its front.
            self.start = 0;
            self.end = 0;
        }
        if self.end >= MAX_BURST {
            return Err(PushError::BurstFull);
        }
        let total = u32::try_from(frame.len()).map_err(|_| PushError::TooLong { bytes: frame.len() })?;
        if total == 0 {
            return Err(PushError::Empty);
        }
        // SAFETY: the pool is a live pktmbuf pool for the borrow's duration; the result is
        // either null or an mbuf reset by DPDK (one segment, no data) owned by this function.
        let head = unsafe { dpdk_sys::rte_pktmbuf_alloc(pool.as_ptr()) };
        if head.is_null() {
            return Err(PushError::PoolEmpty);
        }
        let mut segment = head;
        let mut segments: u16 = 1;
        let mut rest = frame;
        loop {
            // SAFETY: `segment` is a valid mbuf allocated above and owned only by this
            // function (not yet visible to DPDK or anyone else), so a unique reference is sound.
            let m = unsafe { &mut *segment };
            let room = usize::from(m.buf_len.saturating_sub(m.data_off));
            let n = room.min(rest.len());
            let (now, later) = rest.split_at(n);
            if n > 0 {
                // SAFETY: a pool mbuf's buffer spans buf_len bytes from buf_addr and
                // data_off + n <= buf_len; the frame slice and the mbuf buffer cannot overlap
                // (the frame is Rust memory, the buffer lives in the DPDK pool).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        now.as_ptr(),
                        m.buf_addr.cast::<u8>().add(usize::from(m.data_off)),
                        n,
                    );
                }
            }
            // n <= room <= u16::MAX.
            m.data_len = n as u16;
            rest = later;
            if rest.is_empty() {
                break;
            }
            if n == 0 || segments == u16::MAX {
                // A buffer without room, or a chain DPDK cannot describe.
                // SAFETY: `head` is the owned chain built so far; freeing it walks `next`.
                unsafe { dpdk_sys::rte_pktmbuf_free(head) };
                return Err(PushError::TooLong { bytes: frame.len() });
            }
            // SAFETY: as for the head.
            let next = unsafe { dpdk_sys::rte_pktmbuf_alloc(pool.as_ptr()) };
            if next.is_null() {
                // SAFETY: `head` is the owned chain built so far; freeing it walks `next`.
                unsafe { dpdk_sys::rte_pktmbuf_free(head) };
                return Err(PushError::PoolEmpty);
            }
            // SAFETY: `next` is a fresh mbuf owned here; chained segments need no headroom.
            unsafe { (*next).data_off = 0 };
            m.next = next;
            segment = next;
            segments += 1;
        }
        // SAFETY: `head` is owned here; the chain is complete (the last segment's `next` is the
        // null DPDK's reset left there).
        unsafe {
            (*head).nb_segs = segments;
            (*head).pkt_len = total;
        }
        self.mbufs[self.end] = head;
        self.end += 1;
        Ok(PushedFrame { segments })
    }

    /// Storage for an rx burst of up to `max` mbufs. Any mbuf still owned is freed first, so
    /// a caller that forgot to drain cannot leak; the worker always drains before.
    #[inline]
    pub(super) fn rx_slots(&mut self, max: u16) -> (*mut *mut rte_mbuf, u16) {
        self.free_all();
        (self.mbufs.as_mut_ptr(), max.min(MAX_BURST as u16))
    }

    /// Records that an rx burst filled the first `n` slots.
    #[inline]
    pub(super) fn set_received(&mut self, n: u16) {
        self.start = 0;
        self.end = usize::from(n).min(MAX_BURST);
    }

    /// The owned window, for a tx burst.
    #[inline]
    pub(super) fn tx_window(&mut self) -> (*mut *mut rte_mbuf, u16) {
        // SAFETY: start <= end <= MAX_BURST, so the pointer stays inside the array.
        (unsafe { self.mbufs.as_mut_ptr().add(self.start) }, self.len() as u16)
    }

    /// Records that the driver took ownership of the first `n` owned mbufs.
    #[inline]
    pub(super) fn consume_front(&mut self, n: u16) {
        self.start = (self.start + usize::from(n)).min(self.end);
    }
}

impl Drop for MbufBurst {
    fn drop(&mut self) {
        self.free_all();
    }
}

/// What [`MbufBurst::push_copy`] built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushedFrame {
    /// Mbufs in the chain (1 when the frame fits one mbuf).
    pub segments: u16,
}

/// Why [`MbufBurst::push_copy`] appended nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// The burst already holds [`MAX_BURST`] mbufs.
    #[error("the burst is full")]
    BurstFull,
    /// The pool has no free mbuf now (the device still holds them; retry later).
    #[error("the mbuf pool is empty")]
    PoolEmpty,
    /// A frame of zero bytes cannot be sent.
    #[error("the frame is empty")]
    Empty,
    /// The frame does not fit an mbuf chain.
    #[error("a frame of {bytes} bytes does not fit an mbuf chain")]
    TooLong {
        /// Its length.
        bytes: usize,
    },
}

/// Where the rx timestamp lives in an mbuf: the dynamic field and flag registered by a driver
/// (`rte_dynfield_timestamp` / `rte_dynflag_rx_timestamp`). Looked up once at start-up.
///
/// The value's unit is the device's: NIC clock ticks for hardware timestamps, microseconds for
/// DPDK 22.11's pcap driver (see anchors.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxTimestampField {
    offset: usize,
    flag: u64,
}

impl RxTimestampField {
    /// Looks up the registered field and flag; `None` when no driver registered them (then no
    /// mbuf carries an rx timestamp). Call after the ports are started.
    pub fn lookup() -> Option<Self> {
        let field = c"rte_dynfield_timestamp";
        let flag = c"rte_dynflag_rx_timestamp";
        debug_assert_eq!(field.to_bytes_with_nul(), dpdk_sys::RTE_MBUF_DYNFIELD_TIMESTAMP_NAME);
        debug_assert_eq!(flag.to_bytes_with_nul(), dpdk_sys::RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME);
        Self::lookup_names(field, flag)
    }

    fn lookup_names(field: &CStr, flag: &CStr) -> Option<Self> {
        // SAFETY: both are valid C strings; a null params pointer is allowed by the API.
        let offset = unsafe { dpdk_sys::rte_mbuf_dynfield_lookup(field.as_ptr(), std::ptr::null_mut()) };
        // SAFETY: as above.
        let bit = unsafe { dpdk_sys::rte_mbuf_dynflag_lookup(flag.as_ptr(), std::ptr::null_mut()) };
        let offset = usize::try_from(offset).ok()?;
        let bit = u32::try_from(bit).ok().filter(|&b| b < 64)?;
        // The field is a u64 inside the mbuf's dynamic area.
        if offset + 8 > std::mem::size_of::<rte_mbuf>() {
            return None;
        }
        Some(Self { offset, flag: 1u64 << bit })
    }
}

/// A read-only view of one received mbuf.
#[derive(Clone, Copy)]
pub struct MbufView<'a> {
    mbuf: *const rte_mbuf,
    _burst: PhantomData<&'a MbufBurst>,
}

impl MbufView<'_> {
    /// # Safety
    /// `mbuf` is a valid mbuf that nobody modifies or frees for the view's lifetime.
    #[inline]
    unsafe fn new(mbuf: *const rte_mbuf) -> Self {
        Self { mbuf, _burst: PhantomData }
    }

    #[inline]
    fn raw(&self) -> &rte_mbuf {
        // SAFETY: valid and unmodified for the view's lifetime (constructor contract).
        unsafe { &*self.mbuf }
    }

    /// The bytes of the first segment (the whole frame unless [`Self::segments`] > 1).
    #[inline]
    pub fn data(&self) -> &[u8] {
        let m = self.raw();
        if m.buf_addr.is_null() {
            return &[];
        }
        // SAFETY: DPDK keeps data_off + data_len within the segment's buffer (buf_len), and
        // the buffer lives as long as the mbuf.
        unsafe {
            std::slice::from_raw_parts(
                m.buf_addr.cast::<u8>().add(usize::from(m.data_off)),
                usize::from(m.data_len),
            )
        }
    }

    /// Copies the whole frame, over all segments, into `out` and returns its length (at most
    /// `out.len()`: a longer frame is cut there). For chained mbufs, whose first segment alone
    /// is not the frame.
    pub fn copy_frame(&self, out: &mut [u8]) -> usize {
        let mut written = 0;
        let mut seg: *const rte_mbuf = self.mbuf;
        // Bounded by the segment count the mbuf declares, so a corrupt chain cannot loop.
        for _ in 0..self.segments().max(1) {
            if seg.is_null() || written >= out.len() {
                break;
            }
            // SAFETY: `seg` is the head mbuf or a `next` link of the chain, all valid while the
            // head is owned by the burst (constructor contract).
            let m = unsafe { &*seg };
            if !m.buf_addr.is_null() {
                let n = usize::from(m.data_len).min(out.len() - written);
                // SAFETY: data_off + data_len lie within this segment's buffer (DPDK invariant).
                let src = unsafe {
                    std::slice::from_raw_parts(m.buf_addr.cast::<u8>().add(usize::from(m.data_off)), n)
                };
                if let Some(dst) = out.get_mut(written..written + n) {
                    dst.copy_from_slice(src);
                }
                written += n;
            }
            seg = m.next;
        }
        written
    }

    /// Length of the first segment's data.
    #[inline]
    pub fn data_len(&self) -> u16 {
        self.raw().data_len
    }

    /// Length of the whole frame over all segments.
    #[inline]
    pub fn pkt_len(&self) -> u32 {
        self.raw().pkt_len
    }

    /// Number of chained segments (more than one for frames larger than an mbuf's data room).
    #[inline]
    pub fn segments(&self) -> u16 {
        self.raw().nb_segs
    }

    /// The mbuf holds the frame it claims: exactly [`Self::segments`] linked segments whose
    /// data lengths add up to [`Self::pkt_len`]. Drivers are trusted for this elsewhere, but
    /// DPDK 22.11's pcap device builds chains that break it for some records longer than
    /// 65 535 bytes (its transmit then reads past the chain and crashes), so a forwarder that
    /// may receive chains checks them before anything reads or sends them. One comparison for
    /// a single-segment mbuf; a walk bounded by the declared segment count otherwise.
    #[inline]
    pub fn chain_is_whole(&self) -> bool {
        let head = self.raw();
        if head.nb_segs <= 1 {
            // First cache line only (`next` lives in the second): the common case costs no miss.
            return head.nb_segs == 1 && u32::from(head.data_len) == head.pkt_len;
        }
        let mut total: u64 = 0;
        let mut seg: *const rte_mbuf = self.mbuf;
        for _ in 0..head.nb_segs {
            if seg.is_null() {
                return false;
            }
            // SAFETY: `seg` is the head or a `next` link of the chain, valid while the head is
            // owned by the burst (constructor contract).
            let m = unsafe { &*seg };
            total += u64::from(m.data_len);
            seg = m.next;
        }
        seg.is_null() && total == u64::from(head.pkt_len)
    }

    /// The port the mbuf was received on.
    #[inline]
    pub fn port(&self) -> u16 {
        self.raw().port
    }

    /// The rx timestamp written by the driver, in the device's unit, if it set one.
    #[inline]
    pub fn rx_timestamp(&self, field: &RxTimestampField) -> Option<u64> {
        let m = self.raw();
        if m.ol_flags & field.flag == 0 {
            return None;
        }
        // SAFETY: `lookup_names` checked offset + 8 <= size_of::<rte_mbuf>(); the field may be
        // unaligned for u64 in principle, hence read_unaligned.
        Some(unsafe { self.mbuf.cast::<u8>().add(field.offset).cast::<u64>().read_unaligned() })
    }
}
