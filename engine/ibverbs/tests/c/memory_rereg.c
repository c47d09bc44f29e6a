/*
 * Part i: ibv_rereg_mr, on-demand paging and ibv_advise_mr. A region moved onto a new buffer
 * takes the peer's RDMA WRITE there and not in the old one, under new keys, and its old R_Key is
 * refused; a
 * region whose rights lose REMOTE_WRITE refuses a WRITE (remote access error) and still answers
 * a READ; a region moved to another PD refuses the QPs of the old one and serves those of the new
 * one; libibverbs' input errors and the command's errors come back as documented, leaving the MR
 * working. An IBV_ACCESS_ON_DEMAND region on untouched mmap'ed memory is the target of SEND,
 * WRITE, READ and an atomic; implicit ODP is refused; ibv_query_device_ex reports rxe's ODP caps;
 * ibv_advise_mr validates its advice, flags and SGEs.
 */
#include "abi_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define GUARD 0xa5
#define LEN 4096
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static const struct pair_opts opts = { .sq = 16, .rq = 16, .sge = 1, .min_rnr_timer = 12, .rnr_retry = 7 };

/* The status of one signaled work request posted on A (op into raddr/rkey), or -1. */
static int one_status(struct pair *p, enum ibv_wr_opcode op, void *laddr, uint32_t len, uint32_t lkey,
		      uint64_t raddr, uint32_t rkey)
{
	struct ibv_wc wc;
	int rc = post_one(p->a, op, laddr, len, lkey, raddr, rkey, 42);

	if (rc) {
		fail("i: ibv_post_send(%s): %s", op == IBV_WR_RDMA_READ ? "READ" : "WRITE", strerror(rc));
		return -1;
	}
	if (poll_wc(p->cq_a, &wc, 5000) != 1 || wc.wr_id != 42) {
		fail("i: no completion within 5 s");
		return -1;
	}
	return (int)wc.status;
}

static const char *status_str(int s)
{
	return s < 0 ? "no completion" : ibv_wc_status_str((enum ibv_wc_status)s);
}

/* A fresh connected pair on d (a pair whose QPs an error moved to ERROR is not reused). */
static int fresh(struct dev *d, struct pair *p)
{
	if (p->a)
		pair_destroy(p);
	if (pair_open(d, p, &opts)) {
		fail("i: setup: pair_open");
		return -1;
	}
	return 0;
}

static void *map(size_t len, int prot)
{
	void *m = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return m == MAP_FAILED ? NULL : m;
}

/* A WRITE of src's pattern 7 into rkey/raddr lands there (and only there, GUARD elsewhere). */
static void write_lands(struct pair *p, struct ibv_mr *src, unsigned char *buf, size_t len, uint32_t rkey,
			const char *what)
{
	int s;
	long bad;

	memset(buf, GUARD, len);
	fill_pat(src->addr, 100, 7);
	s = one_status(p, IBV_WR_RDMA_WRITE, src->addr, 100, src->lkey, (uintptr_t)buf + 8, rkey);
	bad = s == IBV_WC_SUCCESS ? find_pat_mismatch(buf + 8, 100, 7) : -1;
	if (bad < 0 && s == IBV_WC_SUCCESS)
		bad = find_byte_mismatch(buf, 8, GUARD) >= 0 ? 0 : find_byte_mismatch(buf + 108, len - 108, GUARD);
	check(s == IBV_WC_SUCCESS && bad < 0, "i: %s: the peer's WRITE lands there (%s%s)", what, status_str(s),
	      bad >= 0 ? ", bytes differ" : "");
}

/* A WRITE through rkey at raddr is refused with a remote access error and changes nothing. */
static void write_refused(struct pair *p, struct ibv_mr *src, unsigned char *buf, size_t len, uint64_t raddr,
			  uint32_t rkey, const char *what)
{
	int s;

	memset(buf, GUARD, len);
	fill_pat(src->addr, 100, 9);
	s = one_status(p, IBV_WR_RDMA_WRITE, src->addr, 100, src->lkey, raddr, rkey);
	check(s == IBV_WC_REM_ACCESS_ERR && find_byte_mismatch(buf, len, GUARD) < 0,
	      "i: %s: the peer's WRITE gets IBV_WC_REM_ACCESS_ERR, memory untouched (%s)", what, status_str(s));
}

