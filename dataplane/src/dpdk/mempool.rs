//! Packet-buffer (mbuf) pools.

use std::ffi::CString;
use std::marker::PhantomData;
use std::ptr::NonNull;

use super::eal::Eal;
use super::error::{DpdkError, RteErrno};

/// How to size a pool of mbufs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MempoolSettings {
    /// Pool name, unique in the process (DPDK's limit is 25 bytes).
    pub name: String,
    /// Number of mbufs (a power of two minus one is optimal for DPDK's ring).
    pub mbufs: u32,
    /// Per-lcore cache size (at most `RTE_MEMPOOL_CACHE_MAX_SIZE`, 512).
    pub cache_size: u32,
    /// Data room of each mbuf, headroom included (DPDK's default is 2048 + 128).
    pub data_room_bytes: u16,
    /// NUMA socket to allocate on, or `None` for any.
    pub socket: Option<u32>,
}

/// A pool of packet buffers (`rte_pktmbuf_pool_create`), freed on drop.
pub struct Mempool<'eal> {
    pool: NonNull<dpdk_sys::rte_mempool>,
    _eal: PhantomData<&'eal Eal>,
}

// SAFETY: DPDK mempools are multi-producer/multi-consumer and safe to use from any lcore; the
// handle is only a pointer to the shared pool.
unsafe impl Send for Mempool<'_> {}
// SAFETY: as above; every operation on the pool through `&Mempool` is thread-safe in DPDK.
unsafe impl Sync for Mempool<'_> {}

impl<'eal> Mempool<'eal> {
    /// Creates the pool.
    pub fn new(_eal: &'eal Eal, settings: &MempoolSettings) -> Result<Self, DpdkError> {
        let name = CString::new(settings.name.as_str()).map_err(|_| DpdkError::InvalidArgument {
            what: "mempool name",
            detail: format!("{:?} contains a NUL byte", settings.name),
        })?;
        if settings.cache_size > dpdk_sys::RTE_MEMPOOL_CACHE_MAX_SIZE {
            return Err(DpdkError::InvalidArgument {
                what: "mempool cache size",
                detail: format!("{} exceeds {}", settings.cache_size, dpdk_sys::RTE_MEMPOOL_CACHE_MAX_SIZE),
            });
        }
        let socket = settings.socket.map_or(dpdk_sys::SOCKET_ID_ANY, |s| i32::try_from(s).unwrap_or(-1));
        // SAFETY: `name` is a valid C string for the duration of the call; the EAL is
        // initialised (we hold `&Eal`).
        let ptr = unsafe {
            dpdk_sys::rte_pktmbuf_pool_create(
                name.as_ptr(),
                settings.mbufs,
                settings.cache_size,
                0,
                settings.data_room_bytes,
                socket,
            )
        };
        match NonNull::new(ptr) {
            Some(pool) => Ok(Mempool { pool, _eal: PhantomData }),
            None => Err(DpdkError::Mempool {
                name: settings.name.clone(),
                mbufs: settings.mbufs,
                data_room_bytes: settings.data_room_bytes,
                reason: RteErrno::last(),
            }),
        }
    }

    /// Mbufs currently free in the pool (including per-lcore caches).
    pub fn available(&self) -> u32 {
        // SAFETY: the pool is alive for 'self; the count is a racy-but-safe read.
        unsafe { dpdk_sys::rte_mempool_avail_count(self.pool.as_ptr()) }
    }

    /// Mbufs currently handed out (in rings, queues or bursts).
    pub fn in_use(&self) -> u32 {
        // SAFETY: as for `available`.
        unsafe { dpdk_sys::rte_mempool_in_use_count(self.pool.as_ptr()) }
    }

    pub(super) fn as_ptr(&self) -> *mut dpdk_sys::rte_mempool {
        self.pool.as_ptr()
    }
}

impl Drop for Mempool<'_> {
    fn drop(&mut self) {
        // SAFETY: every port using this pool borrows it and is therefore already closed; no
        // mbuf of it is referenced by a live burst (bursts free their mbufs on drop).
        unsafe { dpdk_sys::rte_mempool_free(self.pool.as_ptr()) }
    }
}
