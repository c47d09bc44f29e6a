/*
 * Part h: CQs beyond ibv_create_cq. ibv_resize_cq with completions outstanding: a size below
 * what the CQ holds (or 0, or above max_cqe) is EINVAL and changes nothing, exactly what it holds
 * is accepted, a grown CQ takes completions a smaller one would have overrun on, and none is lost
 * or reordered. The extended CQ of ibv_create_cq_ex with rxe's wc_flags: unsupported flags are
 * EOPNOTSUPP, ibv_start_poll of an empty CQ is ENOENT (no ibv_end_poll after it), SEND/RECV and
 * WRITE_WITH_IMM completions read through every read_* callback equal what ibv_poll_cq on
 * ibv_cq_ex_to_cq gives for the same traffic, next_poll ends a batch with ENOENT, and the CQ
 * works with a completion channel, ibv_req_notify_cq, ibv_resize_cq and ibv_destroy_cq.
 */
#include "abi_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

enum { SEND_LEN = 100, WRITE_LEN = 200, BUF = 4096, IMM = 0x12345678 };

/* One completion's fields, however it was read. */
struct cqe_fields {
	uint64_t wr_id;
	int status, opcode;
	uint32_t vendor_err, byte_len, imm, qp_num, src_qp, wc_flags, slid;
	uint8_t sl, dlid_path_bits;
};

static const uint64_t RXE_WC_FLAGS = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
				     IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
				     IBV_WC_EX_WITH_DLID_PATH_BITS;

static struct cqe_fields from_wc(const struct ibv_wc *wc)
{
	struct cqe_fields f = {
		.wr_id = wc->wr_id,
		.status = wc->status,
		.opcode = wc->opcode,
		.vendor_err = wc->vendor_err,
		.byte_len = wc->byte_len,
		.imm = wc->imm_data,
		.qp_num = wc->qp_num,
		.src_qp = wc->src_qp,
		.wc_flags = wc->wc_flags,
		.slid = wc->slid,
		.sl = wc->sl,
		.dlid_path_bits = wc->dlid_path_bits,
	};
	return f;
}

/* The current completion of an extended CQ, through every callback its wc_flags asked for. */
static struct cqe_fields from_ex(struct ibv_cq_ex *cq)
{
	struct cqe_fields f = {
		.wr_id = cq->wr_id,
		.status = cq->status,
		.opcode = ibv_wc_read_opcode(cq),
		.vendor_err = ibv_wc_read_vendor_err(cq),
		.byte_len = ibv_wc_read_byte_len(cq),
		.imm = ibv_wc_read_imm_data(cq),
		.qp_num = ibv_wc_read_qp_num(cq),
		.src_qp = ibv_wc_read_src_qp(cq),
		.wc_flags = ibv_wc_read_wc_flags(cq),
		.slid = ibv_wc_read_slid(cq),
		.sl = ibv_wc_read_sl(cq),
		.dlid_path_bits = ibv_wc_read_dlid_path_bits(cq),
	};
	return f;
}

static int same(const struct cqe_fields *x, const struct cqe_fields *y)
{
	return x->wr_id == y->wr_id && x->status == y->status && x->opcode == y->opcode &&
	       x->vendor_err == y->vendor_err && x->byte_len == y->byte_len && x->imm == y->imm &&
	       x->qp_num == y->qp_num && x->src_qp == y->src_qp && x->wc_flags == y->wc_flags &&
	       x->slid == y->slid && x->sl == y->sl && x->dlid_path_bits == y->dlid_path_bits;
}

static void show(const char *what, const struct cqe_fields *f)
{
	ok("h: %s: wr_id %llu status %d opcode %d vendor_err %u byte_len %u imm 0x%08x qp %u src_qp %u "
	   "wc_flags 0x%x slid %u sl %u dlid_path_bits %u",
	   what, (unsigned long long)f->wr_id, f->status, f->opcode, f->vendor_err, f->byte_len, ntohl(f->imm),
	   f->qp_num, f->src_qp, f->wc_flags, f->slid, f->sl, f->dlid_path_bits);
}

static struct ibv_qp *rc_qp(struct dev *d, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	errno = 0;
	return ibv_create_qp(d->pd, &ia);
}

static int connect_qps(struct dev *d, struct ibv_qp *a, struct ibv_qp *b)
{
	return qp_to_init(a) || qp_to_init(b) || qp_to_rtr(d, a, b->qp_num, 12) || qp_to_rtr(d, b, a->qp_num, 12) ||
	       qp_to_rts(a, 7) || qp_to_rts(b, 7);
}

