/*
 * Part j: what rdma-core's own test suite (python3-pyverbs, tests/) checks of a device and that
 * the other parts do not: ibv_query_device_ex's extended fields agree with ibv_query_device's
 * (test_device.test_phys_port_cnt_ex); a QP moved to RESET takes its completions out of its CQ, as
 * mlx5 does, and leaves another QP's (test_mr.test_mr_rereg_addr and _pd reset QPs after an error
 * and poll again); a receive into a region of another PD is taken by ibv_post_recv and fails when
 * the message arrives, as rxe checks it (test_mr.test_mr_rereg_pd: the sender sees a remote
 * operational error).
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

/* B's receive names a region of another PD: posted, then the SEND fails at arrival on both sides. */
static void recv_other_pd(struct dev *d)
{
	static const struct pair_opts opts = { .sq = 4, .rq = 4, .sge = 1, .min_rnr_timer = 1, .rnr_retry = 7 };
	static unsigned char src[256], dst[256];
	struct ibv_pd *pd2 = ibv_alloc_pd(d->ctx);
	struct ibv_mr *smr = NULL, *dmr = NULL;
	struct ibv_wc wc;
	struct pair p;
	int rc, r;

	if (!pd2 || pair_open(d, &p, &opts)) {
		fail("j: setup for the other-PD receive: %s", strerror(errno));
		if (pd2)
			ibv_dealloc_pd(pd2);
		return;
	}
	smr = ibv_reg_mr(d->pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(pd2, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	if (!smr || !dmr) {
		fail("j: ibv_reg_mr for the other-PD receive: %s", strerror(errno));
		goto out;
	}
	memset(dst, 0, sizeof(dst));
	memset(src, 0x5a, sizeof(src));
	rc = post_recv_one(p.b, dst, sizeof(dst), dmr->lkey, 7);
	if (!check(rc == 0, "j: ibv_post_recv of a region of another PD is taken, as rxe takes it (%s)",
		   strerror(rc > 0 ? rc : -rc)))
		goto out;
	if ((rc = post_one(p.a, IBV_WR_SEND, src, 100, smr->lkey, 0, 0, 8))) {
		fail("j: ibv_post_send: %s", strerror(rc));
		goto out;
	}
	r = poll_wc(p.cq_b, &wc, 5000);
	check(r == 1 && wc.wr_id == 7 && wc.status == IBV_WC_LOC_PROT_ERR,
	      "j: the receive completes with IBV_WC_LOC_PROT_ERR (%d, wr_id %llu, %s)", r,
	      (unsigned long long)wc.wr_id, r == 1 ? ibv_wc_status_str(wc.status) : "-");
	r = poll_wc(p.cq_a, &wc, 5000);
	check(r == 1 && wc.wr_id == 8 && wc.status == IBV_WC_REM_OP_ERR,
	      "j: the SEND completes with IBV_WC_REM_OP_ERR (%d, wr_id %llu, %s)", r, (unsigned long long)wc.wr_id,
	      r == 1 ? ibv_wc_status_str(wc.status) : "-");
	check(find_byte_mismatch(dst, sizeof(dst), 0) < 0, "j: nothing was written into the other PD's region");
out:
	pair_destroy(&p);
	if (smr)
		ibv_dereg_mr(smr);
	if (dmr)
		ibv_dereg_mr(dmr);
	ibv_dealloc_pd(pd2);
}

void part_suite(struct dev *d)
{
	query_device_ex(d);
	reset_cleans_cq(d);
	recv_other_pd(d);
}