static void rereg_translation(struct dev *d, struct pair *p, struct ibv_mr *src, unsigned char *old,
			      unsigned char *new)
{
	struct ibv_mr *mr = ibv_reg_mr(d->pd, old, LEN, ACCESS);
	uint32_t old_rkey;
	int rc;

	if (!mr) {
		fail("i: setup: ibv_reg_mr: %s", strerror(errno));
		return;
	}
	old_rkey = mr->rkey;
	write_lands(p, src, old, LEN, mr->rkey, "before ibv_rereg_mr, the old buffer");
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, new, LEN / 2, 0);
	check(rc == 0 && mr->addr == new && mr->length == LEN / 2 && mr->pd == d->pd && mr->rkey != old_rkey,
	      "i: ibv_rereg_mr(CHANGE_TRANSLATION) returns 0 (%d), mr->addr and length are the new range, new keys",
	      rc);
	memset(old, GUARD, LEN);
	write_lands(p, src, new, LEN / 2, mr->rkey, "after CHANGE_TRANSLATION, the new buffer");
	check(find_byte_mismatch(old, LEN, GUARD) < 0, "i: after CHANGE_TRANSLATION the old buffer is untouched");
	write_refused(p, src, old, LEN, (uintptr_t)old + 8, old_rkey, "the old R_Key at the old address");
	if (fresh(d, p))
		goto out;
	write_refused(p, src, new, LEN / 2, (uintptr_t)new + LEN / 2 - 50, mr->rkey,
		      "the new R_Key past the new, shorter range");
	fresh(d, p);
out:
	ibv_dereg_mr(mr);
}

static void rereg_access(struct dev *d, struct pair *p, struct ibv_mr *src, unsigned char *buf)
{
	struct ibv_mr *mr = ibv_reg_mr(d->pd, buf, LEN, ACCESS);
	uint32_t lkey, rkey;
	int rc, s;

	if (!mr) {
		fail("i: setup: ibv_reg_mr: %s", strerror(errno));
		return;
	}
	lkey = mr->lkey;
	rkey = mr->rkey;
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	check(rc == 0 && mr->addr == buf && mr->length == LEN && mr->rkey == rkey && mr->lkey == lkey,
	      "i: ibv_rereg_mr(CHANGE_ACCESS: no REMOTE_WRITE) returns 0 (%d), the range and keys kept", rc);
	fill_pat(buf, LEN, 11);
	memset(src->addr, 0, 200);
	s = one_status(p, IBV_WR_RDMA_READ, src->addr, 200, src->lkey, (uintptr_t)buf + 16, mr->rkey);
	check(s == IBV_WC_SUCCESS && !memcmp(src->addr, buf + 16, 200),
	      "i: after CHANGE_ACCESS the READ it kept works, data checked (%s)", status_str(s));
	write_refused(p, src, buf, LEN, (uintptr_t)buf + 8, mr->rkey, "after CHANGE_ACCESS without REMOTE_WRITE");
	if (fresh(d, p))
		goto out;
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, ACCESS);
	check(rc == 0, "i: ibv_rereg_mr(CHANGE_ACCESS: REMOTE_WRITE again) returns 0 (%d)", rc);
	write_lands(p, src, buf, LEN, mr->rkey, "after REMOTE_WRITE is given back");
out:
	ibv_dereg_mr(mr);
}

