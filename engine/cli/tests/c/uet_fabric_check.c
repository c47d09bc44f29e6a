/*
 * A libfabric program checking softrdma's provider end to end (issue 32), written only against
 * libfabric-dev's headers and run under `softrdma run`:
 *
 *   uet_fabric_check server|client   two processes; each prints "ADDR <hex>" (fi_getname) on
 *                                    stdout and reads the peer's line from stdin.
 *   uet_fabric_check getinfo         fi_getinfo only; prints its return, for a configuration the
 *                                    provider must refuse (UET_PROVIDER_SERVICE_PATH unreadable).
 *
 * The HPC profile on FI_EP_RDM: tagged sends matched by wildcard receives, a 1 MiB send
 * (rendezvous), RMA write and read, fetch-add and compare-swap on the server's own memory, and a
 * write to a region bound to the server's JobID from another JobID, which must complete with
 * FI_EACCES in fi_cq_readerr; fi_cancel of waiting receives (FI_ECANCELED) and of one a message
 * already matched (not cancelled); sends gathered from and receives and reads scattered over
 * several buffers (up to iov_limit, one more refused); a multi-receive buffer (FI_MULTI_RECV,
 * FI_OPT_MIN_MULTI_RECV) taking three messages. Every byte is checked, and every receive's source address
 * (fi_cq_readfrom) is the peer's. The server's JobID is 20 and the client's 10
 * (SOFTRDMA_JOB_ID, each also serving the other's). Exit 0 and "<role> ok" when all holds.
 * UET_CHECK_TIMEOUT: seconds to wait for each completion (default 20).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#define BIG (1 << 20)
#define RMA_HALF (64 * 1024)
#define KEY_RMA 0x100
#define KEY_AMO 0x200
#define KEY_OWN 0x300
#define TAG_WILD 0xA000
#define TAG_IGNORE 0x0FFF
#define TAG_EXACT 0xB001
#define TAG_IOV 0xC001
#define IOV_LIMIT 4
#define SMALL 100
/* SES return code BAD_JOB_ID (UET 1.0). */
#define BAD_JOB_ID 0x1B

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_cntr *cntr;
static struct fid_av *av;
static fi_addr_t peer;
/* The source address fi_cq_readfrom gave with the last completion. */
static fi_addr_t last_src;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "uet_fabric_check: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

