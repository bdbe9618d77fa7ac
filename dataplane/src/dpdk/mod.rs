//! The only safe wrapper over the `dpdk-sys` bindings: EAL, mempools, ports and their queues,
//! bursts of mbufs and read-only views of them.
//!
//! Every `unsafe` block of the data plane lives in this module, each with its `SAFETY:`
//! argument. Device and EAL failures become [`DpdkError`]s carrying DPDK's own error text.
//! Lifetimes order the teardown: a [`Port`] borrows its [`Mempool`], which borrows the [`Eal`],
//! so ports are stopped and closed before their pool is freed, and the EAL is cleaned up last.
//!
//! Nothing here may log, allocate or lock in the per-burst calls ([`RxQueue::recv`],
//! [`TxQueue::send`], [`MbufBurst`] methods): those are the hot path. The one exception is
//! [`MbufBurst::push_copy`], which takes mbufs from a pool and copies a frame into them for
//! packet generators (`wirelat replay`); the forwarder never calls it. The wrappers are real
//! function calls into C (no cross-language inlining), so they are called per burst, and
//! per-packet fields are read directly from the `rte_mbuf` in Rust.

mod eal;
mod error;
mod hugealloc;
mod kernel_iface;
mod mbuf;
mod mempool;
mod port;
mod tsc;

pub use crate::cpu::{prefetch, rdtsc};
pub use eal::{Eal, LcoreJob, LcoreOutcome};
pub use error::{DpdkError, PortSetting, RteErrno};
pub use hugealloc::{HUGE_PAGE_BYTES, HUGE_PAGE_THRESHOLD_BYTES, HugePageAlloc};
pub use kernel_iface::{
    KernelIfaceError, NetTimestamping, gro_enabled as kernel_iface_gro, index as kernel_iface_index,
    rx_queues as kernel_iface_rx_queues, rx_vlan_offload as kernel_iface_rx_vlan_offload,
};
pub use mbuf::{MAX_BURST, MbufBurst, MbufView, PushError, PushedFrame, RxTimestampField};
pub use mempool::{Mempool, MempoolSettings};
pub use port::{LinkStatus, Port, PortInfo, PortSettings, PortStats, RxQueue, TxQueue};
pub use tsc::{spin_pause, tsc_now};