static void rereg_pd(struct dev *d, struct pair *p, struct ibv_mr *src, unsigned char *buf, unsigned char *other)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(d->ctx);
	struct ibv_mr *mr = NULL, *src2 = NULL;
	struct dev d2 = *d;
	struct pair p2;
	uint32_t rkey;
	int rc;

	memset(&p2, 0, sizeof(p2));
	if (!pd2 || !(mr = ibv_reg_mr(d->pd, buf, LEN, ACCESS)) ||
	    !(src2 = ibv_reg_mr(pd2, src->addr, src->length, IBV_ACCESS_LOCAL_WRITE))) {
		fail("i: setup: a second PD and its MRs: %s", strerror(errno));
		goto out;
	}
	d2.pd = pd2;
	if (fresh(&d2, &p2))
		goto out;
	rkey = mr->rkey;
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0);
	check(rc == 0 && mr->pd == pd2 && mr->addr == buf && mr->rkey == rkey,
	      "i: ibv_rereg_mr(CHANGE_PD) returns 0 (%d), mr->pd is the new PD, the keys kept", rc);
	write_lands(&p2, src2, buf, LEN, mr->rkey, "after CHANGE_PD, from a QP of the new PD");
	write_refused(p, src, buf, LEN, (uintptr_t)buf + 8, mr->rkey, "after CHANGE_PD, from a QP of the old PD");
	fresh(d, p);
	rc = ibv_dealloc_pd(pd2);
	check(rc == EBUSY, "i: ibv_dealloc_pd of the PD the MR moved to is EBUSY (%s)", strerror(rc));
	/* All three at once: back to the first PD, onto another buffer, read-only for peers. */
	rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS,
			  d->pd, other, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	check(rc == 0 && mr->pd == d->pd && mr->addr == other,
	      "i: ibv_rereg_mr(CHANGE_PD | CHANGE_TRANSLATION | CHANGE_ACCESS) returns 0 (%d)", rc);
	fill_pat(other, LEN, 13);
	memset(src->addr, 0, 64);
	rc = one_status(p, IBV_WR_RDMA_READ, src->addr, 64, src->lkey, (uintptr_t)other, mr->rkey);
	check(rc == IBV_WC_SUCCESS && find_pat_mismatch(src->addr, 64, 13) < 0,
	      "i: after all three, a READ from a QP of the first PD reads the new buffer (%s)", status_str(rc));
	write_refused(p, src, other, LEN, (uintptr_t)other, mr->rkey, "after all three, without REMOTE_WRITE");
	fresh(d, p);
out:
	if (p2.a)
		pair_destroy(&p2);
	if (mr)
		ibv_dereg_mr(mr);
	if (src2)
		ibv_dereg_mr(src2);
	if (pd2)
		check(ibv_dealloc_pd(pd2) == 0, "i: the second PD is freed once nothing uses it");
}

/* One refused ibv_rereg_mr: its code and errno, and the MR as it was. */
static void refused(struct ibv_mr *mr, const char *what, int flags, struct ibv_pd *pd, void *addr, size_t len,
		    int access, int want_rc, int want_errno)
{
	struct ibv_mr before = *mr;
	int rc;

	errno = 0;
	rc = ibv_rereg_mr(mr, flags, pd, addr, len, access);
	check(rc == want_rc && errno == want_errno && mr->lkey == before.lkey && mr->rkey == before.rkey &&
		      mr->addr == before.addr && mr->length == before.length && mr->pd == before.pd,
	      "i: ibv_rereg_mr(%s) is %s with %s, the MR unchanged (%d, %s)", what,
	      want_rc == IBV_REREG_MR_ERR_INPUT ? "IBV_REREG_MR_ERR_INPUT" : "IBV_REREG_MR_ERR_CMD",
	      strerror(want_errno), rc, strerror(errno));
}