#define CHECK(call)                                                                    \
	do {                                                                           \
		long _r = (long)(call);                                                \
		if (_r)                                                                \
			die("%s: %ld (%s)", #call, _r, fi_strerror((int)-_r));         \
	} while (0)

static uint8_t pattern(size_t i, unsigned seed)
{
	return (uint8_t)(i * 31 + seed + (i >> 8));
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pattern(i, seed);
}

static void expect_bytes(const uint8_t *b, size_t n, unsigned seed, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pattern(i, seed))
			die("%s: byte %zu is %u, expected %u", what, i, b[i], pattern(i, seed));
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* How long to wait for a completion: UET_CHECK_TIMEOUT seconds, default 20. */
static double timeout(void)
{
	const char *t = getenv("UET_CHECK_TIMEOUT");
	return t ? atof(t) : 20;
}

/* The next completion; an error completion is returned in *err with 1. */
static int next(struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err)
{
	double end = now() + timeout();
	for (;;) {
		ssize_t r = fi_cq_readfrom(cq, e, 1, &last_src);
		if (r == 1)
			return 0;
		if (r == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			if (fi_cq_readerr(cq, err, 0) != 1)
				die("fi_cq_readerr after FI_EAVAIL returned nothing");
			return 1;
		}
		if (r != -FI_EAGAIN)
			die("fi_cq_read: %zd (%s)", r, fi_strerror((int)-r));
		if (now() > end)
			die("no completion within %g s", timeout());
	}
}

/* The next completion, which must succeed. */
static void next_ok(struct fi_cq_tagged_entry *e, const char *what)
{
	struct fi_cq_err_entry err;
	if (next(e, &err))
		die("%s completed with error %d (%s), provider error %d (%s)", what, err.err,
		    fi_strerror(err.err), err.prov_errno,
		    fi_cq_strerror(cq, err.prov_errno, err.err_data, NULL, 0));
}

/* The next completion is the error of a receive fi_cancel cancelled: FI_ECANCELED, with the
   receive's context and flags (FI_RECV and `kind`, FI_MSG or FI_TAGGED), and no bytes. */
static void expect_cancelled(void *context, uint64_t kind, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	if (!next(&e, &err))
		die("%s: a completion with context %p after fi_cancel, expected its error", what,
		    e.op_context);
	if (err.err != FI_ECANCELED || err.op_context != context || err.flags != (FI_RECV | kind) ||
	    err.len != 0)
		die("%s: error %d (%s), context %p (expected %p), flags %#" PRIx64 ", %zu bytes", what,
		    err.err, fi_strerror(err.err), err.op_context, context, err.flags, err.len);
}

/* The completion queue holds nothing now (nor does it after progress). */
static void expect_empty(const char *what)
{
	struct fi_cq_tagged_entry e;
	ssize_t r = fi_cq_read(cq, &e, 1);
	if (r != -FI_EAGAIN)
		die("%s: fi_cq_read gave %zd, expected nothing (-FI_EAGAIN)", what, r);
}

static struct fid_mr *reg(void *buf, size_t len, uint64_t key, int own_job)
{
	struct fid_mr *mr;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_mr_attr attr = {
	    .mr_iov = &iov,
	    .iov_count = 1,
	    .access = FI_REMOTE_READ | FI_REMOTE_WRITE,
	    .requested_key = key,
	    /* 3: the region is for the endpoint's own JobID only; 0: any JobID. */
	    .auth_key_size = own_job ? 3 : 0,
	};
	CHECK(fi_mr_regattr(domain, &attr, 0, &mr));
	CHECK(fi_mr_bind(mr, &ep->fid, 0));
	CHECK(fi_mr_enable(mr));
	if (fi_mr_key(mr) != key)
		die("fi_mr_key gave %#" PRIx64 ", asked %#" PRIx64, fi_mr_key(mr), key);
	return mr;
}

static struct fi_info *getinfo(int quiet)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_ENDPOINT;
	hints->fabric_attr->name = strdup("uet_hpc");
	hints->fabric_attr->prov_name = strdup("softrdma");
	int r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (quiet) {
		printf("getinfo: %d (%s)\n", r, fi_strerror(-r));
		return NULL;
	}
	if (r)
		die("fi_getinfo: %d (%s)", r, fi_strerror(-r));
	if ((info->caps & (FI_RMA | FI_ATOMIC | FI_TAGGED)) != (FI_RMA | FI_ATOMIC | FI_TAGGED))
		die("the offer lacks RMA, atomics or tagged messages: caps %#" PRIx64, info->caps);
	if (info->tx_attr->iov_limit != IOV_LIMIT || info->rx_attr->iov_limit != IOV_LIMIT ||
	    info->tx_attr->rma_iov_limit != 1)
		die("iov limits: tx %zu, rx %zu, rma %zu; expected %d, %d, 1", info->tx_attr->iov_limit,
		    info->rx_attr->iov_limit, info->tx_attr->rma_iov_limit, IOV_LIMIT, IOV_LIMIT);
	return info;
}

static void open_all(struct fi_info *info)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 64};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP};
	CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	CHECK(fi_cntr_open(domain, &cntr_attr, &cntr, NULL));
	CHECK(fi_av_open(domain, &av_attr, &av, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(ep, &cntr->fid, FI_SEND | FI_RECV | FI_READ | FI_WRITE));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_enable(ep));
}