/* Waits for n successful send completions on a plain CQ. */
static int wait_sends(struct ibv_cq *cq, int n, const char *what)
{
	struct ibv_wc wc;

	for (int i = 0; i < n; i++) {
		int r = poll_wc(cq, &wc, 5000);

		if (r != 1 || wc.status != IBV_WC_SUCCESS) {
			fail("h: %s: send completion %d of %d: poll %d, status %s", what, i + 1, n, r,
			     r == 1 ? ibv_wc_status_str(wc.status) : "-");
			return -1;
		}
	}
	return 0;
}

static void part_resize(struct dev *d)
{
	struct pair p;
	struct pair_opts o = { .sq = 16, .rq = 16, .sge = 1, .min_rnr_timer = 12, .rnr_retry = 7 };
	unsigned char *src = malloc(BUF), *rbuf = malloc(BUF);
	struct ibv_mr *msrc = NULL, *mrbuf = NULL;
	struct ibv_wc wc[16];
	int rc, n, i, cqe0;

	if (!check(src && rbuf, "h: resize: setup: buffers") || pair_open(d, &p, &o))
		goto out_free;
	msrc = ibv_reg_mr(d->pd, src, BUF, IBV_ACCESS_LOCAL_WRITE);
	mrbuf = ibv_reg_mr(d->pd, rbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
	if (!check(msrc && mrbuf, "h: resize: setup: MRs"))
		goto out;
	memset(rbuf, 0, BUF);
	/* Twelve SENDs of 64 bytes, each into its own 64 bytes of B's buffer, in two rounds of six. */
	for (i = 0; i < 12; i++)
		fill_pat(src + 64 * i, 64, 300 + i);
	for (i = 0; i < 6; i++)
		if (post_recv_one(p.b, rbuf + 64 * i, 64, mrbuf->lkey, 200 + i) ||
		    post_one(p.a, IBV_WR_SEND, src + 64 * i, 64, msrc->lkey, 0, 0, 100 + i))
			goto out;
	/* A's six send completions: B received all six, its CQ holds them. */
	if (wait_sends(p.cq_a, 6, "resize"))
		goto out;
	cqe0 = p.cq_b->cqe;

	errno = 0;
	rc = ibv_resize_cq(p.cq_b, 5);
	check(rc == EINVAL && p.cq_b->cqe == cqe0,
	      "h: ibv_resize_cq to 5 with 6 completions outstanding is EINVAL (%d, errno %d), cqe stays %d (%d)", rc,
	      errno, cqe0, p.cq_b->cqe);
	rc = ibv_resize_cq(p.cq_b, 0);
	check(rc == EINVAL, "h: ibv_resize_cq to 0 is EINVAL (%d)", rc);
	rc = ibv_resize_cq(p.cq_b, d->attr.max_cqe + 1);
	check(rc == EINVAL && p.cq_b->cqe == cqe0, "h: ibv_resize_cq above max_cqe %d is EINVAL (%d)", d->attr.max_cqe,
	      rc);
	rc = ibv_resize_cq(p.cq_b, 6);
	check(rc == 0 && p.cq_b->cqe == 6,
	      "h: ibv_resize_cq to exactly the 6 completions outstanding succeeds (%d), cqe %d", rc, p.cq_b->cqe);
	rc = ibv_resize_cq(p.cq_b, 64);
	check(rc == 0 && p.cq_b->cqe == 64, "h: ibv_resize_cq grows it back to 64 (%d), cqe %d", rc, p.cq_b->cqe);

	/* Six more: twelve outstanding, twice what the CQ of 6 could hold. */
	for (i = 6; i < 12; i++)
		if (post_recv_one(p.b, rbuf + 64 * i, 64, mrbuf->lkey, 200 + i) ||
		    post_one(p.a, IBV_WR_SEND, src + 64 * i, 64, msrc->lkey, 0, 0, 100 + i))
			goto out;
	if (wait_sends(p.cq_a, 6, "resize"))
		goto out;
	n = ibv_poll_cq(p.cq_b, 16, wc);
	if (check(n == 12, "h: after resizing, B's CQ gives all 12 receive completions in one poll (%d)", n)) {
		int in_order = 1, good = 1;

		for (i = 0; i < 12; i++) {
			in_order &= wc[i].wr_id == (uint64_t)(200 + i);
			good &= wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RECV && wc[i].byte_len == 64 &&
				find_pat_mismatch(rbuf + 64 * i, 64, 300 + i) < 0;
		}
		check(in_order, "h: the 12 receive completions are in posting order");
		check(good, "h: every one is a successful 64-byte RECV with its bytes in place");
	}
	n = ibv_poll_cq(p.cq_b, 16, wc);
	check(n == 0, "h: nothing more on B's CQ (%d)", n);
out:
	pair_destroy(&p);
	if (msrc)
		ibv_dereg_mr(msrc);
	if (mrbuf)
		ibv_dereg_mr(mrbuf);
out_free:
	free(src);
	free(rbuf);
}

static struct ibv_cq_ex *create_ex(struct dev *d, uint64_t wc_flags, struct ibv_comp_channel *ch, void *cq_ctx,
				   uint32_t comp_mask, uint32_t flags)
{
	struct ibv_cq_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.cqe = 32;
	a.cq_context = cq_ctx;
	a.channel = ch;
	a.wc_flags = wc_flags;
	a.comp_mask = comp_mask;
	a.flags = flags;
	errno = 0;
	return ibv_create_cq_ex(d->ctx, &a);
}

static void refused(struct dev *d, uint64_t wc_flags, uint32_t comp_mask, uint32_t flags, const char *what)
{
	struct ibv_cq_ex *cq = create_ex(d, wc_flags, NULL, NULL, comp_mask, flags);
	int e = errno;

	check(cq == NULL && e == EOPNOTSUPP, "h: ibv_create_cq_ex with %s is EOPNOTSUPP (%s, errno %d)", what,
	      cq ? "created" : "NULL", e);
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
}

/* Posts B's two receives (the second, of 16 bytes, for the immediate) and A's SEND and WRITE_WITH_IMM. */
static int traffic(struct ibv_qp *a, struct ibv_qp *b, unsigned char *src, struct ibv_mr *msrc, unsigned char *rbuf,
		   struct ibv_mr *mrbuf, uint64_t seed)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(src + SEND_LEN), .length = WRITE_LEN, .lkey = msrc->lkey };
	struct ibv_send_wr wr, *bad = NULL;

	fill_pat(src, SEND_LEN + WRITE_LEN, seed);
	memset(rbuf, 0, BUF);
	if (post_recv_one(b, rbuf, SEND_LEN, mrbuf->lkey, 21) || post_recv_one(b, rbuf + 1024, 16, mrbuf->lkey, 22))
		return -1;
	if (post_one(a, IBV_WR_SEND, src, SEND_LEN, msrc->lkey, 0, 0, 11))
		return -1;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 12;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(IMM);
	wr.wr.rdma.remote_addr = (uintptr_t)(rbuf + 2048);
	wr.wr.rdma.rkey = mrbuf->rkey;
	if (ibv_post_send(a, &wr, &bad)) {
		fail("h: post WRITE_WITH_IMM");
		return -1;
	}
	return 0;
}