static void rereg_bad_inputs(struct dev *d, struct pair *p, struct ibv_mr *src, unsigned char *buf)
{
	struct ibv_mr *mr = ibv_reg_mr(d->pd, buf, LEN, ACCESS), *ro_mr = NULL;
	void *gone = map(2 * LEN, PROT_READ | PROT_WRITE), *ro = map(LEN, PROT_READ);
	const int in = IBV_REREG_MR_ERR_INPUT, cmd = IBV_REREG_MR_ERR_CMD;

	if (!mr || !gone || !ro || munmap(gone, 2 * LEN)) {
		fail("i: setup: MR and mappings: %s", strerror(errno));
		goto out;
	}
	refused(mr, "an unknown flag", IBV_REREG_MR_CHANGE_ACCESS << 1, NULL, NULL, 0, 0, in, EINVAL);
	refused(mr, "CHANGE_TRANSLATION to NULL", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, LEN, 0, in, EINVAL);
	refused(mr, "CHANGE_TRANSLATION to 0 bytes", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf, 0, 0, in, EINVAL);
	refused(mr, "access without CHANGE_ACCESS", IBV_REREG_MR_CHANGE_PD, d->pd, NULL, 0, ACCESS, in, EINVAL);
	refused(mr, "no flag", 0, NULL, NULL, 0, 0, cmd, EINVAL);
	refused(mr, "CHANGE_PD to NULL", IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0, cmd, EINVAL);
	refused(mr, "CHANGE_ACCESS: REMOTE_WRITE without LOCAL_WRITE", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
		IBV_ACCESS_REMOTE_WRITE, cmd, EINVAL);
	refused(mr, "CHANGE_ACCESS: MW_BIND", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND, cmd, EOPNOTSUPP);
	refused(mr, "CHANGE_TRANSLATION to unmapped memory", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, gone, LEN, 0, cmd,
		EFAULT);
	refused(mr, "CHANGE_TRANSLATION to read-only memory with write rights", IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
		ro, LEN, 0, cmd, EFAULT);
	refused(mr, "CHANGE_TRANSLATION to a range that wraps", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf, SIZE_MAX,
		0, cmd, EINVAL);
	ro_mr = ibv_reg_mr(d->pd, ro, LEN, IBV_ACCESS_REMOTE_READ);
	if (check(ro_mr != NULL, "i: ibv_reg_mr of read-only memory with read rights (%s)",
		  ro_mr ? "registered" : strerror(errno)))
		refused(ro_mr, "CHANGE_ACCESS: LOCAL_WRITE on read-only memory", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
			0, IBV_ACCESS_LOCAL_WRITE, cmd, EFAULT);
	write_lands(p, src, buf, LEN, mr->rkey, "after the refused reregistrations, the MR");
out:
	if (ro_mr)
		ibv_dereg_mr(ro_mr);
	if (ro)
		munmap(ro, LEN);
	if (mr)
		check(ibv_dereg_mr(mr) == 0, "i: ibv_dereg_mr after refused reregistrations returns 0");
}

