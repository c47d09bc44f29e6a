/*
 * Part b: completion events. A thread blocks in ibv_get_cq_event on B's completion channel and is
 * woken by a SEND the main thread posts on A (ibv_req_notify_cq armed first), then the events are
 * acknowledged (one by one and two at once); the channel's fd works with O_NONBLOCK and poll(); no
 * event is delivered when the CQ was not armed.
 */
#include "abi_check.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF 4096
#define ROUNDS 3

struct waiter {
	struct ibv_comp_channel *ch;
	atomic_int state; /* 1 = about to block, 2 = returned */
	int rc, err;
	struct ibv_cq *cq;
	void *cq_ctx;
	double woke;
};

static void *wait_event(void *arg)
{
	struct waiter *w = arg;

	atomic_store(&w->state, 1);
	errno = 0;
	w->rc = ibv_get_cq_event(w->ch, &w->cq, &w->cq_ctx);
	w->err = errno;
	w->woke = now();
	atomic_store(&w->state, 2);
	return NULL;
}

/* One SEND of len bytes (pattern seed) from A into a receive posted on B; completions are not polled. */
static int exchange(struct pair *p, struct ibv_mr *smr, struct ibv_mr *rmr, uint32_t len, uint64_t seed)
{
	int rc;

	memset(rmr->addr, 0, BUF);
	fill_pat(smr->addr, len, seed);
	rc = post_recv_one(p->b, rmr->addr, BUF, rmr->lkey, seed);
	if (rc) {
		fail("b: ibv_post_recv: %s", strerror(rc));
		return -1;
	}
	rc = post_one(p->a, IBV_WR_SEND, smr->addr, len, smr->lkey, 0, 0, seed);
	if (rc) {
		fail("b: ibv_post_send: %s", strerror(rc));
		return -1;
	}
	return 0;
}

/* Polls the two completions of exchange() and checks the data. */
static int finish_exchange(struct pair *p, struct ibv_mr *rmr, uint32_t len, uint64_t seed, const char *what)
{
	struct ibv_wc wc;
	long at;
	int r;

	r = poll_wc(p->cq_b, &wc, 5000);
	if (r != 1 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != len ||
	    wc.wr_id != seed) {
		fail("b: %s: receive completion: %s", what,
		     r == 1 ? ibv_wc_status_str(wc.status) : r == 0 ? "none within 5 s" : "ibv_poll_cq failed");
		return -1;
	}
	if ((at = find_pat_mismatch(rmr->addr, len, seed)) >= 0) {
		fail("b: %s: received byte %ld is wrong", what, at);
		return -1;
	}
	r = poll_wc(p->cq_a, &wc, 5000);
	if (r != 1 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND || wc.wr_id != seed) {
		fail("b: %s: send completion: %s", what,
		     r == 1 ? ibv_wc_status_str(wc.status) : r == 0 ? "none within 5 s" : "ibv_poll_cq failed");
		return -1;
	}
	return 0;
}

/*
 * Round r: a thread blocked in ibv_get_cq_event is woken by a completion from this thread. *events
 * counts the events it returned (to acknowledge whatever happens, or destroying the CQ would wait).
 */
static int blocked_round(struct pair *p, struct ibv_comp_channel *ch, void *marker, struct ibv_mr *smr,
			 struct ibv_mr *rmr, int r, unsigned int *events)
{
	struct waiter w = { .ch = ch };
	uint32_t len = 1000u + (uint32_t)r * 1500u;
	uint64_t seed = 100u + (uint64_t)r;
	pthread_t t;
	double posted;
	int rc;

