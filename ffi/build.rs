//! Generates the DPDK bindings from the installed headers.
//!
//! 1. Probe `libdpdk` (>= 22.11) with pkg-config: include paths, cflags and libraries.
//! 2. bindgen over `src/wrapper.h` with an allowlist, and `wrap_static_fns` so that the
//!    `static inline` fast-path functions (rx/tx burst, mbuf free, ...) get real C symbols.
//! 3. Compile the generated wrappers and `src/errno.c` with exactly DPDK's own cflags
//!    (`-include rte_config.h -march=...`): a different `-march` breaks inlining of the headers.
//! 4. Link the DPDK shared libraries; the EAL then loads the PMD plugins (net_pcap, net_ring,
//!    net_null, ...) from its plugin directory at run time.
//!
//! Any missing prerequisite (pkg-config, libdpdk, libclang) stops the build with one message
//! naming the Debian packages to install, instead of a wall of compiler errors.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// Oldest DPDK release whose API this crate is written against (fast-path ops in
/// `rte_eth_fp_ops`, `RTE_ETH_*` names, dynamic mbuf timestamp field).
const MIN_DPDK_VERSION: &str = "22.11";

const INSTALL_HINT: &str = "install the prerequisites with: sudo apt-get install -y libdpdk-dev dpdk-dev libclang-dev clang pkg-config \
     (or run scripts/setup.sh), or build without DPDK: cargo build --no-default-features";

