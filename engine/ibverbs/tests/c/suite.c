/*
 * Part j: what rdma-core's own test suite (python3-pyverbs, tests/) checks of a device and that
 * the other parts do not: ibv_query_device_ex's extended fields agree with ibv_query_device's
 * (test_device.test_phys_port_cnt_ex); a QP moved to RESET takes its completions out of its CQ, as
 * mlx5 does, and leaves another QP's (test_mr.test_mr_rereg_addr and _pd reset QPs after an error
 * and poll again).
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

static struct ibv_qp *rc_qp(struct dev *d, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(d->pd, &ia);
	if (!qp)
		fail("j: ibv_create_qp(RC): %s", strerror(errno));
	return qp;
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = s;
	return ibv_modify_qp(qp, &attr, IBV_QP_STATE);
}

/* Every completion the CQ holds within timeout_ms: their wr_ids in ids (at most max), how many. */
static int drain(struct ibv_cq *cq, uint64_t *ids, int max, int timeout_ms)
{
	struct ibv_wc wc;
	int n = 0;

	while (poll_wc(cq, &wc, timeout_ms) == 1) {
		if (n < max)
			ids[n] = wc.status == IBV_WC_WR_FLUSH_ERR ? wc.wr_id : ~0ull;
		n++;
		timeout_ms = 100;
	}
	return n;
}

/* Two QPs on one CQ, each with a receive flushed by ERR: resetting one drops its completion only. */
static void reset_cleans_cq(struct dev *d)
{
	struct ibv_cq *cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	struct ibv_qp *x = NULL, *y = NULL;
	struct ibv_mr *mr = NULL;
	static unsigned char buf[64];
	uint64_t ids[4] = { 0 };
	struct ibv_wc wc;
	int n;

	if (!cq) {
		fail("j: ibv_create_cq: %s", strerror(errno));
		return;
	}
	mr = ibv_reg_mr(d->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	x = rc_qp(d, cq);
	y = rc_qp(d, cq);
	if (!mr || !x || !y) {
		fail("j: setup for the RESET check: %s", strerror(errno));
		goto out;
	}
	if (qp_to_init(x) || qp_to_init(y) || post_recv_one(x, buf, 32, mr->lkey, 1) ||
	    post_recv_one(y, buf + 32, 32, mr->lkey, 2) || to_state(x, IBV_QPS_ERR) || to_state(y, IBV_QPS_ERR)) {
		fail("j: two QPs with a receive each to ERR: %s", strerror(errno));
		goto out;
	}
	/* Let both flushes reach the CQ, then reset X with them unpolled. */
	sleep_ms(100);
	check(to_state(x, IBV_QPS_RESET) == 0, "j: ERR -> RESET with a flushed receive in the CQ");
	n = drain(cq, ids, 4, 1000);
	check(n == 1 && ids[0] == 2,
	      "j: after RESET of one of two QPs the CQ holds only the other's flushed receive (%d completion(s), "
	      "first wr_id %llu)",
	      n, (unsigned long long)ids[0]);
	/* The reset QP works again: a new receive flushed by ERR completes once. */
	if (qp_to_init(x) || post_recv_one(x, buf, 32, mr->lkey, 3) || to_state(x, IBV_QPS_ERR)) {
		fail("j: the reset QP to INIT, a receive, to ERR: %s", strerror(errno));
		goto out;
	}
	n = drain(cq, ids, 4, 1000);
	check(n == 1 && ids[0] == 3, "j: the reset QP's next receive is flushed once (%d, wr_id %llu)", n,
	      (unsigned long long)ids[0]);
	check(ibv_poll_cq(cq, 1, &wc) == 0, "j: nothing else in the CQ");
out:
	if (x)
		ibv_destroy_qp(x);
	if (y)
		ibv_destroy_qp(y);
	if (mr)
		ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
}

void part_suite(struct dev *d)
{
	query_device_ex(d);
	reset_cleans_cq(d);
}