	rc = ibv_req_notify_cq(p->cq_b, 0);
	if (rc) {
		fail("b: round %d: ibv_req_notify_cq: %s", r, strerror(rc));
		return -1;
	}
	if (pthread_create(&t, NULL, wait_event, &w)) {
		fail("b: pthread_create");
		return -1;
	}
	/* Wait for the thread to reach the call (a loaded machine may start it late), then let it block. */
	for (double start = now(); atomic_load(&w.state) == 0 && now() < start + 5.0;)
		sleep_ms(1);
	sleep_ms(300);
	if (atomic_load(&w.state) != 1) {
		pthread_join(t, NULL);
		if (w.rc == 0)
			(*events)++;
		fail("b: round %d: ibv_get_cq_event returned before any completion (rc %d, errno %s)", r, w.rc,
		     strerror(w.err));
		return -1;
	}
	if (exchange(p, smr, rmr, len, seed)) {
		/* Nothing will wake the thread: end the process with what was printed. */
		printf("%d check(s) failed\n", failures());
		fflush(stdout);
		_exit(1);
	}
	posted = now();
	while (atomic_load(&w.state) != 2 && now() < posted + 5.0)
		sleep_ms(1);
	if (atomic_load(&w.state) != 2) {
		fail("b: round %d: the thread blocked in ibv_get_cq_event was not woken within 5 s of a completion "
		     "on its CQ",
		     r);
		printf("%d check(s) failed\n", failures());
		fflush(stdout);
		_exit(1);
	}
	pthread_join(t, NULL);
	if (w.rc == 0)
		(*events)++;
	if (!check(w.rc == 0 && w.cq == p->cq_b && w.cq_ctx == marker,
		   "b: round %d: thread blocked 300 ms in ibv_get_cq_event woken %.1f ms after the post on another "
		   "thread (rc %d, cq %s, cq_context %s)",
		   r, (w.woke - posted) * 1e3, w.rc, w.cq == p->cq_b ? "right" : "WRONG",
		   w.cq_ctx == marker ? "right" : "WRONG"))
		return -1;
	return finish_exchange(p, rmr, len, seed, "blocked round");
}

static void nonblocking_checks(struct pair *p, struct ibv_comp_channel *ch, void *marker, struct ibv_mr *smr,
			       struct ibv_mr *rmr)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct ibv_cq *cq = NULL;
	void *ctx = NULL;
	int flags, rc, n;

	flags = fcntl(ch->fd, F_GETFL);
	if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		fail("b: the completion channel's fd %d does not take O_NONBLOCK: %s", ch->fd, strerror(errno));
		return;
	}
	/* On a thread, so that a call that blocks anyway is reported (and then woken) instead of hanging. */
	{
		struct waiter w = { .ch = ch };
		pthread_t t;
		double start = now();

		if (pthread_create(&t, NULL, wait_event, &w)) {
			fail("b: pthread_create");
			return;
		}
		while (atomic_load(&w.state) != 2 && now() < start + 2.0)
			sleep_ms(1);
		if (atomic_load(&w.state) == 2) {
			check(w.rc == -1 && w.err == EAGAIN,
			      "b: ibv_get_cq_event on a channel whose fd is O_NONBLOCK, without an event, returns -1 "
			      "with EAGAIN (rc %d, errno %s)",
			      w.rc, strerror(w.err));
		} else {
			fail("b: ibv_get_cq_event on a channel whose fd is O_NONBLOCK, without an event, blocks (still "
			     "waiting after 2 s; libibverbs returns -1 with EAGAIN)");
			/* Wake it with an event. */
			if (ibv_req_notify_cq(p->cq_b, 0) || exchange(p, smr, rmr, 55, 150)) {
				printf("%d check(s) failed\n", failures());
				fflush(stdout);
				_exit(1);
			}
			start = now();
			while (atomic_load(&w.state) != 2 && now() < start + 5.0)
				sleep_ms(1);
			if (atomic_load(&w.state) != 2) {
				fail("b: ... and a completion on the armed CQ did not wake it within 5 s");
				printf("%d check(s) failed\n", failures());
				fflush(stdout);
				_exit(1);
			}
			if (finish_exchange(p, rmr, 55, 150, "wake-up of the blocked call")) {
				pthread_join(t, NULL);
				if (w.rc == 0)
					ibv_ack_cq_events(p->cq_b, 1);
				return;
			}
		}
		pthread_join(t, NULL);
		if (w.rc == 0)
			ibv_ack_cq_events(p->cq_b, 1);
	}

	rc = ibv_req_notify_cq(p->cq_b, 0);
	if (rc) {
		fail("b: ibv_req_notify_cq: %s", strerror(rc));
		return;
	}
	if (exchange(p, smr, rmr, 333, 200))
		return;
	n = poll(&pfd, 1, 5000);
	if (!check(n == 1 && (pfd.revents & POLLIN), "b: poll() on the channel's fd reports POLLIN after a completion "
			 "(poll returned %d, revents 0x%x)", n, pfd.revents))
		return;
	errno = 0;
	rc = ibv_get_cq_event(ch, &cq, &ctx);
	if (rc == 0)
		ibv_ack_cq_events(p->cq_b, 1);
	if (!check(rc == 0 && cq == p->cq_b && ctx == marker,
		   "b: ibv_get_cq_event after poll() returns B's CQ and its context (rc %d, errno %s)", rc,
		   strerror(errno)))
		return;
	if (finish_exchange(p, rmr, 333, 200, "poll() round"))
		return;

	/* Not armed: a completion must not produce an event. */
	if (exchange(p, smr, rmr, 77, 300) || finish_exchange(p, rmr, 77, 300, "unarmed round"))
		return;
	pfd.revents = 0;
	n = poll(&pfd, 1, 300);
	check(n == 0, "b: no event on the channel for a completion while the CQ was not armed (poll returned %d)", n);
	if (n == 1 && ibv_get_cq_event(ch, &cq, &ctx) == 0)
		ibv_ack_cq_events(p->cq_b, 1);
}

