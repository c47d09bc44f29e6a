/*
 * Part d: misuse must be answered with libibverbs' conventions (a returned errno and bad_wr, NULL
 * and errno, or an error completion), never a crash and never a silent success. Each misuse that
 * breaks a QP gets a fresh pair. The checks that would leave dangling objects if the library
 * wrongly accepted them (destroying a CQ or a PD still in use) come last.
 */
#include "abi_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define WATCH 8192 /* bytes watched around a target (its MR covers the first 4096) */

struct env {
	struct dev *d;
	unsigned char *good, *unreg, *target, *ro, *local, *iobuf;
	struct ibv_mr *good_mr, *target_mr, *ro_mr, *local_mr, *io_mr;
	uint32_t bad_key; /* neither an lkey nor an rkey of any MR here */
};

static const struct pair_opts fresh_opts = { .sq = 16, .rq = 16, .sge = 1, .min_rnr_timer = 12, .rnr_retry = 7 };

static const char *res(int r, const struct ibv_wc *wc)
{
	return r == 1 ? ibv_wc_status_str(wc->status) : r == 0 ? "no completion within 10 s" : "ibv_poll_cq failed";
}

static int is_key_used(const struct env *e, uint32_t k)
{
	struct ibv_mr *mrs[] = { e->good_mr, e->target_mr, e->ro_mr, e->local_mr, e->io_mr };

	for (size_t i = 0; i < sizeof(mrs) / sizeof(mrs[0]); i++)
		if (mrs[i] && (mrs[i]->lkey == k || mrs[i]->rkey == k))
			return 1;
	return 0;
}

/* Whether no successful completion shows up on cq within ms (error completions are drained). */
static int no_success_on(struct ibv_cq *cq, int ms, int *errors)
{
	struct ibv_wc wc;
	double end = now() + ms / 1000.0;

	while (now() < end) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			return 0;
		if (n == 1) {
			if (wc.status == IBV_WC_SUCCESS)
				return 0;
			(*errors)++;
		}
	}
	return 1;
}

/*
 * A SEND from A whose local SGE is (addr, lkey): either refused at post time or completed with an
 * error; the receive posted on B must not complete successfully and its buffer must stay untouched.
 */
