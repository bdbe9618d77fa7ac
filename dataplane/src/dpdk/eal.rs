//! The EAL: initialised once per process from an argument list, lcore enumeration, launching
//! jobs on worker lcores, and cleanup.

use std::ffi::{CString, c_char, c_int, c_void};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU8, Ordering};

use super::error::{DpdkError, RteErrno};

/// Process-wide EAL state: DPDK allows one `rte_eal_init` per process, ever.
static EAL_STATE: AtomicU8 = AtomicU8::new(STATE_UNINIT);
const STATE_UNINIT: u8 = 0;
const STATE_INIT: u8 = 1;
const STATE_DONE: u8 = 2;

/// The initialised EAL. Exactly one exists per process; everything DPDK borrows it.
///
/// Dropping it runs `rte_eal_cleanup`; [`Eal::cleanup`] does the same and reports errors.
/// It stays on the thread that created it (the main lcore).
pub struct Eal {
    cleaned_up: bool,
    _main_thread_only: PhantomData<*const ()>,
}

/// A job for one worker lcore. It may borrow from the caller: [`Eal::run_on_lcores`] waits
/// for every launched job before it returns.
pub struct LcoreJob<'env> {
    /// The EAL lcore id to run on (see [`Eal::worker_lcores`]).
    pub lcore: u32,
    /// What to run; its return value is the lcore's exit status.
    pub job: Box<dyn FnOnce() -> i32 + Send + 'env>,
}

/// How one worker lcore's job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LcoreOutcome {
    /// The lcore id.
    pub lcore: u32,
    /// The job's return value, or [`LcoreOutcome::PANICKED`] if it panicked.
    pub status: i32,
}

impl LcoreOutcome {
    /// Status reported for a job that panicked (the panic is caught on the lcore: unwinding
    /// into DPDK's C frames is undefined).
    pub const PANICKED: i32 = -1000;
}

impl Eal {
    /// Initialises the EAL with `args` (EAL options only; the program name is prepended).
    ///
    /// Fails with [`DpdkError::EalAlreadyInitialised`] on any second call in the process.
    pub fn init<I, S>(args: I) -> Result<Eal, DpdkError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let args: Vec<String> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let mut c_args = Vec::with_capacity(args.len() + 1);
        for arg in std::iter::once("wirelat").chain(args.iter().map(String::as_str)) {
            let c = CString::new(arg).map_err(|_| DpdkError::InvalidArgument {
                what: "EAL argument",
                detail: format!("{arg:?} contains a NUL byte"),
            })?;
            c_args.push(c);
        }
        if EAL_STATE.compare_exchange(STATE_UNINIT, STATE_INIT, Ordering::AcqRel, Ordering::Acquire).is_err()
        {
            return Err(DpdkError::EalAlreadyInitialised);
        }
        // The EAL may keep pointers into argv (and permutes the array), so argv and its strings
        // live for the rest of the process: a one-time leak of a few hundred bytes.
        let argv: &'static mut [*mut c_char] =
            Vec::leak(c_args.into_iter().map(CString::into_raw).collect::<Vec<_>>());
        let argc = c_int::try_from(argv.len()).map_err(|_| DpdkError::InvalidArgument {
            what: "EAL argument list",
            detail: format!("{} arguments", argv.len()),
        })?;
        // SAFETY: argv holds argc valid NUL-terminated strings that are never freed; this is
        // the only rte_eal_init call in the process (guarded by EAL_STATE).
        let ret = unsafe { dpdk_sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if ret < 0 {
            // DPDK does not allow a retry after a failed init either.
            EAL_STATE.store(STATE_DONE, Ordering::Release);
            return Err(DpdkError::EalInit { args, reason: RteErrno::last() });
        }
        Ok(Eal { cleaned_up: false, _main_thread_only: PhantomData })
    }

    /// The lcore running this code (the main lcore here).
    pub fn main_lcore(&self) -> u32 {
        // SAFETY: reads EAL configuration set up by rte_eal_init.
        unsafe { dpdk_sys::rte_get_main_lcore() }
    }

    /// The EAL lcore id of the calling thread (`u32::MAX` for a thread unknown to the EAL,
    /// which then bypasses the mempool's per-lcore caches).
    pub fn current_lcore() -> u32 {
        // SAFETY: reads the calling thread's lcore id (thread-local).
        unsafe { dpdk_sys::rte_lcore_id() }
    }

    /// The enabled worker lcores (every lcore but the main one), in increasing id order.
    pub fn worker_lcores(&self) -> Vec<u32> {
        let mut lcores = Vec::new();
        let mut id: u32 = u32::MAX; // rte_get_next_lcore starts after `i`; -1 means "from 0"
        loop {
            // SAFETY: pure query of the EAL lcore table; skip_main = 1, wrap = 0.
            id = unsafe { dpdk_sys::rte_get_next_lcore(id, 1, 0) };
            if id >= dpdk_sys::RTE_MAX_LCORE {
                break;
            }
            lcores.push(id);
        }
        lcores
    }