/* Up to max completions of an extended CQ, in batches, until max or timeout_ms. */
static int ex_collect(struct ibv_cq_ex *cq, struct cqe_fields *out, int max, int timeout_ms)
{
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	double end = now() + timeout_ms / 1000.0;
	int n = 0;

	while (n < max) {
		int rc = ibv_start_poll(cq, &attr);

		if (rc == ENOENT) {
			if (now() > end)
				break;
			sched_yield();
			continue;
		}
		if (rc) {
			fail("h: ibv_start_poll: %d", rc);
			return -1;
		}
		do
			out[n++] = from_ex(cq);
		while (n < max && ibv_next_poll(cq) == 0);
		ibv_end_poll(cq);
	}
	return n;
}

static void part_extended(struct dev *d)
{
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	struct ibv_comp_channel *ch = ibv_create_comp_channel(d->ctx);
	struct ibv_cq_ex *xa = NULL, *xb = NULL, *bare = NULL;
	struct ibv_qp *a = NULL, *b = NULL;
	unsigned char *src = malloc(BUF), *rbuf = malloc(BUF);
	struct ibv_mr *msrc = NULL, *mrbuf = NULL;
	struct cqe_fields ex_a[2], ex_b[2], pl;
	struct ibv_wc wc;
	struct ibv_cq *ev_cq = NULL;
	void *ev_ctx = NULL;
	int tag, rc, n, i;

	if (!check(ch && src && rbuf, "h: extended: setup: channel and buffers"))
		goto out;
	refused(d, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, 0, 0, "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP");
	refused(d, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, 0, 0, "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK");
	refused(d, RXE_WC_FLAGS | IBV_WC_EX_WITH_CVLAN, 0, 0, "rxe's flags and IBV_WC_EX_WITH_CVLAN");
	refused(d, IBV_WC_EX_WITH_FLOW_TAG, 0, 0, "IBV_WC_EX_WITH_FLOW_TAG");
	refused(d, RXE_WC_FLAGS, IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN,
		"IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN");
	refused(d, RXE_WC_FLAGS, 1u << 7, 0, "an unknown comp_mask bit");

	bare = create_ex(d, 0, NULL, NULL, IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	if (check(bare != NULL, "h: ibv_create_cq_ex with no wc_flags, SINGLE_THREADED (errno %d)", errno)) {
		check(bare->start_poll && bare->next_poll && bare->end_poll && bare->read_opcode &&
			      bare->read_vendor_err && bare->read_wc_flags && !bare->read_byte_len &&
			      !bare->read_imm_data && !bare->read_qp_num && !bare->read_completion_ts,
		      "h: it has the polling callbacks and only the read_* callbacks always offered");
		rc = ibv_destroy_cq(ibv_cq_ex_to_cq(bare));
		check(rc == 0, "h: ibv_destroy_cq of it (%d)", rc);
	}

	xa = create_ex(d, RXE_WC_FLAGS, NULL, NULL, 0, 0);
	xb = create_ex(d, RXE_WC_FLAGS, ch, &tag, 0, 0);
	if (!check(xa && xb, "h: ibv_create_cq_ex with rxe's wc_flags, one with a channel (errno %d)", errno))
		goto out;
	check(xb->cqe == 32 && xb->channel == ch && xb->cq_context == &tag && xb->context == d->ctx,
	      "h: its cqe %d, channel, cq_context and context are the ones asked for", xb->cqe);
	a = rc_qp(d, ibv_cq_ex_to_cq(xa));
	b = rc_qp(d, ibv_cq_ex_to_cq(xb));
	if (!check(a && b, "h: RC QPs on ibv_cq_ex_to_cq of the extended CQs (errno %d)", errno) ||
	    connect_qps(d, a, b))
		goto out;
	msrc = ibv_reg_mr(d->pd, src, BUF, IBV_ACCESS_LOCAL_WRITE);
	mrbuf = ibv_reg_mr(d->pd, rbuf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!check(msrc && mrbuf, "h: extended: setup: MRs"))
		goto out;

	/* Empty: ENOENT, and the CQ stays usable without an end_poll. */
	errno = 0;
	rc = ibv_start_poll(xb, &attr);
	check(rc == ENOENT, "h: ibv_start_poll of an empty CQ is ENOENT (%d, errno %d)", rc, errno);
	rc = ibv_start_poll(xb, &attr);
	check(rc == ENOENT, "h: again, with no ibv_end_poll between (%d)", rc);

	/* Round 1: read through the extended API. */
	rc = ibv_req_notify_cq(ibv_cq_ex_to_cq(xb), 0);
	if (!check(rc == 0, "h: ibv_req_notify_cq on ibv_cq_ex_to_cq (%d)", rc) ||
	    traffic(a, b, src, msrc, rbuf, mrbuf, 61))
		goto out;
	rc = ibv_get_cq_event(ch, &ev_cq, &ev_ctx);
	check(rc == 0 && ev_cq == ibv_cq_ex_to_cq(xb) && ev_ctx == &tag,
	      "h: the channel's event names the extended CQ and its cq_context (%d)", rc);
	if (rc == 0)
		ibv_ack_cq_events(ev_cq, 1);
	n = ex_collect(xa, ex_a, 2, 5000);
	if (!check(n == 2, "h: A's two send completions through start_poll/next_poll (%d)", n))
		goto out;
	/* A's completions are in: both of B's are. One batch: start, next, then next is ENOENT. */
	rc = ibv_start_poll(xb, &attr);
	if (!check(rc == 0, "h: ibv_start_poll on B's CQ finds a completion (%d)", rc))
		goto out;
	ex_b[0] = from_ex(xb);
	rc = ibv_next_poll(xb);
	if (check(rc == 0, "h: ibv_next_poll finds the second (%d)", rc))
		ex_b[1] = from_ex(xb);
	errno = 0;
	rc = ibv_next_poll(xb);
	check(rc == ENOENT, "h: a third ibv_next_poll is ENOENT (%d, errno %d)", rc, errno);
	ibv_end_poll(xb);
	rc = ibv_start_poll(xb, &attr);
	check(rc == ENOENT, "h: after ibv_end_poll the CQ is empty: ENOENT (%d)", rc);

	for (i = 0; i < 2; i++) {
		show(i ? "A, WRITE_WITH_IMM (extended)" : "A, SEND (extended)", &ex_a[i]);
		show(i ? "B, WRITE_WITH_IMM (extended)" : "B, RECV (extended)", &ex_b[i]);
	}
	check(ex_a[0].wr_id == 11 && ex_a[0].status == IBV_WC_SUCCESS && ex_a[0].opcode == IBV_WC_SEND &&
		      ex_a[0].qp_num == a->qp_num && ex_a[1].wr_id == 12 && ex_a[1].status == IBV_WC_SUCCESS &&
		      ex_a[1].opcode == IBV_WC_RDMA_WRITE && ex_a[1].qp_num == a->qp_num,
	      "h: A's completions: SEND then RDMA_WRITE, wr_ids 11 and 12, A's QP number");
	check(ex_b[0].wr_id == 21 && ex_b[0].status == IBV_WC_SUCCESS && ex_b[0].opcode == IBV_WC_RECV &&
		      ex_b[0].byte_len == SEND_LEN && ex_b[0].qp_num == b->qp_num && ex_b[0].src_qp == a->qp_num &&
		      !(ex_b[0].wc_flags & IBV_WC_WITH_IMM),
	      "h: B's RECV: wr_id 21, %d bytes, B's QP, A's as source, no immediate", SEND_LEN);
	check(ex_b[1].wr_id == 22 && ex_b[1].status == IBV_WC_SUCCESS && ex_b[1].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
		      ex_b[1].byte_len == WRITE_LEN && ex_b[1].imm == htonl(IMM) && ex_b[1].qp_num == b->qp_num &&
		      ex_b[1].src_qp == a->qp_num && (ex_b[1].wc_flags & IBV_WC_WITH_IMM),
	      "h: B's RECV_RDMA_WITH_IMM: wr_id 22, %d bytes, immediate 0x%08x, IBV_WC_WITH_IMM", WRITE_LEN, IMM);
	check(find_pat_mismatch(rbuf, SEND_LEN, 61) < 0 && memcmp(rbuf + 2048, src + SEND_LEN, WRITE_LEN) == 0,
	      "h: the SEND's and the WRITE's bytes arrived");

	/* Round 2: the same traffic read with ibv_poll_cq on ibv_cq_ex_to_cq gives the same fields. */
	if (traffic(a, b, src, msrc, rbuf, mrbuf, 62))
		goto out;
	for (i = 0; i < 2; i++) {
		rc = poll_wc(ibv_cq_ex_to_cq(xa), &wc, 5000);
		pl = from_wc(&wc);
		if (!check(rc == 1 && same(&pl, &ex_a[i]), "h: ibv_poll_cq of A's completion %d equals the extended read",
			   i + 1))
			show("A (ibv_poll_cq)", &pl);
	}
	for (i = 0; i < 2; i++) {
		rc = poll_wc(ibv_cq_ex_to_cq(xb), &wc, 5000);
		pl = from_wc(&wc);
		if (!check(rc == 1 && same(&pl, &ex_b[i]), "h: ibv_poll_cq of B's completion %d equals the extended read",
			   i + 1))
			show("B (ibv_poll_cq)", &pl);
	}
	rc = ibv_start_poll(xb, &attr);
	check(rc == ENOENT, "h: what ibv_poll_cq took is gone from the extended view too (%d)", rc);

	rc = ibv_resize_cq(ibv_cq_ex_to_cq(xb), 100);
	check(rc == 0 && xb->cqe == 100, "h: ibv_resize_cq of an extended CQ (%d), cqe %d", rc, xb->cqe);
out:
	if (a)
		ibv_destroy_qp(a);
	if (b)
		ibv_destroy_qp(b);
	if (msrc)
		ibv_dereg_mr(msrc);
	if (mrbuf)
		ibv_dereg_mr(mrbuf);
	if (xa)
		check(ibv_destroy_cq(ibv_cq_ex_to_cq(xa)) == 0, "h: ibv_destroy_cq of A's extended CQ");
	if (xb)
		check(ibv_destroy_cq(ibv_cq_ex_to_cq(xb)) == 0, "h: ibv_destroy_cq of B's extended CQ");
	if (ch)
		check(ibv_destroy_comp_channel(ch) == 0, "h: ibv_destroy_comp_channel once its CQ is gone");
	free(src);
	free(rbuf);
}

void part_cq_ex(struct dev *d)
{
	part_resize(d);
	part_extended(d);
}
