//! Typed errors of the DPDK wrapper, with DPDK's own error text.

use std::ffi::CStr;
use std::fmt;

/// An errno value as DPDK reports it (`rte_errno` or a negative return code), with the text
/// `rte_strerror` gives for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RteErrno {
    /// The positive errno value.
    pub code: i32,
    /// `rte_strerror(code)`.
    pub text: String,
}

impl RteErrno {
    /// Describes `code` (the sign is ignored: ethdev returns `-errno`).
    pub fn from_code(code: i32) -> Self {
        let code = code.saturating_abs();
        // SAFETY: rte_strerror accepts any value and returns a pointer to a NUL-terminated
        // string, static or in a per-thread buffer, valid until the next call on this thread;
        // it is copied before anything else runs.
        let text = unsafe {
            let ptr = dpdk_sys::rte_strerror(code);
            if ptr.is_null() {
                String::from("unknown error")
            } else {
                CStr::from_ptr(ptr).to_string_lossy().into_owned()
            }
        };
        Self { code, text }
    }

    /// The calling thread's current `rte_errno`.
    pub fn last() -> Self {
        // SAFETY: a plain read of a thread-local integer through the C getter.
        Self::from_code(unsafe { dpdk_sys::wirelat_rte_errno() })
    }
}

impl fmt::Display for RteErrno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (errno {})", self.text, self.code)
    }
}

/// Which `[[port]]` setting a device refused ([`DpdkError::PortRefused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortSetting {
    /// `mtu` (or, when none is given, the kernel interface's MTU).
    Mtu,
    /// The queue count, one per worker (`[workers]`).
    Queues,
    /// The device string and its arguments (`device`).
    Device,
}

/// Everything that can go wrong while bringing up or tearing down DPDK.
// Each variant's fields are named in its message; documenting them again adds nothing.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum DpdkError {
    /// `rte_eal_init` may run once per process.
    #[error("the DPDK EAL was already initialised in this process (it can be initialised only once)")]
    EalAlreadyInitialised,
    /// `rte_eal_init` refused the arguments or the environment.
    #[error("DPDK EAL initialisation failed with arguments {args:?}: {reason} (see the EAL log lines above)")]
    EalInit { args: Vec<String>, reason: RteErrno },
    /// A value handed to the wrapper cannot be passed to DPDK.
    #[error("invalid {what}: {detail}")]
    InvalidArgument { what: &'static str, detail: String },
    /// No ethdev has the requested name after EAL probing.
    #[error(
        "no DPDK port named `{name}` (ports found: {available:?}); check the device string and the EAL log above"
    )]
    PortNotFound { name: String, available: Vec<String> },
    /// An ethdev call failed.
    #[error("port {port} ({name}): {operation} failed: {reason}")]
    Port { port: u16, name: String, operation: &'static str, reason: RteErrno },
    /// The device cannot do what the configuration asks.
    #[error("port {port} ({name}): {detail}")]
    PortCapability { port: u16, name: String, detail: String },
    /// The device or its kernel interface refuses a setting the configuration asks for: the
    /// operator must change `setting` (the run exits 2 naming it), unlike a runtime failure.
    #[error("port {port} ({name}): {detail}")]
    PortRefused { port: u16, name: String, setting: PortSetting, detail: String },
    /// A queue handle was requested twice: DPDK queues are single-threaded.
    #[error("port {port} ({name}): {kind} queue {queue} is already in use")]
    QueueTaken { port: u16, name: String, kind: &'static str, queue: u16 },
    /// `rte_pktmbuf_pool_create` failed.
    #[error(
        "mbuf pool `{name}` ({mbufs} mbufs with {data_room_bytes} B data room) cannot be created: {reason}"
    )]
    Mempool { name: String, mbufs: u32, data_room_bytes: u16, reason: RteErrno },
    /// `rte_eal_remote_launch` failed.
    #[error("launching a job on lcore {lcore} failed: {reason}")]
    Launch { lcore: u32, reason: RteErrno },
    /// `rte_eal_cleanup` failed.
    #[error("DPDK EAL cleanup failed: {reason}")]
    Cleanup { reason: RteErrno },
}
