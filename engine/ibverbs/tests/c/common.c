/*
 * What every part of abi_check uses: reporting, patterns, opening the device and creating,
 * connecting and destroying a pair of RC QPs that talk to each other through GID index 1.
 */
#include "abi_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_int n_failures;

static void report(const char *tag, const char *fmt, va_list ap)
{
	char line[1024];

	vsnprintf(line, sizeof(line), fmt, ap);
	/* One write per line so lines of two threads never interleave. */
	fprintf(stdout, "%s: %s\n", tag, line);
	fflush(stdout);
}

void ok(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report("ok", fmt, ap);
	va_end(ap);
}

void fail(const char *fmt, ...)
{
	va_list ap;

	atomic_fetch_add(&n_failures, 1);
	va_start(ap, fmt);
	report("FAIL", fmt, ap);
	va_end(ap);
}

int check(int cond, const char *fmt, ...)
{
	va_list ap;

	if (!cond)
		atomic_fetch_add(&n_failures, 1);
	va_start(ap, fmt);
	report(cond ? "ok" : "FAIL", fmt, ap);
	va_end(ap);
	return cond;
}

int failures(void)
{
	return atomic_load(&n_failures);
}

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void fill_pat(unsigned char *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pat(seed, i);
}

long find_pat_mismatch(const unsigned char *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pat(seed, i))
			return (long)i;
	return -1;
}

long find_byte_mismatch(const unsigned char *p, size_t len, unsigned char b)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != b)
			return (long)i;
	return -1;
}

int dev_open(struct dev *d)
{
	struct ibv_device **list;
	char gid_text[INET6_ADDRSTRLEN] = "?";
	const char *name;
	int n = -1, rc;

	memset(d, 0, sizeof(*d));
	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		fail("setup: ibv_get_device_list returned NULL: %s", strerror(errno));
		return -1;
	}
	if (n <= 0 || !list[0]) {
		fail("setup: ibv_get_device_list found no device (num_devices %d)", n);
		ibv_free_device_list(list);
		return -1;
	}
	name = ibv_get_device_name(list[0]);
	errno = 0;
	d->ctx = ibv_open_device(list[0]);
	if (!d->ctx) {
		fail("setup: ibv_open_device(%s): %s", name ? name : "(null)", strerror(errno));
		ibv_free_device_list(list);
		return -1;
	}
	rc = ibv_query_device(d->ctx, &d->attr);
	if (rc) {
		fail("setup: ibv_query_device: %s", strerror(rc));
		return -1;
	}
	rc = ibv_query_port(d->ctx, 1, &d->port);
	if (rc) {
		fail("setup: ibv_query_port(1): %s", strerror(rc));
		return -1;
	}
	if (d->port.state != IBV_PORT_ACTIVE) {
		fail("setup: port 1 is %s, not ACTIVE", ibv_port_state_str(d->port.state));
		return -1;
	}
	rc = ibv_query_gid(d->ctx, 1, 1, &d->gid);
	if (rc) {
		fail("setup: ibv_query_gid(port 1, index 1): %d (errno %s)", rc, strerror(errno));
		return -1;
	}
	inet_ntop(AF_INET6, d->gid.raw, gid_text, sizeof(gid_text));
	{
		static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

		if (memcmp(d->gid.raw, mapped, sizeof(mapped)) != 0) {
			fail("setup: GID index 1 is %s, not an IPv4-mapped address", gid_text);
			return -1;
		}
	}
	errno = 0;
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		fail("setup: ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	ok("setup: device %s of %d, port 1 ACTIVE, active MTU %d, GID[1] %s, max_qp_wr %d, max_sge %d",
	   name ? name : "(null)", n, 128 << d->port.active_mtu, gid_text, d->attr.max_qp_wr,
	   d->attr.max_sge);
	ibv_free_device_list(list);
	return 0;
}

void dev_close(struct dev *d)
{
	int rc;

	if (d->pd) {
		rc = ibv_dealloc_pd(d->pd);
		if (rc)
			fail("teardown: ibv_dealloc_pd: %s", strerror(rc));
	}
	if (d->ctx) {
		rc = ibv_close_device(d->ctx);
		if (rc)
			fail("teardown: ibv_close_device: %d", rc);
	}
	memset(d, 0, sizeof(*d));
}

/* The first PSN of the QP numbered qpn: close below 2^24 so that every run crosses the wrap. */
static uint32_t psn_of(uint32_t qpn)
{
	return (0xffffffu - 50u - (qpn & 0xffu)) & 0xffffffu;
}