/* Prints this endpoint's address, reads the peer's, inserts it. */
static void exchange(void)
{
	uint8_t addr[64], theirs[64];
	size_t len = sizeof(addr);
	CHECK(fi_getname(&ep->fid, addr, &len));
	printf("ADDR ");
	for (size_t i = 0; i < len; i++)
		printf("%02x", addr[i]);
	printf("\n");
	fflush(stdout);
	char line[256];
	if (!fgets(line, sizeof(line), stdin) || strncmp(line, "ADDR ", 5))
		die("expected the peer's ADDR line on stdin");
	size_t n = 0;
	for (char *p = line + 5; p[0] && p[1] && p[0] != '\n' && n < sizeof(theirs); p += 2) {
		unsigned v;
		if (sscanf(p, "%2x", &v) != 1)
			die("bad hex in the peer's address");
		theirs[n++] = (uint8_t)v;
	}
	if (n != len)
		die("the peer's address has %zu bytes, ours %zu", n, len);
	if (fi_av_insert(av, theirs, 1, &peer, 0, NULL) != 1)
		die("fi_av_insert refused the peer's address");
}

static void server(void)
{
	static uint8_t rma[2 * RMA_HALF], big[BIG], wild[2][SMALL], exact[SMALL], done[8];
	static uint64_t amo[2] = {100, 5}, own = 0;
	fill(rma, RMA_HALF, 1);
	memset(rma + RMA_HALF, 0, RMA_HALF);
	struct fid_mr *m1 = reg(rma, sizeof(rma), KEY_RMA, 0);
	struct fid_mr *m2 = reg(amo, sizeof(amo), KEY_AMO, 0);
	struct fid_mr *m3 = reg(&own, sizeof(own), KEY_OWN, 1);
	/* Keys with bits outside the RKEY and its two flags, or in the internal range, are refused. */
	struct fid_mr *bad;
	uint64_t bad_keys[] = {1ULL << 50, 1ULL << 47};
	for (int i = 0; i < 2; i++) {
		int r = fi_mr_reg(domain, &own, sizeof(own), FI_REMOTE_WRITE, 0, bad_keys[i], 0, &bad, NULL);
		if (r != -FI_EKEYREJECTED)
			die("key %#" PRIx64 " gave %d, expected -FI_EKEYREJECTED", bad_keys[i], r);
	}

	/* fi_cancel: an untagged and a tagged receive still waiting complete with FI_ECANCELED (and
	   count as errors), in the order cancelled; the client's messages then go to the receives
	   posted after them (were they still posted, the 1 MiB send would land in `gone`, truncated,
	   and a wildcard tagged send in `gone_tagged`). A context nothing was posted with is no error. */
	static uint8_t gone[SMALL], gone_tagged[SMALL];
	CHECK(fi_recv(ep, gone, SMALL, NULL, FI_ADDR_UNSPEC, gone));
	CHECK(fi_trecv(ep, gone_tagged, SMALL, NULL, FI_ADDR_UNSPEC, TAG_WILD, TAG_IGNORE, gone_tagged));
	CHECK(fi_cancel(&ep->fid, gone_tagged));
	CHECK(fi_cancel(&ep->fid, gone));
	CHECK(fi_cancel(&ep->fid, &own));
	expect_cancelled(gone_tagged, FI_TAGGED, "the cancelled tagged receive");
	expect_cancelled(gone, FI_MSG, "the cancelled receive");
	expect_empty("after two cancelled receives");
	if (fi_cntr_readerr(cntr) != 2)
		die("the counter has %" PRIu64 " errors after two cancelled receives", fi_cntr_readerr(cntr));
	CHECK(fi_cntr_seterr(cntr, 0));

	CHECK(fi_trecv(ep, wild[0], SMALL, NULL, FI_ADDR_UNSPEC, TAG_WILD, TAG_IGNORE, &wild[0]));
	CHECK(fi_trecv(ep, wild[1], SMALL, NULL, FI_ADDR_UNSPEC, TAG_WILD, TAG_IGNORE, &wild[1]));
	CHECK(fi_trecv(ep, exact, SMALL, NULL, FI_ADDR_UNSPEC, TAG_EXACT, 0, exact));
	CHECK(fi_recv(ep, big, BIG, NULL, FI_ADDR_UNSPEC, big));
	CHECK(fi_recv(ep, done, sizeof(done), NULL, FI_ADDR_UNSPEC, done));
	/* A tagged receive scattered over three buffers (the client gathers its send from four). One
	   more buffer than the limit is refused. */
	static uint8_t scat_a[10], scat_b[50], scat_c[40], scat_wanted[SMALL];
	struct iovec scat[IOV_LIMIT + 1] = {
	    {scat_a, sizeof(scat_a)}, {scat_b, sizeof(scat_b)}, {scat_c, sizeof(scat_c)}};
	for (int i = 3; i <= IOV_LIMIT; i++)
		scat[i] = (struct iovec){scat_wanted, 1};
	struct fi_msg_tagged tmsg = {.msg_iov = scat, .iov_count = IOV_LIMIT + 1, .addr = FI_ADDR_UNSPEC,
				     .tag = TAG_IOV, .context = scat_a};
	if (fi_trecvmsg(ep, &tmsg, 0) != -FI_EINVAL)
		die("fi_trecvmsg with %d iovecs was not refused with -FI_EINVAL", IOV_LIMIT + 1);
	tmsg.iov_count = 3;
	CHECK(fi_trecvmsg(ep, &tmsg, 0));
	CHECK(fi_send(ep, "R", 1, NULL, peer, NULL));

	int got_wild = 0, got_exact = 0, got_big = 0, got_done = 0, got_iov = 0, sent = 0;
	while (!(got_wild == 2 && got_exact && got_big && got_done && got_iov && sent)) {
		struct fi_cq_tagged_entry e;
		next_ok(&e, "a server operation");
		if (e.op_context == NULL && (e.flags & FI_SEND)) {
			sent = 1;
		} else if ((e.flags & FI_RECV) && last_src != peer) {
			die("a receive from AV address %" PRIu64 ", expected the client's %" PRIu64,
			    (uint64_t)last_src, (uint64_t)peer);
		} else if (e.op_context == wild[0] || e.op_context == wild[1]) {
			if ((e.tag & ~(uint64_t)TAG_IGNORE) != TAG_WILD || e.len != SMALL)
				die("wildcard receive got tag %#" PRIx64 ", %zu bytes", e.tag, e.len);
			expect_bytes(e.op_context, SMALL, (unsigned)(e.tag & 0xff), "a wildcard receive");
			got_wild++;
		} else if (e.op_context == exact) {
			if (e.tag != TAG_EXACT || e.len != SMALL)
				die("exact receive got tag %#" PRIx64, e.tag);
			expect_bytes(exact, SMALL, 3, "the exact receive");
			got_exact = 1;
		} else if (e.op_context == big) {
			if (e.len != BIG)
				die("the 1 MiB receive got %zu bytes", e.len);
			expect_bytes(big, BIG, 9, "the 1 MiB receive");
			got_big = 1;
		} else if (e.op_context == scat_a) {
			if (e.tag != TAG_IOV || e.len != SMALL || e.buf != scat_a)
				die("the scattered receive got tag %#" PRIx64 ", %zu bytes at %p", e.tag,
				    e.len, e.buf);
			memcpy(scat_wanted, scat_a, sizeof(scat_a));
			memcpy(scat_wanted + sizeof(scat_a), scat_b, sizeof(scat_b));
			memcpy(scat_wanted + sizeof(scat_a) + sizeof(scat_b), scat_c, sizeof(scat_c));
			expect_bytes(scat_wanted, SMALL, 7, "the receive scattered over three buffers");
			got_iov = 1;
		} else if (e.op_context == done) {
			got_done = 1;
		} else {
			die("a completion with an unknown context %p", e.op_context);
		}
	}
	/* The client's RMA and atomics landed in this process's own memory. */
	expect_bytes(rma + RMA_HALF, RMA_HALF, 5, "the region the client wrote");
	expect_bytes(rma, RMA_HALF, 1, "the region the client read");
	if (amo[0] != 105 || amo[1] != 9)
		die("atomics left %" PRIu64 " and %" PRIu64 ", expected 105 and 9", amo[0], amo[1]);
	if (own != 0)
		die("a write from another JobID changed the region bound to this one");
	/* The counter saw the six receives and the one send. */
	CHECK(fi_cntr_wait(cntr, 7, 5000));
	if (fi_cntr_read(cntr) != 7 || fi_cntr_readerr(cntr) != 0)
		die("the counter has %" PRIu64 " completions and %" PRIu64 " errors, expected 7 and 0",
		    fi_cntr_read(cntr), fi_cntr_readerr(cntr));
	CHECK(fi_close(&m1->fid));
	CHECK(fi_close(&m2->fid));
	CHECK(fi_close(&m3->fid));

	/* FI_MULTI_RECV: one buffer of 200 bytes takes the client's three messages (40, 30, 20
	   bytes), each at the next offset; with FI_OPT_MIN_MULTI_RECV at 120 (default 64), the third
	   leaves 110 and releases it: its completion, only, has FI_MULTI_RECV. */
	size_t min = 0, optlen = sizeof(min);
	CHECK(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &optlen));
	if (min != 64 || optlen != sizeof(min))
		die("FI_OPT_MIN_MULTI_RECV is %zu (%zu bytes), expected 64", min, optlen);
	min = 120;
	CHECK(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)));
	static uint8_t multi[200];
	struct iovec mv = {multi, sizeof(multi)};
	struct fi_msg mm = {.msg_iov = &mv, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = multi};
	CHECK(fi_recvmsg(ep, &mm, FI_MULTI_RECV));
	CHECK(fi_send(ep, "M", 1, NULL, peer, NULL));
	size_t at = 0, sizes[3] = {40, 30, 20};
	int sent_m = 0;
	for (int i = 0; i < 3 || !sent_m;) {
		struct fi_cq_tagged_entry e;
		next_ok(&e, "a multi-receive message");
		if (e.op_context == NULL && (e.flags & FI_SEND)) {
			sent_m = 1;
			continue;
		}
		uint64_t want = FI_RECV | FI_MSG | (i == 2 ? FI_MULTI_RECV : 0);
		if (i > 2 || e.op_context != multi || e.buf != multi + at || e.len != sizes[i] ||
		    e.flags != want)
			die("multi-receive message %d: context %p, at %p (expected %p), %zu bytes, flags "
			    "%#" PRIx64 " (expected %#" PRIx64 ")",
			    i, e.op_context, e.buf, (void *)(multi + at), e.len, e.flags, want);
		expect_bytes(multi + at, sizes[i], 11 + i, "a multi-receive message");
		at += sizes[i];
		i++;
	}
	expect_empty("after the multi-receive buffer was released");
}