static void bad_local_send(struct env *e, const char *label, void *addr, uint32_t lkey)
{
	struct pair p;
	struct ibv_sge sge = { (uintptr_t)addr, 1000, lkey };
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;
	int rc, r, b_errors = 0, st;

	if (pair_open(e->d, &p, &fresh_opts))
		return;
	memset(e->target, 0, WATCH);
	if ((rc = post_recv_one(p.b, e->target, 4096, e->target_mr->lkey, 1))) {
		fail("d: %s: ibv_post_recv: %s", label, strerror(rc));
		goto out;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	rc = ibv_post_send(p.a, &wr, &bad);
	if (rc) {
		check(rc > 0 && bad == &wr, "d: %s: ibv_post_send refused it: %s, bad_wr %s", label, strerror(rc > 0 ? rc : -rc),
		      bad == &wr ? "= the WR" : "WRONG");
	} else {
		r = poll_wc(p.cq_a, &wc, 10000);
		check(r == 1 && wc.status != IBV_WC_SUCCESS && wc.wr_id == 2,
		      "d: %s: posted, then completed with an error status: %s", label, res(r, &wc));
		if (r == 1 && wc.status != IBV_WC_SUCCESS) {
			st = qp_state(p.a);
			check(st == IBV_QPS_ERR, "d: %s: QP A is in the error state after its error completion (state %d)",
			      label, st);
		}
	}
	check(no_success_on(p.cq_b, 200, &b_errors) && find_byte_mismatch(e->target, WATCH, 0) < 0,
	      "d: %s: no data delivered (no successful receive, target buffer untouched)", label);
out:
	pair_destroy(&p);
}

/* A receive on B whose SGE is outside every MR; A's SEND must fail, B must not deliver into it. */
static void bad_local_recv(struct env *e)
{
	const char *label = "RECV SGE outside every MR";
	struct pair p;
	struct ibv_wc wc;
	int rc, r, rb;

	if (pair_open(e->d, &p, &fresh_opts))
		return;
	memset(e->unreg, 0, 4096);
	rc = post_recv_one(p.b, e->unreg, 4096, e->target_mr->lkey, 1);
	if (rc) {
		check(rc > 0, "d: %s: ibv_post_recv refused it: %s (bad_wr checked by the helper)", label,
		      strerror(rc > 0 ? rc : -rc));
		goto out;
	}
	fill_pat(e->good, 1000, 5);
	if ((rc = post_one(p.a, IBV_WR_SEND, e->good, 1000, e->good_mr->lkey, 0, 0, 2))) {
		fail("d: %s: ibv_post_send: %s", label, strerror(rc));
		goto out;
	}
	rb = poll_wc(p.cq_b, &wc, 10000);
	check(rb == 1 && wc.status != IBV_WC_SUCCESS && wc.wr_id == 1,
	      "d: %s: the receive completed with an error status: %s", label, res(rb, &wc));
	r = poll_wc(p.cq_a, &wc, 10000);
	check(r == 1 && wc.status != IBV_WC_SUCCESS && wc.wr_id == 2,
	      "d: %s: the SEND completed with an error status: %s", label, res(r, &wc));
	check(find_byte_mismatch(e->unreg, 4096, 0) < 0, "d: %s: the unregistered buffer is untouched", label);
out:
	pair_destroy(&p);
}

/*
 * An RDMA op from A the responder must refuse: either refused at post time or completed with
 * IBV_WC_REM_ACCESS_ERR; `watch` (WATCH bytes, zeroed first) must stay untouched.
 */
static void bad_remote(struct env *e, const char *label, enum ibv_wr_opcode op, void *laddr, uint32_t len,
		       uint32_t lkey, uint64_t raddr, uint32_t rkey, unsigned char *watch)
{
	struct pair p;
	struct ibv_wc wc;
	int rc, r;

	if (pair_open(e->d, &p, &fresh_opts))
		return;
	memset(watch, 0, WATCH);
	rc = post_one(p.a, op, laddr, len, lkey, raddr, rkey, 3);
	if (rc) {
		check(rc > 0, "d: %s: ibv_post_send refused it: %s", label, strerror(rc > 0 ? rc : -rc));
	} else {
		r = poll_wc(p.cq_a, &wc, 10000);
		check(r == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 3,
		      "d: %s: completed with IBV_WC_REM_ACCESS_ERR (got: %s)", label, res(r, &wc));
	}
	sleep_ms(100);
	check(find_byte_mismatch(watch, WATCH, 0) < 0, "d: %s: no byte of the %s buffer changed", label,
	      op == IBV_WR_RDMA_READ ? "local" : "target");
	pair_destroy(&p);
}

static void fill_send_wrs(struct env *e, struct ibv_send_wr *wr, struct ibv_sge *sge, int n)
{
	memset(wr, 0, sizeof(*wr) * (size_t)n);
	for (int i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)e->good;
		sge[i].length = 8;
		sge[i].lkey = e->good_mr->lkey;
		wr[i].wr_id = 100u + (uint64_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
}

/* post_send / post_recv on QPs in RESET and INIT. */
static void wrong_state_posts(struct env *e)
{
	struct pair p;
	struct ibv_send_wr wr[2], *bad;
	struct ibv_recv_wr rwr[2], *rbad;
	struct ibv_sge sge[2];
	int rc;

	if (pair_create(e->d, &p, &fresh_opts))
		return;
	fill_send_wrs(e, wr, sge, 2);
	bad = NULL;
	rc = ibv_post_send(p.a, wr, &bad);
	check(rc > 0 && bad == &wr[0], "d: ibv_post_send (2 WRs) on a QP in RESET: %s, bad_wr %s", strerror(rc),
	      bad == &wr[0] ? "= the first WR" : "WRONG");
	memset(rwr, 0, sizeof(rwr));
	for (int i = 0; i < 2; i++) {
		rwr[i].wr_id = (uint64_t)i;
		rwr[i].sg_list = &sge[i];
		rwr[i].num_sge = 1;
	}
	rwr[0].next = &rwr[1];
	rbad = NULL;
	rc = ibv_post_recv(p.b, rwr, &rbad);
	check(rc > 0 && rbad == &rwr[0], "d: ibv_post_recv (2 WRs) on a QP in RESET: %s, bad_wr %s", strerror(rc),
	      rbad == &rwr[0] ? "= the first WR" : "WRONG");
	if (qp_to_init(p.a) == 0) {
		bad = NULL;
		rc = ibv_post_send(p.a, wr, &bad);
		check(rc > 0 && bad == &wr[0], "d: ibv_post_send (2 WRs) on a QP in INIT: %s, bad_wr %s", strerror(rc),
		      bad == &wr[0] ? "= the first WR" : "WRONG");
	}
	pair_destroy(&p);
}

/*
 * A send queue that cannot drain (B has no receive, its RNR timer is long, A retries RNR forever)
 * takes exactly max_send_wr WRs; the next post returns ENOMEM with bad_wr at the first WR not queued.
 */
static void full_send_queue(struct env *e)
{
	struct pair_opts o = fresh_opts;
	struct pair p;
	struct ibv_send_wr wr[3], *bad;
	struct ibv_sge sge[3];
	uint32_t cap, posted = 0;
	int rc = 0;

	o.min_rnr_timer = 31;
	if (pair_open(e->d, &p, &o))
		return;
	cap = p.cap_a.max_send_wr;
	while (posted + 1 < cap) {
		fill_send_wrs(e, wr, sge, 1);
		bad = NULL;
		rc = ibv_post_send(p.a, wr, &bad);
		if (rc)
			break;
		posted++;
	}
	if (!check(rc == 0, "d: full send queue: the first %u of max_send_wr %u posts are accepted (post %u: %s)", cap - 1,
		   cap, posted, strerror(rc)))
		goto out;
	fill_send_wrs(e, wr, sge, 3);
	bad = NULL;
	rc = ibv_post_send(p.a, wr, &bad);
	check(rc == ENOMEM && bad == &wr[1],
	      "d: full send queue: a list of 3 WRs with 1 free slot: %s (expected ENOMEM), bad_wr %s", strerror(rc),
	      bad == &wr[1] ? "= the second WR" : bad == &wr[0] ? "= the first WR (WRONG)" : "WRONG");
	if (rc == 0) {
		/* Find out how far beyond max_send_wr it goes. */
		uint32_t extra = 3;

		for (; extra < 64; extra++) {
			fill_send_wrs(e, wr, sge, 1);
			if (ibv_post_send(p.a, wr, &bad))
				break;
		}
		fail("d: full send queue: %u WRs accepted beyond max_send_wr %u", extra - 1, cap);
		goto out;
	}
	fill_send_wrs(e, wr, sge, 1);
	bad = NULL;
	rc = ibv_post_send(p.a, wr, &bad);
	check(rc == ENOMEM && bad == &wr[0], "d: full send queue: one more WR: %s (expected ENOMEM), bad_wr %s",
	      strerror(rc), bad == &wr[0] ? "= the WR" : "WRONG");
out:
	pair_destroy(&p);
}

/* More SGEs than the QP was created with. */
static void too_many_sges(struct env *e)
{
	struct pair p;
	struct ibv_sge sge[256];
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_recv_wr rwr, *rbad = NULL;
	int n, rc;

	if (pair_open(e->d, &p, &fresh_opts))
		return;
	for (int i = 0; i < 256; i++) {
		sge[i].addr = (uintptr_t)(e->good + i);
		sge[i].length = 1;
		sge[i].lkey = e->good_mr->lkey;
	}
	n = (int)p.cap_a.max_send_sge + 1;
	if (n > 256)
		fail("d: too many SGEs: ibv_create_qp reported max_send_sge %d (asked for 1)", n - 1);
	else {
		memset(&wr, 0, sizeof(wr));
		wr.sg_list = sge;
		wr.num_sge = n;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		rc = ibv_post_send(p.a, &wr, &bad);
		check(rc > 0 && bad == &wr, "d: ibv_post_send with %d SGEs on a QP of max_send_sge %d: %s, bad_wr %s", n,
		      n - 1, strerror(rc), bad == &wr ? "= the WR" : "WRONG");
	}
	n = (int)p.cap_b.max_recv_sge + 1;
	if (n > 256)
		fail("d: too many SGEs: ibv_create_qp reported max_recv_sge %d (asked for 1)", n - 1);
	else {
		memset(&rwr, 0, sizeof(rwr));
		rwr.sg_list = sge;
		rwr.num_sge = n;
		rc = ibv_post_recv(p.b, &rwr, &rbad);
		check(rc > 0 && rbad == &rwr, "d: ibv_post_recv with %d SGEs on a QP of max_recv_sge %d: %s, bad_wr %s",
		      n, n - 1, strerror(rc), rbad == &rwr ? "= the WR" : "WRONG");
	}
	pair_destroy(&p);
}

/*
 * Not misuse, but the edge beside it: an inline SEND whose one SGE is empty at address 0 sends an
 * empty message (the library once made a slice from the null address, which Rust's debug checks
 * abort on).
 */
static void null_inline(struct env *e)
{
	struct pair p;
	struct ibv_sge sge = { .addr = 0, .length = 0, .lkey = 0 };
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;
	int rc, r;

	if (pair_open(e->d, &p, &fresh_opts))
		return;
	if (post_recv_one(p.b, e->local, 64, e->local_mr->lkey, 6)) {
		fail("d: null inline: setup: ibv_post_recv");
		pair_destroy(&p);
		return;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 5;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	rc = ibv_post_send(p.a, &wr, &bad);
	if (check(rc == 0, "d: an inline SEND of one empty SGE at address 0 is accepted (%s)", strerror(rc))) {
		r = poll_wc(p.cq_a, &wc, 10000);
		check(r == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 5,
		      "d: the empty inline SEND completes successfully (%s)", res(r, &wc));
		r = poll_wc(p.cq_b, &wc, 10000);
		check(r == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 6 && wc.byte_len == 0,
		      "d: its receive completes with 0 bytes (%s, byte_len %u)", res(r, &wc), r == 1 ? wc.byte_len : 0);
	}
	pair_destroy(&p);
}

static void bad_transitions(struct env *e)
{
	struct pair p;
	struct ibv_qp_attr attr;
	int rc, st;

	if (pair_create(e->d, &p, &fresh_opts))
		return;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 1;
	rc = ibv_modify_qp(p.a, &attr,
			   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				   IBV_QP_MAX_QP_RD_ATOMIC);
	st = qp_state(p.a);
	check(rc != 0 && st == IBV_QPS_RESET, "d: ibv_modify_qp RESET->RTS: %s, state after: %d (RESET is %d)",
	      rc ? strerror(rc) : "accepted (WRONG)", st, IBV_QPS_RESET);
	if (qp_to_init(p.a) == 0) {
		memset(&attr, 0, sizeof(attr));
		attr.qp_state = IBV_QPS_RTR;
		rc = ibv_modify_qp(p.a, &attr, IBV_QP_STATE);
		st = qp_state(p.a);
		check(rc != 0 && st == IBV_QPS_INIT,
		      "d: ibv_modify_qp INIT->RTR without the required attributes (AV, path MTU, dest QPN, RQ PSN, ...): "
		      "%s, state after: %d (INIT is %d)",
		      rc ? strerror(rc) : "accepted (WRONG)", st, IBV_QPS_INIT);
		memset(&attr, 0, sizeof(attr));
		attr.qp_state = IBV_QPS_RTS;
		attr.timeout = 14;
		attr.retry_cnt = 7;
		attr.rnr_retry = 7;
		attr.max_rd_atomic = 1;
		rc = ibv_modify_qp(p.a, &attr,
				   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC);
		st = qp_state(p.a);
		check(rc != 0 && st == IBV_QPS_INIT, "d: ibv_modify_qp INIT->RTS: %s, state after: %d (INIT is %d)",
		      rc ? strerror(rc) : "accepted (WRONG)", st, IBV_QPS_INIT);
	}
	pair_destroy(&p);
}

static void bad_registrations(struct env *e)
{
	struct ibv_mr *mr;
	void *gone, *ro;

	errno = 0;
	mr = ibv_reg_mr(e->d->pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE);
	check(!mr && errno != 0, "d: ibv_reg_mr(NULL, 4096) returns NULL with errno set (%s)",
	      mr ? "returned an MR (WRONG)" : strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr(e->d->pd, e->good, (size_t)1 << 62, IBV_ACCESS_LOCAL_WRITE);
	check(!mr && errno != 0, "d: ibv_reg_mr(heap buffer, 2^62 bytes) returns NULL with errno set (%s)",
	      mr ? "returned an MR (WRONG)" : strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr(e->d->pd, e->good, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE);
	check(!mr && errno != 0, "d: ibv_reg_mr(heap buffer, SIZE_MAX: the range wraps) returns NULL with errno set (%s)",
	      mr ? "returned an MR (WRONG)" : strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr(e->d->pd, e->good, 4096, IBV_ACCESS_REMOTE_WRITE);
	check(!mr && errno == EINVAL, "d: ibv_reg_mr with REMOTE_WRITE but not LOCAL_WRITE returns NULL with EINVAL (%s)",
	      mr ? "returned an MR (WRONG)" : strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);

	gone = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (gone != MAP_FAILED && munmap(gone, 8192) == 0) {
		errno = 0;
		mr = ibv_reg_mr(e->d->pd, gone, 8192, IBV_ACCESS_LOCAL_WRITE);
		check(!mr && errno != 0, "d: ibv_reg_mr of unmapped memory returns NULL with errno set (%s)",
		      mr ? "returned an MR (WRONG)" : strerror(errno));
		if (mr)
			ibv_dereg_mr(mr);
	}
	ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ro != MAP_FAILED) {
		errno = 0;
		mr = ibv_reg_mr(e->d->pd, ro, 4096, IBV_ACCESS_LOCAL_WRITE);
		check(!mr && errno != 0,
		      "d: ibv_reg_mr(LOCAL_WRITE) of read-only memory returns NULL with errno set (%s)",
		      mr ? "returned an MR (WRONG)" : strerror(errno));
		if (mr)
			ibv_dereg_mr(mr);
		munmap(ro, 4096);
	}
}

/* ibv_destroy_cq on a CQ a QP uses, ibv_destroy_comp_channel with a CQ on it. */
static void busy_cq(struct env *e)
{
	struct ibv_comp_channel *ch;
	struct pair_opts o = fresh_opts;
	struct pair p;
	struct ibv_wc wc;
	int rc, r;

	errno = 0;
	ch = ibv_create_comp_channel(e->d->ctx);
	if (!ch) {
		fail("d: ibv_create_comp_channel: %s", strerror(errno));
		return;
	}
	o.ch_b = ch;
	if (pair_open(e->d, &p, &o)) {
		ibv_destroy_comp_channel(ch);
		return;
	}
	rc = ibv_destroy_cq(p.cq_a);
	if (!check(rc == EBUSY, "d: ibv_destroy_cq on a CQ a QP still uses: %s (expected EBUSY)",
		   rc ? strerror(rc) : "destroyed it (WRONG)")) {
		if (rc == 0) {
			/* The CQ is gone: A cannot be destroyed safely any more; leak it. */
			p.cq_a = NULL;
			p.a = NULL;
		}
	} else {
		fill_pat(e->good, 500, 9);
		memset(e->target, 0, 4096);
		rc = post_recv_one(p.b, e->target, 4096, e->target_mr->lkey, 1);
		if (!rc)
			rc = post_one(p.a, IBV_WR_SEND, e->good, 500, e->good_mr->lkey, 0, 0, 4);
		r = rc ? -2 : poll_wc(p.cq_a, &wc, 5000);
		check(r == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 4,
		      "d: the CQ still works after the refused destroy: SEND completion %s",
		      r == -2 ? strerror(rc) : res(r, &wc));
		r = poll_wc(p.cq_b, &wc, 5000);
		check(r == 1 && wc.status == IBV_WC_SUCCESS && find_pat_mismatch(e->target, 500, 9) < 0,
		      "d: ... and the data arrived: receive %s", res(r, &wc));
	}
	rc = ibv_destroy_comp_channel(ch);
	check(rc == EBUSY, "d: ibv_destroy_comp_channel with a CQ still on it: %s (expected EBUSY)",
	      rc ? strerror(rc) : "destroyed it (WRONG)");
	pair_destroy(&p);
	if (rc == EBUSY) {
		rc = ibv_destroy_comp_channel(ch);
		check(rc == 0, "d: ibv_destroy_comp_channel once its CQ is gone (%s)", strerror(rc));
	}
}

/* ibv_dealloc_pd with MRs on it; returns whether the PD is still there. */
static int busy_pd(struct env *e)
{
	struct ibv_mr *mr;
	int rc = ibv_dealloc_pd(e->d->pd);

	if (!check(rc == EBUSY, "d: ibv_dealloc_pd with MRs still on it: %s (expected EBUSY)",
		   rc ? strerror(rc) : "deallocated it (WRONG)"))
		return rc != 0;
	errno = 0;
	mr = ibv_reg_mr(e->d->pd, e->good, 4096, IBV_ACCESS_LOCAL_WRITE);
	check(mr != NULL, "d: the PD still works after the refused dealloc: ibv_reg_mr %s",
	      mr ? "succeeds" : strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);
	return 1;
}

static struct ibv_mr *reg(struct env *e, void *p, size_t len, int access)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(e->d->pd, p, len, access);
	if (!mr)
		fail("d: setup: ibv_reg_mr(%zu bytes): %s", len, strerror(errno));
	return mr;
}

void part_misuse(struct dev *d)
{
	struct env e = { .d = d };
	uint64_t iova;
	int pd_alive = 1;

	e.good = malloc(8192);
	e.unreg = malloc(4096);
	e.target = malloc(WATCH);
	e.ro = malloc(WATCH);
	e.local = malloc(WATCH);
	e.iobuf = malloc(WATCH);
	if (!e.good || !e.unreg || !e.target || !e.ro || !e.local || !e.iobuf) {
		fail("d: malloc");
		goto out;
	}
	fill_pat(e.good, 8192, 1);
	fill_pat(e.unreg, 4096, 2);
	iova = 0x400000000000ull + ((uintptr_t)e.iobuf & 4095);
	if (!(e.good_mr = reg(&e, e.good, 8192, ACCESS)) || !(e.target_mr = reg(&e, e.target, 4096, ACCESS)) ||
	    !(e.ro_mr = reg(&e, e.ro, 4096, IBV_ACCESS_LOCAL_WRITE)) || !(e.local_mr = reg(&e, e.local, 4096, ACCESS)))
		goto out;
	errno = 0;
	e.io_mr = ibv_reg_mr_iova2(d->pd, e.iobuf, 4096, iova, ACCESS);
	if (!e.io_mr) {
		fail("d: setup: ibv_reg_mr_iova2: %s", strerror(errno));
		goto out;
	}
	e.bad_key = e.good_mr->lkey + 0x1357u;
	while (is_key_used(&e, e.bad_key))
		e.bad_key += 0x1357u;

	bad_local_send(&e, "SEND SGE outside every MR", e.unreg, e.good_mr->lkey);
	bad_local_send(&e, "SEND with a wrong lkey", e.good, e.bad_key);
	bad_local_recv(&e);
	bad_remote(&e, "WRITE with a wrong rkey", IBV_WR_RDMA_WRITE, e.good, 64, e.good_mr->lkey, (uintptr_t)e.target,
		   e.bad_key, e.target);
	bad_remote(&e, "WRITE across the end of the remote MR", IBV_WR_RDMA_WRITE, e.good, 64, e.good_mr->lkey,
		   (uintptr_t)e.target + 4096 - 32, e.target_mr->rkey, e.target);
	bad_remote(&e, "WRITE into an MR without REMOTE_WRITE", IBV_WR_RDMA_WRITE, e.good, 64, e.good_mr->lkey,
		   (uintptr_t)e.ro, e.ro_mr->rkey, e.ro);
	bad_remote(&e, "WRITE to an ibv_reg_mr_iova2 MR at its address instead of its iova", IBV_WR_RDMA_WRITE, e.good,
		   64, e.good_mr->lkey, (uintptr_t)e.iobuf, e.io_mr->rkey, e.iobuf);
	bad_remote(&e, "READ with a wrong rkey", IBV_WR_RDMA_READ, e.local, 64, e.local_mr->lkey, (uintptr_t)e.target,
		   e.bad_key, e.local);
	bad_remote(&e, "READ from an MR without REMOTE_READ", IBV_WR_RDMA_READ, e.local, 64, e.local_mr->lkey,
		   (uintptr_t)e.ro, e.ro_mr->rkey, e.local);
	wrong_state_posts(&e);
	full_send_queue(&e);
	too_many_sges(&e);
	null_inline(&e);
	bad_transitions(&e);
	bad_registrations(&e);
	busy_cq(&e);
	pd_alive = busy_pd(&e);
out:
	if (pd_alive) {
		struct ibv_mr *mrs[] = { e.good_mr, e.target_mr, e.ro_mr, e.local_mr, e.io_mr };

		for (size_t i = 0; i < sizeof(mrs) / sizeof(mrs[0]); i++)
			if (mrs[i])
				ibv_dereg_mr(mrs[i]);
	} else {
		d->pd = NULL; /* deallocated by the misuse check */
	}
	free(e.good);
	free(e.unreg);
	free(e.target);
	free(e.ro);
	free(e.local);
	free(e.iobuf);
}
