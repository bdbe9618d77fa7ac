/* The one hand-written C function of dpdk-sys: rte_errno is a macro over a per-lcore
 * thread-local variable, which bindgen cannot wrap. */
#include "wrapper.h"

int wirelat_rte_errno(void)
{
	return rte_errno;
}