static void odp(struct dev *d, struct pair *p, struct ibv_mr *src)
{
	struct ibv_device_attr_ex ax;
	uint32_t want = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
			IBV_ODP_SUPPORT_ATOMIC;
	unsigned char *buf = map(2 * LEN, PROT_READ | PROT_WRITE);
	struct ibv_mr *mr = NULL, *imr;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	uint64_t *word;
	int rc, s;

	memset(&ax, 0, sizeof(ax));
	rc = ibv_query_device_ex(d->ctx, NULL, &ax);
	check(rc == 0 && (ax.odp_caps.general_caps & IBV_ODP_SUPPORT) &&
		      !(ax.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT) &&
		      (ax.odp_caps.per_transport_caps.rc_odp_caps & want) == want &&
		      (ax.odp_caps.per_transport_caps.ud_odp_caps & (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV)),
	      "i: ibv_query_device_ex: IBV_ODP_SUPPORT, not IMPLICIT, RC SEND/RECV/WRITE/READ/ATOMIC, UD SEND/RECV "
	      "(%d, general 0x%llx, rc 0x%x, ud 0x%x)",
	      rc, (unsigned long long)ax.odp_caps.general_caps, ax.odp_caps.per_transport_caps.rc_odp_caps,
	      ax.odp_caps.per_transport_caps.ud_odp_caps);
	errno = 0;
	imr = ibv_reg_mr(d->pd, NULL, SIZE_MAX, ACCESS | IBV_ACCESS_ON_DEMAND);
	check(!imr && errno == EOPNOTSUPP, "i: implicit ODP (NULL, SIZE_MAX) returns NULL with EOPNOTSUPP (%s)",
	      strerror(errno));
	if (imr)
		ibv_dereg_mr(imr);
	/* Untouched pages: nothing faulted in before the engine reaches them. */
	if (buf)
		mr = ibv_reg_mr(d->pd, buf + 100, LEN, ACCESS | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ON_DEMAND);
	if (!check(mr != NULL, "i: ibv_reg_mr(IBV_ACCESS_ON_DEMAND) of untouched mmap'ed memory (%s)",
		   mr ? "registered" : strerror(errno)))
		goto out;

	/* SEND into an ODP receive buffer. */
	fill_pat(src->addr, 300, 21);
	rc = post_recv_one(p->b, buf + 100, 300, mr->lkey, 5);
	s = rc ? -1 : one_status(p, IBV_WR_SEND, src->addr, 300, src->lkey, 0, 0);
	rc = rc ? -1 : poll_wc(p->cq_b, &wc, 5000);
	check(s == IBV_WC_SUCCESS && rc == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 300 &&
		      find_pat_mismatch(buf + 100, 300, 21) < 0,
	      "i: ODP: a SEND into a receive buffer of the region, data checked (%s)", status_str(s));
	/* WRITE into it, READ from it. */
	write_lands(p, src, buf + 100, LEN, mr->rkey, "ODP: the region");
	fill_pat(buf + 100, LEN, 23);
	memset(src->addr, 0, 500);
	s = one_status(p, IBV_WR_RDMA_READ, src->addr, 500, src->lkey, (uintptr_t)buf + 100 + 1000, mr->rkey);
	check(s == IBV_WC_SUCCESS && !memcmp(src->addr, buf + 1100, 500),
	      "i: ODP: a READ from the region, data checked (%s)", status_str(s));
	/* SEND from it. */
	rc = post_recv_one(p->b, src->addr, 200, src->lkey, 6);
	memset(src->addr, 0, 200);
	s = rc ? -1 : one_status(p, IBV_WR_SEND, buf + 100, 200, mr->lkey, 0, 0);
	rc = rc ? -1 : poll_wc(p->cq_b, &wc, 5000);
	check(s == IBV_WC_SUCCESS && rc == 1 && wc.status == IBV_WC_SUCCESS && !memcmp(src->addr, buf + 100, 200),
	      "i: ODP: a SEND from the region, data checked (%s)", status_str(s));
	/* A fetch-and-add on it. */
	word = (uint64_t *)(buf + 104 + 8);
	*word = 1000;
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)src->addr;
	sge.length = 8;
	sge.lkey = src->lkey;
	wr.wr_id = 43;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = (uintptr_t)word;
	wr.wr.atomic.rkey = mr->rkey;
	wr.wr.atomic.compare_add = 5;
	rc = ibv_post_send(p->a, &wr, &bad);
	s = rc ? -1 : poll_wc(p->cq_a, &wc, 5000) == 1 ? (int)wc.status : -1;
	check(s == IBV_WC_SUCCESS && *(uint64_t *)src->addr == 1000 && *word == 1005,
	      "i: ODP: a fetch-and-add on the region (%s, fetched %llu, now %llu)", status_str(s),
	      (unsigned long long)*(uint64_t *)src->addr, (unsigned long long)*word);
out:
	if (mr)
		ibv_dereg_mr(mr);
	if (buf)
		munmap(buf, 2 * LEN);
}

