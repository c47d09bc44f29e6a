/*
 * Part j: what rdma-core's own test suite (python3-pyverbs, tests/) checks of a device and that
 * the other parts do not: ibv_query_device_ex's extended fields agree with ibv_query_device's
 * (test_device.test_phys_port_cnt_ex).
 */
#include "abi_check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void query_device_ex(struct dev *d)
{
	struct ibv_device_attr_ex ax;
	int rc;

	memset(&ax, 0xa5, sizeof(ax));
	rc = ibv_query_device_ex(d->ctx, NULL, &ax);
	check(rc == 0 && ax.phys_port_cnt_ex == d->attr.phys_port_cnt && ax.orig_attr.phys_port_cnt == 1,
	      "j: ibv_query_device_ex: phys_port_cnt_ex %u = phys_port_cnt %u (%d)", ax.phys_port_cnt_ex,
	      ax.orig_attr.phys_port_cnt, rc);
	check(rc == 0 && ax.device_cap_flags_ex == (uint64_t)d->attr.device_cap_flags,
	      "j: ibv_query_device_ex: device_cap_flags_ex 0x%llx = device_cap_flags 0x%x",
	      (unsigned long long)ax.device_cap_flags_ex, d->attr.device_cap_flags);
	check(rc == 0 && ax.max_dm_size == 0 && ax.tso_caps.max_tso == 0 && ax.rss_caps.max_rwq_indirection_tables == 0,
	      "j: ibv_query_device_ex: no device memory, TSO or RSS (max_dm_size %llu, max_tso %u)",
	      (unsigned long long)ax.max_dm_size, ax.tso_caps.max_tso);
}

void part_suite(struct dev *d)
{
	query_device_ex(d);
}