static void client(void)
{
	static uint8_t ready[8], a1[SMALL], a2[SMALL], b[SMALL], big[BIG], wr[RMA_HALF], rd[RMA_HALF];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	CHECK(fi_recv(ep, ready, sizeof(ready), NULL, FI_ADDR_UNSPEC, ready));
	/* The ready message arrives (the counter, whose reads make progress, counts it) before its
	   completion is read: fi_cancel then finds no receive waiting, and the completion is the
	   message's, not an error. */
	double end = now() + timeout();
	while (fi_cntr_read(cntr) < 1)
		if (now() > end)
			die("no completion within %g s (the server's ready message)", timeout());
	CHECK(fi_cancel(&ep->fid, ready));
	next_ok(&e, "the server's ready message, fi_cancel called after it arrived");
	if (e.op_context != ready || e.len != 1 || ready[0] != 'R')
		die("expected the server's ready message");
	CHECK(fi_cancel(&ep->fid, ready));
	expect_empty("fi_cancel of a receive already completed");

	fill(a1, SMALL, 0x01);
	fill(a2, SMALL, 0x02);
	fill(b, SMALL, 3);
	fill(big, BIG, 9);
	CHECK(fi_tsend(ep, a1, SMALL, NULL, peer, TAG_WILD | 0x01, a1));
	CHECK(fi_tsend(ep, a2, SMALL, NULL, peer, TAG_WILD | 0x02, a2));
	CHECK(fi_tsend(ep, b, SMALL, NULL, peer, TAG_EXACT, b));
	CHECK(fi_send(ep, big, BIG, NULL, peer, big));
	/* A tagged send gathered from four buffers, one of them empty; five are refused. */
	static uint8_t gath[SMALL];
	fill(gath, SMALL, 7);
	struct iovec gv[IOV_LIMIT + 1] = {{gath, 1}, {gath + 1, 33}, {gath + 34, 0}, {gath + 34, 66}, {gath, 1}};
	if (fi_tsendv(ep, gv, NULL, IOV_LIMIT + 1, peer, TAG_IOV, gath) != -FI_EINVAL)
		die("fi_tsendv with %d iovecs was not refused with -FI_EINVAL", IOV_LIMIT + 1);
	if (fi_sendv(ep, gv, NULL, IOV_LIMIT + 1, peer, gath) != -FI_EINVAL)
		die("fi_sendv with %d iovecs was not refused with -FI_EINVAL", IOV_LIMIT + 1);
	CHECK(fi_tsendv(ep, gv, NULL, IOV_LIMIT, peer, TAG_IOV, gath));
	for (int i = 0; i < 5; i++)
		next_ok(&e, "a send");
	/* The ready message and the five sends. */
	CHECK(fi_cntr_wait(cntr, 6, 5000));
	if (fi_cntr_read(cntr) != 6)
		die("the counter has %" PRIu64 " completions after six, expected 6", fi_cntr_read(cntr));

	CHECK(fi_read(ep, rd, RMA_HALF, NULL, peer, 0, KEY_RMA, rd));
	next_ok(&e, "fi_read");
	if (e.op_context != rd || !(e.flags & FI_READ))
		die("the read completed with flags %#" PRIx64, e.flags);
	expect_bytes(rd, RMA_HALF, 1, "fi_read");
	/* The same read scattered over three buffers (fi_readmsg), and a write gathered from three
	   (fi_writev), which the server checks. A target shorter than the buffers is refused. */
	memset(rd, 0, RMA_HALF);
	struct iovec rv[3] = {{rd + 7, RMA_HALF - 1000}, {rd, 7}, {rd + RMA_HALF - 993, 993}};
	struct fi_rma_iov target = {.addr = 0, .len = RMA_HALF, .key = KEY_RMA};
	struct fi_msg_rma rmsg = {.msg_iov = rv, .iov_count = 3, .addr = peer, .rma_iov = &target,
				  .rma_iov_count = 1, .context = rv};
	CHECK(fi_readmsg(ep, &rmsg, 0));
	next_ok(&e, "fi_readmsg over three buffers");
	if (e.op_context != rv || !(e.flags & FI_READ))
		die("the scattered read completed with context %p, flags %#" PRIx64, e.op_context, e.flags);
	static uint8_t in_order[RMA_HALF];
	memcpy(in_order, rd + 7, RMA_HALF - 1000);
	memcpy(in_order + RMA_HALF - 1000, rd, 7);
	memcpy(in_order + RMA_HALF - 993, rd + RMA_HALF - 993, 993);
	expect_bytes(in_order, RMA_HALF, 1, "fi_readmsg over three buffers");
	target.len = RMA_HALF - 1;
	if (fi_readmsg(ep, &rmsg, 0) != -FI_EINVAL)
		die("fi_readmsg into buffers longer than its target was not refused");

	fill(wr, RMA_HALF, 5);
	struct iovec wv[3] = {{wr, 100}, {wr + 100, RMA_HALF - 200}, {wr + RMA_HALF - 100, 100}};
	CHECK(fi_writev(ep, wv, NULL, 3, peer, RMA_HALF, KEY_RMA, wr));
	next_ok(&e, "fi_writev");

	uint64_t add = 5, old = 0, cmp = 5, swap = 9, prev = 0;
	CHECK(fi_fetch_atomic(ep, &add, 1, NULL, &old, NULL, peer, 0, KEY_AMO, FI_UINT64, FI_SUM, &old));
	next_ok(&e, "fi_fetch_atomic");
	if (old != 100)
		die("fetch-add returned %" PRIu64 ", expected 100", old);
	CHECK(fi_compare_atomic(ep, &swap, 1, NULL, &cmp, NULL, &prev, NULL, peer, 8, KEY_AMO, FI_UINT64,
				FI_CSWAP, &prev));
	next_ok(&e, "fi_compare_atomic");
	if (prev != 5)
		die("compare-swap returned %" PRIu64 ", expected 5", prev);

	/* The region bound to the server's JobID (20) refuses this process's (10). A wait for more
	   than will come ends when the error is counted during it. The pause lets the refusal reach
	   the socket before the wait starts, as a preempted client sees it: the wait must still count
	   it as new (it once took it in a progress step of its own before looking, and ran out; seen
	   under CI load). Nothing between the write and the wait makes progress (fi_cntr_read does). */
	uint64_t junk = 0x5a5a5a5a5a5a5a5a;
	uint64_t before = fi_cntr_read(cntr);
	CHECK(fi_write(ep, &junk, sizeof(junk), NULL, peer, 0, KEY_OWN, &junk));
	struct timespec pause = { 0, 50 * 1000 * 1000 };
	nanosleep(&pause, NULL);
	int w = fi_cntr_wait(cntr, before + 100, 5000);
	if (w != -FI_EAVAIL || fi_cntr_readerr(cntr) != 1)
		die("fi_cntr_wait over a failed write gave %d with %" PRIu64 " errors", w, fi_cntr_readerr(cntr));
	if (fi_cntr_wait(cntr, before + 100, 20) != -FI_ETIMEDOUT)
		die("fi_cntr_wait for what never comes did not time out");
	CHECK(fi_cntr_set(cntr, 100));
	CHECK(fi_cntr_add(cntr, 2));
	CHECK(fi_cntr_adderr(cntr, 2));
	if (fi_cntr_read(cntr) != 102 || fi_cntr_readerr(cntr) != 3)
		die("set/add left %" PRIu64 " and %" PRIu64, fi_cntr_read(cntr), fi_cntr_readerr(cntr));
	CHECK(fi_cntr_seterr(cntr, 0));
	if (!next(&e, &err))
		die("a write to a region of another JobID succeeded");
	if (err.err != FI_EACCES || err.prov_errno != BAD_JOB_ID || err.op_context != &junk)
		die("the refused write gave error %d, provider error %d", err.err, err.prov_errno);
	printf("refused: %s / %s\n", fi_strerror(err.err),
	       fi_cq_strerror(cq, err.prov_errno, err.err_data, NULL, 0));

	CHECK(fi_send(ep, "D", 1, NULL, peer, NULL));
	next_ok(&e, "the done message");

	/* Three messages for the server's multi-receive buffer, posted when its "M" comes. */
	static uint8_t go[8], parts[3][40];
	size_t sizes[3] = {40, 30, 20};
	CHECK(fi_recv(ep, go, sizeof(go), NULL, FI_ADDR_UNSPEC, go));
	next_ok(&e, "the server's multi-receive message");
	if (e.op_context != go || go[0] != 'M')
		die("expected the server's multi-receive message");
	for (int i = 0; i < 3; i++) {
		fill(parts[i], sizes[i], 11 + i);
		CHECK(fi_send(ep, parts[i], sizes[i], NULL, peer, parts[i]));
		next_ok(&e, "a send to the multi-receive buffer");
	}
}

int main(int argc, char **argv)
{
	if (argc != 2)
		die("usage: uet_fabric_check server|client|getinfo");
	if (!strcmp(argv[1], "getinfo")) {
		getinfo(1);
		return 0;
	}
	struct fi_info *info = getinfo(0);
	open_all(info);
	exchange();
	if (!strcmp(argv[1], "server"))
		server();
	else if (!strcmp(argv[1], "client"))
		client();
	else
		die("unknown role %s", argv[1]);
	/* An MR left open does not keep the endpoint it was bound to (and what was posted on it)
	 * alive after fi_close: the address is free for a new endpoint at once. */
	static uint8_t kept_buf[64];
	struct fid_mr *kept = reg(kept_buf, sizeof(kept_buf), KEY_OWN + 0x100, 0);
	CHECK(fi_close(&ep->fid));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_close(&kept->fid));
	CHECK(fi_close(&ep->fid));
	CHECK(fi_close(&av->fid));
	CHECK(fi_close(&cq->fid));
	CHECK(fi_close(&cntr->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	printf("%s ok\n", argv[1]);
	return 0;
}
