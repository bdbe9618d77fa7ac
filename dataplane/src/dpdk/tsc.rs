//! The CPU's time-stamp counter through DPDK (`rte_rdtsc`), and the spin-wait hint
//! (`rte_pause`): what a pacing loop needs. The counter's frequency is [`Eal::tsc_hz`], as
//! calibrated by the EAL; DPDK requires an invariant TSC, so ticks are a steady clock.
//!
//! [`Eal::tsc_hz`]: super::Eal::tsc_hz

/// The current TSC value, in ticks.
#[inline]
pub fn tsc_now() -> u64 {
    // SAFETY: reads the time-stamp counter; no memory is touched and it works on any thread.
    unsafe { dpdk_sys::rte_rdtsc() }
}

/// Tells the CPU the caller is spinning (a `pause` instruction), to be kind to a sibling
/// hyperthread and to save power while waiting.
#[inline]
pub fn spin_pause() {
    // SAFETY: a CPU hint without memory effects.
    unsafe { dpdk_sys::rte_pause() }
}