static void advise(struct dev *d, struct ibv_mr *src, unsigned char *buf)
{
	struct ibv_mr *mr = ibv_reg_mr(d->pd, buf, LEN, ACCESS | IBV_ACCESS_ON_DEMAND);
	struct ibv_mr *ro = ibv_reg_mr(d->pd, buf, LEN, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND);
	struct ibv_sge sge[2];
	int rc;

	if (!mr || !ro) {
		fail("i: setup: ODP MRs for ibv_advise_mr: %s", strerror(errno));
		goto out;
	}
	sge[0] = (struct ibv_sge){ .addr = (uintptr_t)buf + 10, .length = 1000, .lkey = mr->lkey };
	sge[1] = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = LEN, .lkey = mr->lkey };
	rc = ibv_advise_mr(d->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sge, 2);
	check(rc == 0, "i: ibv_advise_mr(PREFETCH, two SGEs) returns 0 (%s)", strerror(rc));
	rc = ibv_advise_mr(d->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, sge, 1);
	check(rc == 0, "i: ibv_advise_mr(PREFETCH_WRITE, FLUSH) returns 0 (%s)", strerror(rc));
	rc = ibv_advise_mr(d->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, sge, 1);
	check(rc == 0, "i: ibv_advise_mr(PREFETCH_NO_FAULT) returns 0 (%s)", strerror(rc));
	rc = ibv_advise_mr(d->pd, (enum ibv_advise_mr_advice)7, 0, sge, 1);
	check(rc == EOPNOTSUPP, "i: ibv_advise_mr(an unknown advice) is EOPNOTSUPP (%s)", strerror(rc));
	rc = ibv_advise_mr(d->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH << 1, sge, 1);
	check(rc == EINVAL, "i: ibv_advise_mr(an unknown flag) is EINVAL (%s)", strerror(rc));
	rc = ibv_advise_mr(d->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sge, 0);
	check(rc == EINVAL, "i: ibv_advise_mr(no SGE) is EINVAL (%s)", strerror(rc));
	sge[1].lkey = mr->lkey ^ 0x100;
	rc = ibv_advise_mr(d->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sge, 2);
	check(rc == EINVAL, "i: ibv_advise_mr(a wrong lkey in the second SGE) is EINVAL (%s)", strerror(rc));
	sge[1] = (struct ibv_sge){ .addr = (uintptr_t)buf + LEN - 10, .length = 11, .lkey = mr->lkey };
	rc = ibv_advise_mr(d->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sge, 2);
	check(rc == EFAULT, "i: ibv_advise_mr(a range past the region's end) is EFAULT (%s)", strerror(rc));
	sge[0].lkey = ro->lkey;
	rc = ibv_advise_mr(d->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sge, 1);
	check(rc == EINVAL, "i: ibv_advise_mr(an MR without LOCAL_WRITE) is EINVAL, as rxe (%s)", strerror(rc));
	sge[0].lkey = src->lkey;
	sge[0].addr = (uintptr_t)src->addr;
	rc = ibv_advise_mr(d->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sge, 1);
	check(rc == 0, "i: ibv_advise_mr on a region registered without ON_DEMAND returns 0 (%s)", strerror(rc));
out:
	if (mr)
		ibv_dereg_mr(mr);
	if (ro)
		ibv_dereg_mr(ro);
}

void part_rereg(struct dev *d)
{
	unsigned char *a = malloc(LEN), *b = malloc(LEN), *c = malloc(LEN), *s = malloc(LEN);
	struct ibv_mr *src = NULL;
	struct pair p;

	memset(&p, 0, sizeof(p));
	if (!a || !b || !c || !s || !(src = ibv_reg_mr(d->pd, s, LEN, IBV_ACCESS_LOCAL_WRITE))) {
		fail("i: setup: buffers and source MR");
		goto out;
	}
	if (fresh(d, &p))
		goto out;
	rereg_translation(d, &p, src, a, b);
	rereg_access(d, &p, src, a);
	rereg_pd(d, &p, src, a, c);
	rereg_bad_inputs(d, &p, src, b);
	odp(d, &p, src);
	advise(d, src, c);
out:
	if (p.a)
		pair_destroy(&p);
	if (src)
		ibv_dereg_mr(src);
	free(a);
	free(b);
	free(c);
	free(s);
}
