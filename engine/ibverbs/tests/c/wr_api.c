/*
 * Part e: the extended send API (struct ibv_qp_ex, what perftest uses on devices that offer it):
 * ibv_create_qp_ex with send-ops flags, ibv_qp_to_qp_ex, and requests built with ibv_wr_start,
 * ibv_wr_rdma_write / ibv_wr_send / ibv_wr_rdma_read, ibv_wr_set_sge, ibv_wr_set_inline_data and
 * posted by ibv_wr_complete; data checked byte for byte. Also: a setter before any builder makes
 * ibv_wr_complete fail and posts nothing.
 */
#include "abi_check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct ibv_qp *create_ex(struct dev *d, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 16;
	a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = 64;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.pd = d->pd;
	a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;
	errno = 0;
	return ibv_create_qp_ex(d->ctx, &a);
}

void part_wr_api(struct dev *d)
{
	enum { LEN = 3000, INL = 48 };
	struct ibv_cq *cq_a = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cq_b = ibv_create_cq(d->ctx, 64, NULL, NULL, 0);
	struct ibv_qp *a = NULL, *b = NULL;
	unsigned char *src = malloc(LEN), *dst = malloc(LEN), *rbuf = malloc(LEN), *back = malloc(LEN);
	unsigned char inl[INL];
	struct ibv_mr *msrc = NULL, *mdst = NULL, *mrbuf = NULL, *mback = NULL;
	struct ibv_qp_ex *qx;
	struct ibv_wc wc;
	int rc;

	if (!check(cq_a && cq_b && src && dst && rbuf && back, "e: setup: CQs and buffers"))
		goto out;
	a = create_ex(d, cq_a);
	if (!check(a != NULL, "e: ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (errno %d)", errno))
		goto out;
	b = create_ex(d, cq_b);
	if (!b)
		goto out;
	qx = ibv_qp_to_qp_ex(a);
	if (!check(qx != NULL && &qx->qp_base == a, "e: ibv_qp_to_qp_ex gives the QP's extended form"))
		goto out;
	if (qp_to_init(a) || qp_to_init(b) || qp_to_rtr(d, a, b->qp_num, 12) || qp_to_rtr(d, b, a->qp_num, 12) ||
	    qp_to_rts(a, 7) || qp_to_rts(b, 7))
		goto out;
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	msrc = ibv_reg_mr(d->pd, src, LEN, acc);
	mdst = ibv_reg_mr(d->pd, dst, LEN, acc);
	mrbuf = ibv_reg_mr(d->pd, rbuf, LEN, acc);
	mback = ibv_reg_mr(d->pd, back, LEN, acc);
	if (!check(msrc && mdst && mrbuf && mback, "e: setup: MRs"))
		goto out;
	fill_pat(src, LEN, 51);
	fill_pat(inl, INL, 52);
	memset(dst, 0, LEN);
	memset(rbuf, 0, LEN);
	memset(back, 0, LEN);
	if (post_recv_one(b, rbuf, LEN, mrbuf->lkey, 7))
		goto out;

	/* A WRITE and an inline SEND in one batch. */
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, mdst->rkey, (uint64_t)(uintptr_t)dst);
	ibv_wr_set_sge(qx, msrc->lkey, (uint64_t)(uintptr_t)src, LEN);
	qx->wr_id = 2;
	qx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(qx);
	ibv_wr_set_inline_data(qx, inl, INL);
	rc = ibv_wr_complete(qx);
	check(rc == 0, "e: ibv_wr_complete of a WRITE and an inline SEND returns 0 (%d)", rc);
	int got = 0;
	while (got < 2 && poll_wc(cq_a, &wc, 5000) == 1) {
		check(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)got + 1, "e: completion %d: wr_id %llu status %d",
		      got + 1, (unsigned long long)wc.wr_id, wc.status);
		got++;
	}
	check(got == 2, "e: both batched requests complete (%d)", got);
	check(poll_wc(cq_b, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == INL,
	      "e: the inline SEND arrives with %d bytes", INL);
	check(find_pat_mismatch(dst, LEN, 51) < 0, "e: the WRITE's bytes are all at the target");
	check(find_pat_mismatch(rbuf, INL, 52) < 0, "e: the inline SEND's bytes are all in the receive buffer");

	/* A READ back through the extended API. */
	ibv_wr_start(qx);
	qx->wr_id = 3;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(qx, mdst->rkey, (uint64_t)(uintptr_t)dst);
	ibv_wr_set_sge(qx, mback->lkey, (uint64_t)(uintptr_t)back, LEN);
	rc = ibv_wr_complete(qx);
	check(rc == 0 && poll_wc(cq_a, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 3,
	      "e: ibv_wr_rdma_read completes");
	check(find_pat_mismatch(back, LEN, 51) < 0, "e: the READ brings the bytes back");

	/* A setter with no request started: ibv_wr_complete reports it and posts nothing. */
	ibv_wr_start(qx);
	ibv_wr_set_sge(qx, msrc->lkey, (uint64_t)(uintptr_t)src, LEN);
	rc = ibv_wr_complete(qx);
	check(rc != 0 && poll_wc(cq_a, &wc, 200) == 0, "e: a setter before any builder fails ibv_wr_complete (%d), nothing posted", rc);
out:
	if (a)
		ibv_destroy_qp(a);
	if (b)
		ibv_destroy_qp(b);
	if (msrc)
		ibv_dereg_mr(msrc);
	if (mdst)
		ibv_dereg_mr(mdst);
	if (mrbuf)
		ibv_dereg_mr(mrbuf);
	if (mback)
		ibv_dereg_mr(mback);
	if (cq_a)
		ibv_destroy_cq(cq_a);
	if (cq_b)
		ibv_destroy_cq(cq_b);
	free(src);
	free(dst);
	free(rbuf);
	free(back);
}