    /// The NUMA socket of `lcore` (for placing mempools and queues).
    pub fn lcore_socket(&self, lcore: u32) -> u32 {
        // SAFETY: pure query of the EAL lcore table; out-of-range ids return a sentinel.
        unsafe { dpdk_sys::rte_lcore_to_socket_id(lcore) }
    }

    /// TSC frequency in Hz as calibrated by the EAL.
    pub fn tsc_hz(&self) -> u64 {
        // SAFETY: reads a value computed during rte_eal_init.
        unsafe { dpdk_sys::rte_get_tsc_hz() }
    }

    /// Runs every job on its worker lcore and `main` on this (main) lcore, then waits for all
    /// jobs and returns `main`'s result with each lcore's outcome.
    ///
    /// `main` must make the jobs return (e.g. by setting a stop flag they poll): this function
    /// does not return, even when `main` panics, before every launched job has finished,
    /// because the jobs may borrow from the caller's stack.
    pub fn run_on_lcores<'env, R>(
        &self,
        jobs: Vec<LcoreJob<'env>>,
        main: impl FnOnce() -> R,
    ) -> Result<(R, Vec<LcoreOutcome>), DpdkError> {
        // Check every lcore before launching anything: a launch failing half-way would leave
        // already-launched jobs running with nobody to stop them.
        let workers = self.worker_lcores();
        for (i, job) in jobs.iter().enumerate() {
            if !workers.contains(&job.lcore) || jobs[..i].iter().any(|j| j.lcore == job.lcore) {
                return Err(DpdkError::InvalidArgument {
                    what: "lcore",
                    detail: format!("lcore {} is not a free worker lcore (workers: {workers:?})", job.lcore),
                });
            }
        }
        let mut launched = LaunchedLcores { lcores: Vec::with_capacity(jobs.len()), outcomes: Vec::new() };
        for LcoreJob { lcore, job } in jobs {
            let boxed: Box<Box<dyn FnOnce() -> i32 + Send + 'env>> = Box::new(job);
            let arg = Box::into_raw(boxed).cast::<c_void>();
            // SAFETY: `lcore_trampoline` takes back ownership of `arg` exactly once on the
            // worker lcore. The job may borrow data of lifetime 'env: `launched` waits for the
            // lcore before this function returns or unwinds.
            let ret = unsafe { dpdk_sys::rte_eal_remote_launch(Some(lcore_trampoline), arg, lcore) };
            if ret != 0 {
                // SAFETY: the launch failed, so the worker never saw `arg`: reclaim it here.
                drop(unsafe { Box::from_raw(arg.cast::<Box<dyn FnOnce() -> i32 + Send + 'env>>()) });
                return Err(DpdkError::Launch { lcore, reason: RteErrno::from_code(ret) });
            }
            launched.lcores.push(lcore);
        }
        let result = main();
        launched.wait_all();
        Ok((result, std::mem::take(&mut launched.outcomes)))
    }

    /// Releases the EAL's resources (`rte_eal_cleanup`). Everything borrowing the EAL (pools,
    /// ports) is gone by then; the EAL cannot be initialised again in this process.
    pub fn cleanup(mut self) -> Result<(), DpdkError> {
        self.cleaned_up = true;
        cleanup_eal()
    }
}

impl Drop for Eal {
    fn drop(&mut self) {
        if !self.cleaned_up {
            // Errors are already reported by DPDK's log; there is no caller to return them to.
            let _ = cleanup_eal();
        }
    }
}

fn cleanup_eal() -> Result<(), DpdkError> {
    EAL_STATE.store(STATE_DONE, Ordering::Release);
    // SAFETY: called once, after every worker job was waited for and every pool and port that
    // borrowed the EAL was dropped (enforced by lifetimes).
    let ret = unsafe { dpdk_sys::rte_eal_cleanup() };
    if ret < 0 { Err(DpdkError::Cleanup { reason: RteErrno::from_code(ret) }) } else { Ok(()) }
}

/// Lcores with a job in flight; waits for them when dropped (also while unwinding).
struct LaunchedLcores {
    lcores: Vec<u32>,
    outcomes: Vec<LcoreOutcome>,
}

impl LaunchedLcores {
    fn wait_all(&mut self) {
        for lcore in self.lcores.drain(..) {
            // SAFETY: `lcore` was launched by rte_eal_remote_launch from this (main) lcore.
            let status = unsafe { dpdk_sys::rte_eal_wait_lcore(lcore) };
            self.outcomes.push(LcoreOutcome { lcore, status });
        }
    }
}

impl Drop for LaunchedLcores {
    fn drop(&mut self) {
        self.wait_all();
    }
}

/// Entry point of a worker lcore: runs the boxed job, never lets a panic unwind into C.
unsafe extern "C" fn lcore_trampoline(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` came from Box::into_raw in run_on_lcores and is consumed only here.
    let job = unsafe { Box::from_raw(arg.cast::<Box<dyn FnOnce() -> i32 + Send>>()) };
    catch_unwind(AssertUnwindSafe(move || (*job)())).unwrap_or(LcoreOutcome::PANICKED)
}