fn main() {
    if let Err(message) = run() {
        // One clear message, no panic backtrace: cargo prints a failing build script's stderr.
        eprintln!("error: dpdk-sys cannot be built: {message}");
        eprintln!("hint: {INSTALL_HINT}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let out_dir = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let header = manifest_dir.join("src/wrapper.h");
    let errno_c = manifest_dir.join("src/errno.c");
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed={}", errno_c.display());
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");

    let dpdk = probe_dpdk()?;
    let cflags = dpdk_cflags()?;

    let wrappers_stem = out_dir.join("static_wrappers");
    let bindings = generate_bindings(&header, &cflags, &wrappers_stem)?;
    bindings
        .write_to_file(out_dir.join("bindings.rs"))
        .map_err(|e| format!("cannot write the generated bindings: {e}"))?;

    // The static-function wrappers and the rte_errno getter, compiled with DPDK's cflags.
    let mut build = cc::Build::new();
    build.file(wrappers_stem.with_extension("c")).file(&errno_c).include(manifest_dir.join("src"));
    for flag in &cflags {
        build.flag(flag);
    }
    build.warnings(false);
    build
        .try_compile("wirelat_dpdk_wrappers")
        .map_err(|e| format!("compiling the static-function wrappers failed: {e}"))?;

    // Link after the wrapper library so that `--as-needed` keeps every DPDK library it uses.
    for path in &dpdk.link_paths {
        println!("cargo:rustc-link-search=native={}", path.display());
    }
    for lib in &dpdk.libs {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    println!("cargo:version={}", dpdk.version);
    Ok(())
}

/// `pkg-config libdpdk`, with the error turned into a sentence that says what is missing.
fn probe_dpdk() -> Result<pkg_config::Library, String> {
    pkg_config::Config::new()
        .atleast_version(MIN_DPDK_VERSION)
        .cargo_metadata(false)
        .probe("libdpdk")
        .map_err(|e| match e {
            pkg_config::Error::Command { .. } => {
                "the `pkg-config` program was not found (Debian package pkg-config)".to_string()
            }
            pkg_config::Error::Failure { .. } | pkg_config::Error::ProbeFailure { .. } => format!(
                "pkg-config found no `libdpdk` >= {MIN_DPDK_VERSION} (Debian package libdpdk-dev); \
                 pkg-config said: {}",
                e.to_string().lines().rfind(|l| !l.trim().is_empty()).unwrap_or("nothing").to_owned()
            ),
            other => format!("probing libdpdk with pkg-config failed: {other}"),
        })
}

/// The exact compiler flags DPDK was built for, including `-include rte_config.h` and
/// `-march=...`, which the pkg-config crate does not expose.
fn dpdk_cflags() -> Result<Vec<String>, String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&program)
        .args(["--cflags", "libdpdk"])
        .output()
        .map_err(|e| format!("running `{program} --cflags libdpdk` failed: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`{program} --cflags libdpdk` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let text = String::from_utf8(output.stdout).map_err(|e| format!("non-UTF-8 cflags: {e}"))?;
    // DPDK's .pc file has no quoted arguments: whitespace splitting is exact. `-include X`
    // is two words and must stay two consecutive arguments.
    Ok(text.split_whitespace().map(str::to_owned).collect())
}

fn generate_bindings(
    header: &std::path::Path,
    cflags: &[String],
    wrappers_stem: &std::path::Path,
) -> Result<bindgen::Bindings, String> {
    let builder = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_args(cflags)
        // Function-like macros such as `RTE_BIT64(14)` behind the offload flags.
        .clang_macro_fallback()
        .clang_macro_fallback_build_dir(wrappers_stem.parent().unwrap_or(wrappers_stem))
        .allowlist_function(
            "rte_eal_(init|cleanup|remote_launch|wait_lcore|process_type)|\
             rte_(lcore_id|get_main_lcore|get_next_lcore|lcore_count|lcore_to_socket_id|socket_id)|\
             rte_(strerror|version|rdtsc|get_tsc_hz|pause)|\
             rte_pktmbuf_(pool_create|free|free_bulk|alloc|read|data_room_size)|rte_mempool_(free|avail_count|in_use_count)|\
             rte_mbuf_(dynfield_lookup|dynflag_lookup)|\
             rte_eth_dev_(count_avail|get_port_by_name|get_name_by_port|info_get|configure|adjust_nb_rx_tx_desc|\
             start|stop|close|socket_id|set_mtu|get_mtu)|\
             rte_eth_(rx_queue_setup|tx_queue_setup|promiscuous_enable|promiscuous_get|stats_get|\
             rx_burst|tx_burst|read_clock|link_get_nowait)|\
             rte_dev_bus|rte_bus_name|\
             wirelat_rte_errno",
        )
        .allowlist_type("rte_mbuf|rte_eth_conf|rte_eth_dev_info|rte_eth_stats|rte_eth_rxconf|rte_eth_txconf|rte_eth_link")
        .allowlist_var(
            "RTE_ETH_(RX|TX)_OFFLOAD_.*|RTE_ETH_RSS_.*|RTE_ETH_MQ_.*|RTE_MBUF_.*|RTE_PKTMBUF_HEADROOM|\
             RTE_MAX_LCORE|RTE_MAX_ETHPORTS|RTE_VER_.*|RTE_ETHER_(HDR_LEN|CRC_LEN|MTU|MAX_JUMBO_FRAME_LEN)|\
             RTE_ETH_NAME_MAX_LEN|RTE_MEMPOOL_CACHE_MAX_SIZE|SOCKET_ID_ANY|LCORE_ID_ANY",
        )
        .rustified_enum("rte_eth_rx_mq_mode|rte_eth_tx_mq_mode|rte_lcore_state_t")
        // Packed-and-aligned headers that rustc cannot represent (bindgen issue 1538).
        .opaque_type("rte_arp_hdr|rte_arp_ipv4|rte_l2tpv2_combined_msg_hdr|rte_gtp_psc_generic_hdr")
        .derive_default(true)
        .generate_comments(false)
        .layout_tests(true)
        .wrap_static_fns(true)
        .wrap_static_fns_path(wrappers_stem)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));

    // bindgen panics instead of returning an error when libclang cannot be loaded; turn that
    // into the same one-line error as the other missing prerequisites.
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()));
    std::panic::set_hook(previous_hook);
    match result {
        Ok(Ok(bindings)) => Ok(bindings),
        Ok(Err(e)) => Err(format!("bindgen could not parse the DPDK headers: {e}")),
        Err(panic) => {
            let detail = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_default();
            Err(format!(
                "bindgen failed, most likely because libclang is missing (Debian package libclang-dev): {detail}"
            ))
        }
    }
}
