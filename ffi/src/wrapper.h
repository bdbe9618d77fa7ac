/* The DPDK headers wirelat binds to. bindgen reads this file; the generated static-function
 * wrappers (static_wrappers.c) include it too, so both see exactly the same declarations. */
#include <rte_config.h>
#include <rte_common.h>
#include <rte_version.h>
#include <rte_errno.h>
#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_ethdev.h>

/* rte_errno is a per-lcore thread-local macro: Rust cannot name it, so errno.c exports it. */
int wirelat_rte_errno(void);