static struct ibv_qp *create_qp(struct dev *d, struct ibv_cq *cq, const struct pair_opts *o,
				struct ibv_qp_cap *cap, const char *name)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 0;
	ia.cap.max_send_wr = o->sq;
	ia.cap.max_recv_wr = o->rq;
	ia.cap.max_send_sge = o->sge;
	ia.cap.max_recv_sge = o->sge;
	errno = 0;
	qp = ibv_create_qp(d->pd, &ia);
	if (!qp) {
		fail("setup: ibv_create_qp(%s, RC, sq %u, rq %u, sge %u): %s", name, o->sq, o->rq, o->sge,
		     strerror(errno));
		return NULL;
	}
	*cap = ia.cap;
	if (ia.cap.max_send_wr < o->sq || ia.cap.max_recv_wr < o->rq || ia.cap.max_send_sge < o->sge ||
	    ia.cap.max_recv_sge < o->sge) {
		fail("setup: ibv_create_qp(%s) returned caps below the request: sq %u rq %u sge %u/%u", name,
		     ia.cap.max_send_wr, ia.cap.max_recv_wr, ia.cap.max_send_sge, ia.cap.max_recv_sge);
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

int pair_create(struct dev *d, struct pair *p, const struct pair_opts *o)
{
	int cqe = (int)(o->sq + o->rq + 16);

	memset(p, 0, sizeof(*p));
	errno = 0;
	p->cq_a = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	if (!p->cq_a) {
		fail("setup: ibv_create_cq(%d): %s", cqe, strerror(errno));
		return -1;
	}
	errno = 0;
	p->cq_b = ibv_create_cq(d->ctx, cqe, o->cq_b_ctx, o->ch_b, 0);
	if (!p->cq_b) {
		fail("setup: ibv_create_cq(%d%s): %s", cqe, o->ch_b ? ", with a channel" : "", strerror(errno));
		pair_destroy(p);
		return -1;
	}
	p->a = create_qp(d, p->cq_a, o, &p->cap_a, "A");
	if (p->a)
		p->b = create_qp(d, p->cq_b, o, &p->cap_b, "B");
	if (!p->a || !p->b) {
		pair_destroy(p);
		return -1;
	}
	return 0;
}

int qp_to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	int rc;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.pkey_index = 0;
	attr.port_num = 1;
	attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			       IBV_ACCESS_REMOTE_ATOMIC;
	rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		fail("setup: modify_qp(QPN %u, RESET->INIT): %s", qp->qp_num, strerror(rc));
	return rc;
}

int qp_to_rtr(struct dev *d, struct ibv_qp *qp, uint32_t dest_qpn, uint8_t min_rnr_timer)
{
	struct ibv_qp_attr attr;
	int rc;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = d->port.active_mtu;
	attr.dest_qp_num = dest_qpn;
	attr.rq_psn = psn_of(dest_qpn);
	attr.max_dest_rd_atomic = 16;
	attr.min_rnr_timer = min_rnr_timer;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.grh.dgid = d->gid;
	attr.ah_attr.grh.sgid_index = 1;
	attr.ah_attr.grh.hop_limit = 64;
	attr.ah_attr.dlid = 0;
	attr.ah_attr.sl = 0;
	attr.ah_attr.src_path_bits = 0;
	attr.ah_attr.port_num = 1;
	rc = ibv_modify_qp(qp, &attr,
			   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		fail("setup: modify_qp(QPN %u, INIT->RTR, dest %u): %s", qp->qp_num, dest_qpn, strerror(rc));
	return rc;
}

int qp_to_rts(struct ibv_qp *qp, uint8_t rnr_retry)
{
	struct ibv_qp_attr attr;
	int rc;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = rnr_retry;
	attr.sq_psn = psn_of(qp->qp_num);
	attr.max_rd_atomic = 16;
	rc = ibv_modify_qp(qp, &attr,
			   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				   IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		fail("setup: modify_qp(QPN %u, RTR->RTS): %s", qp->qp_num, strerror(rc));
	return rc;
}

int pair_connect(struct dev *d, struct pair *p, const struct pair_opts *o)
{
	if (qp_to_init(p->a) || qp_to_init(p->b))
		return -1;
	if (qp_to_rtr(d, p->a, p->b->qp_num, o->min_rnr_timer) ||
	    qp_to_rtr(d, p->b, p->a->qp_num, o->min_rnr_timer))
		return -1;
	if (qp_to_rts(p->a, o->rnr_retry) || qp_to_rts(p->b, o->rnr_retry))
		return -1;
	return 0;
}

int pair_open(struct dev *d, struct pair *p, const struct pair_opts *o)
{
	if (pair_create(d, p, o))
		return -1;
	if (pair_connect(d, p, o)) {
		pair_destroy(p);
		return -1;
	}
	return 0;
}

void pair_destroy(struct pair *p)
{
	int rc;

	if (p->a && (rc = ibv_destroy_qp(p->a)))
		fail("teardown: ibv_destroy_qp(A): %s", strerror(rc));
	if (p->b && (rc = ibv_destroy_qp(p->b)))
		fail("teardown: ibv_destroy_qp(B): %s", strerror(rc));
	if (p->cq_a && (rc = ibv_destroy_cq(p->cq_a)))
		fail("teardown: ibv_destroy_cq(A): %s", strerror(rc));
	if (p->cq_b && (rc = ibv_destroy_cq(p->cq_b)))
		fail("teardown: ibv_destroy_cq(B): %s", strerror(rc));
	memset(p, 0, sizeof(*p));
}

int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr ia;

	memset(&attr, 0, sizeof(attr));
	if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &ia))
		return -1;
	return (int)attr.qp_state;
}

int poll_wc(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms)
{
	double end = now() + timeout_ms / 1000.0;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			return -1;
		if (n > 0)
			return 1;
		if (now() > end)
			return 0;
		sched_yield();
	}
}

int post_one(struct ibv_qp *qp, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
	     uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	rc = ibv_post_send(qp, &wr, &bad);
	if (rc && bad != &wr)
		fail("post_send failed (%s) but bad_wr is %p, not the WR %p", strerror(rc), (void *)bad, (void *)&wr);
	return rc;
}

int post_recv_one(struct ibv_qp *qp, void *addr, uint32_t len, uint32_t lkey, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	rc = ibv_post_recv(qp, &wr, &bad);
	if (rc && bad != &wr)
		fail("post_recv failed (%s) but bad_wr is %p, not the WR %p", strerror(rc), (void *)bad, (void *)&wr);
	return rc;
}