void part_events(struct dev *d)
{
	static int marker;
	struct ibv_comp_channel *ch;
	struct pair_opts o = { .sq = 16, .rq = 16, .sge = 1, .min_rnr_timer = 12, .rnr_retry = 7, .cq_b_ctx = &marker };
	struct pair p;
	struct ibv_mr *smr = NULL, *rmr = NULL;
	void *sbuf = malloc(BUF), *rbuf = malloc(BUF);
	unsigned int unacked = 0;
	int rc;

	errno = 0;
	ch = ibv_create_comp_channel(d->ctx);
	if (!ch) {
		fail("b: ibv_create_comp_channel: %s", strerror(errno));
		goto out_buf;
	}
	o.ch_b = ch;
	if (pair_open(d, &p, &o))
		goto out_ch;
	smr = ibv_reg_mr(d->pd, sbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
	rmr = ibv_reg_mr(d->pd, rbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
	if (!smr || !rmr) {
		fail("b: ibv_reg_mr: %s", strerror(errno));
		goto out_pair;
	}
	for (int r = 0; r < ROUNDS; r++) {
		if (blocked_round(&p, ch, &marker, smr, rmr, r, &unacked))
			break;
		/* Rounds 1 and 2 are acknowledged together. */
		if (r != 1) {
			ibv_ack_cq_events(p.cq_b, unacked);
			unacked = 0;
		}
	}
	if (unacked)
		ibv_ack_cq_events(p.cq_b, unacked);
	nonblocking_checks(&p, ch, &marker, smr, rmr);
out_pair:
	if (smr)
		ibv_dereg_mr(smr);
	if (rmr)
		ibv_dereg_mr(rmr);
	pair_destroy(&p);
out_ch:
	rc = ibv_destroy_comp_channel(ch);
	check(rc == 0, "b: ibv_destroy_comp_channel after its CQ is destroyed and every event acknowledged (%s)",
	      strerror(rc));
out_buf:
	free(sbuf);
	free(rbuf);
}
