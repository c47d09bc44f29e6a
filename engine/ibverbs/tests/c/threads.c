/*
 * Part a: posting and polling from two threads at once. The sender thread posts, on QP A, an
 * unsignaled RDMA WRITE into a slot of B's ring followed by a signaled SEND, and polls A's CQ; the
 * receiver thread polls B's CQ, checks every byte of each received message and of the slot the
 * WRITE filled (RC ordering places the WRITE before the SEND completes), and reposts the receive.
 * Meanwhile the main thread calls control verbs (reg/dereg MR, query QP and port). Credits (the
 * count of checked messages) keep the sender within the posted receives and the free slots.
 */
#include "abi_check.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 32u
#define MAX_LEN 16384u
#define SLOT_SZ (MAX_LEN + 128u)
#define FILL 0x5c
#define GRACE_S 20.0

static const uint32_t lens[] = { 1, 8, 100, 1023, 1024, 1025, 4095, 4096, 4097, 9000, 16384, 3, 777, 2048 };
#define NLENS (sizeof(lens) / sizeof(lens[0]))

struct shared {
	struct pair p;
	unsigned char *send_buf, *wsrc_buf, *recv_buf, *wdst_buf;
	struct ibv_mr *send_mr, *wsrc_mr, *recv_mr, *wdst_mr;
	double end;
	atomic_uint_fast64_t checked; /* messages the receiver has verified and reposted */
	atomic_uint_fast64_t posted;  /* messages the sender posted, final once sender_done */
	atomic_int sender_done, stop;
	uint64_t bytes; /* checked by the receiver (SEND + WRITE payloads) */
};

static uint32_t send_len(uint64_t seq)
{
	return lens[seq % NLENS];
}

static uint32_t write_len(uint64_t seq)
{
	return lens[(seq * 5 + 3) % NLENS];
}

static uint32_t write_off(uint64_t seq)
{
	return (uint32_t)(seq % 61);
}

static void stop_all(struct shared *s)
{
	atomic_store(&s->stop, 1);
}

static int post_message(struct shared *s, uint64_t seq)
{
	size_t slot = (size_t)(seq % SLOTS) * SLOT_SZ;
	uint32_t len = send_len(seq), wlen = write_len(seq);
	struct ibv_sge wsge = { (uintptr_t)(s->wsrc_buf + slot), wlen, s->wsrc_mr->lkey };
	struct ibv_sge ssge = { (uintptr_t)(s->send_buf + slot), len, s->send_mr->lkey };
	struct ibv_send_wr wr[2], *bad = NULL;
	int rc;

	fill_pat(s->wsrc_buf + slot, wlen, seq * 2 + 1);
	fill_pat(s->send_buf + slot, len, seq * 2);
	memset(wr, 0, sizeof(wr));
	wr[0].wr_id = seq | (1ull << 63);
	wr[0].sg_list = &wsge;
	wr[0].num_sge = 1;
	wr[0].opcode = IBV_WR_RDMA_WRITE;
	wr[0].wr.rdma.remote_addr = (uintptr_t)(s->wdst_buf + slot + write_off(seq));
	wr[0].wr.rdma.rkey = s->wdst_mr->rkey;
	wr[0].next = &wr[1];
	wr[1].wr_id = seq;
	wr[1].sg_list = &ssge;
	wr[1].num_sge = 1;
	wr[1].opcode = IBV_WR_SEND;
	wr[1].send_flags = IBV_SEND_SIGNALED;
	rc = ibv_post_send(s->p.a, &wr[0], &bad);
	if (rc) {
		fail("a: sender: ibv_post_send(WRITE+SEND, message %llu): %s (bad_wr %s)", (unsigned long long)seq,
		     strerror(rc), bad == &wr[0] ? "the WRITE" : bad == &wr[1] ? "the SEND" : "not in the list");
		return -1;
	}
	return 0;
}

static void *sender(void *arg)
{
	struct shared *s = arg;
	uint64_t seq = 0, done = 0;
	struct ibv_wc wc[16];

	while (!atomic_load(&s->stop)) {
		int n = ibv_poll_cq(s->p.cq_a, 16, wc);
		double t;

		if (n < 0) {
			fail("a: sender: ibv_poll_cq returned %d", n);
			stop_all(s);
			break;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_SEND || wc[i].wr_id != done ||
			    wc[i].qp_num != s->p.a->qp_num) {
				fail("a: sender: completion %llu: status %s, opcode %d, wr_id %llu, qp_num %u "
				     "(expected SUCCESS, SEND, wr_id %llu, qp_num %u)",
				     (unsigned long long)done, ibv_wc_status_str(wc[i].status), wc[i].opcode,
				     (unsigned long long)wc[i].wr_id, wc[i].qp_num, (unsigned long long)done,
				     s->p.a->qp_num);
				stop_all(s);
				break;
			}
			done++;
		}
		t = now();
		if (t >= s->end) {
			if (done == seq)
				break;
			if (t > s->end + GRACE_S) {
				fail("a: sender: %llu of %llu SENDs still without a completion %.0f s after the end",
				     (unsigned long long)(seq - done), (unsigned long long)seq, GRACE_S);
				stop_all(s);
				break;
			}
			sched_yield();
			continue;
		}
		if (seq - done < SLOTS && seq - atomic_load(&s->checked) < SLOTS) {
			if (post_message(s, seq)) {
				stop_all(s);
				break;
			}
			seq++;
		} else if (n == 0) {
			sched_yield();
		}
	}
	atomic_store(&s->posted, seq);
	atomic_store(&s->sender_done, 1);
	return NULL;
}

/* Checks message seq (received into slot seq % SLOTS), then refills its buffers. */
static int check_message(struct shared *s, uint64_t seq, const struct ibv_wc *wc)
{
	size_t slot = (size_t)(seq % SLOTS) * SLOT_SZ;
	uint32_t len = send_len(seq), wlen = write_len(seq), woff = write_off(seq);
	unsigned char *r = s->recv_buf + slot, *w = s->wdst_buf + slot;
	long at;

	if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV || wc->wr_id != seq % SLOTS ||
	    wc->byte_len != len || wc->qp_num != s->p.b->qp_num) {
		fail("a: receiver: message %llu: status %s, opcode %d, wr_id %llu, byte_len %u, qp_num %u "
		     "(expected SUCCESS, RECV, wr_id %llu, byte_len %u, qp_num %u)",
		     (unsigned long long)seq, ibv_wc_status_str(wc->status), wc->opcode,
		     (unsigned long long)wc->wr_id, wc->byte_len, wc->qp_num, (unsigned long long)(seq % SLOTS), len,
		     s->p.b->qp_num);
		return -1;
	}
	if ((at = find_pat_mismatch(r, len, seq * 2)) >= 0) {
		fail("a: receiver: message %llu (%u bytes): byte %ld is 0x%02x, expected 0x%02x",
		     (unsigned long long)seq, len, at, r[at], pat(seq * 2, (size_t)at));
		return -1;
	}
	if ((at = find_byte_mismatch(r + len, SLOT_SZ - len, FILL)) >= 0) {
		fail("a: receiver: message %llu (%u bytes): receive buffer changed after its end, at byte %ld",
		     (unsigned long long)seq, len, (long)len + at);
		return -1;
	}
	if ((at = find_byte_mismatch(w, woff, FILL)) >= 0) {
		fail("a: receiver: WRITE of message %llu: slot changed before offset %u, at byte %ld",
		     (unsigned long long)seq, woff, at);
		return -1;
	}
	if ((at = find_pat_mismatch(w + woff, wlen, seq * 2 + 1)) >= 0) {
		fail("a: receiver: WRITE of message %llu (%u bytes at offset %u): byte %ld is 0x%02x, expected "
		     "0x%02x (the WRITE has not landed before the SEND after it completed, or is wrong)",
		     (unsigned long long)seq, wlen, woff, at, w[woff + at], pat(seq * 2 + 1, (size_t)at));
		return -1;
	}
	if ((at = find_byte_mismatch(w + woff + wlen, SLOT_SZ - woff - wlen, FILL)) >= 0) {
		fail("a: receiver: WRITE of message %llu (%u bytes at offset %u): slot changed after it, at byte "
		     "%ld",
		     (unsigned long long)seq, wlen, woff, (long)(woff + wlen) + at);
		return -1;
	}
	memset(r, FILL, len);
	memset(w + woff, FILL, wlen);
	s->bytes += len + wlen;
	return 0;
}

static void *receiver(void *arg)
{
	struct shared *s = arg;
	uint64_t seq = 0;
	struct ibv_wc wc[16];

	while (!atomic_load(&s->stop)) {
		int n = ibv_poll_cq(s->p.cq_b, 16, wc);

		if (n < 0) {
			fail("a: receiver: ibv_poll_cq returned %d", n);
			stop_all(s);
			break;
		}
		for (int i = 0; i < n; i++) {
			size_t slot = (size_t)(seq % SLOTS);
			int rc;

			if (check_message(s, seq, &wc[i])) {
				stop_all(s);
				return NULL;
			}
			rc = post_recv_one(s->p.b, s->recv_buf + slot * SLOT_SZ, SLOT_SZ, s->recv_mr->lkey, slot);
			if (rc) {
				fail("a: receiver: ibv_post_recv after message %llu: %s", (unsigned long long)seq,
				     strerror(rc));
				stop_all(s);
				return NULL;
			}
			seq++;
			atomic_store(&s->checked, seq);
		}
		if (n == 0) {
			if (atomic_load(&s->sender_done) && seq == atomic_load(&s->posted))
				break;
			if (now() > s->end + GRACE_S) {
				fail("a: receiver: %llu messages checked, the rest missing %.0f s after the end",
				     (unsigned long long)seq, GRACE_S);
				stop_all(s);
				break;
			}
			sched_yield();
		}
	}
	return NULL;
}

static struct ibv_mr *reg(struct dev *d, void *p, size_t len, const char *what)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(d->pd, p, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		fail("a: ibv_reg_mr(%s, %zu bytes): %s", what, len, strerror(errno));
	return mr;
}

/* Control verbs on the main thread while the two others post and poll. */
static void control_loop(struct dev *d, struct shared *s, unsigned long *ops)
{
	unsigned char scratch[4096 + 7];
	struct ibv_port_attr port;

	while (!atomic_load(&s->sender_done) && !atomic_load(&s->stop)) {
		struct ibv_mr *mr;
		int st, rc;

		errno = 0;
		mr = ibv_reg_mr(d->pd, scratch + 7, 4096, IBV_ACCESS_LOCAL_WRITE);
		if (!mr) {
			fail("a: control thread: ibv_reg_mr during traffic: %s", strerror(errno));
			stop_all(s);
			return;
		}
		rc = ibv_dereg_mr(mr);
		if (rc) {
			fail("a: control thread: ibv_dereg_mr during traffic: %s", strerror(rc));
			stop_all(s);
			return;
		}
		if ((st = qp_state(s->p.a)) != IBV_QPS_RTS || (st = qp_state(s->p.b)) != IBV_QPS_RTS) {
			fail("a: control thread: ibv_query_qp during traffic: state %d, expected RTS", st);
			stop_all(s);
			return;
		}
		rc = ibv_query_port(d->ctx, 1, &port);
		if (rc || port.state != IBV_PORT_ACTIVE) {
			fail("a: control thread: ibv_query_port during traffic: rc %d, state %d", rc, port.state);
			stop_all(s);
			return;
		}
		*ops += 4;
		sleep_ms(2);
	}
}

void part_threads(struct dev *d, int seconds)
{
	struct pair_opts o = { .sq = 2 * SLOTS, .rq = SLOTS, .sge = 1, .min_rnr_timer = 12, .rnr_retry = 7 };
	size_t total = (size_t)SLOTS * SLOT_SZ;
	struct shared *s = calloc(1, sizeof(*s));
	pthread_t ts, tr;
	unsigned long ops = 0;
	double t0, t1;
	uint64_t msgs;

	if (!s) {
		fail("a: calloc");
		return;
	}
	s->send_buf = malloc(total);
	s->wsrc_buf = malloc(total);
	s->recv_buf = malloc(total);
	s->wdst_buf = malloc(total);
	if (!s->send_buf || !s->wsrc_buf || !s->recv_buf || !s->wdst_buf) {
		fail("a: malloc");
		goto out_free;
	}
	memset(s->recv_buf, FILL, total);
	memset(s->wdst_buf, FILL, total);
	if (!(s->send_mr = reg(d, s->send_buf, total, "send buffers")) ||
	    !(s->wsrc_mr = reg(d, s->wsrc_buf, total, "WRITE sources")) ||
	    !(s->recv_mr = reg(d, s->recv_buf, total, "receive buffers")) ||
	    !(s->wdst_mr = reg(d, s->wdst_buf, total, "WRITE targets")))
		goto out_mr;
	if (pair_open(d, &s->p, &o))
		goto out_mr;
	for (uint32_t i = 0; i < SLOTS; i++) {
		int rc = post_recv_one(s->p.b, s->recv_buf + (size_t)i * SLOT_SZ, SLOT_SZ, s->recv_mr->lkey, i);

		if (rc) {
			fail("a: ibv_post_recv (initial %u of %u): %s", i, SLOTS, strerror(rc));
			goto out_pair;
		}
	}
	t0 = now();
	s->end = t0 + seconds;
	if (pthread_create(&tr, NULL, receiver, s)) {
		fail("a: pthread_create");
		goto out_pair;
	}
	if (pthread_create(&ts, NULL, sender, s)) {
		fail("a: pthread_create");
		stop_all(s);
		pthread_join(tr, NULL);
		goto out_pair;
	}
	control_loop(d, s, &ops);
	pthread_join(ts, NULL);
	pthread_join(tr, NULL);
	t1 = now();
	msgs = atomic_load(&s->checked);
	if (!atomic_load(&s->stop)) {
		check(msgs >= 100,
		      "a: two threads posting (WRITE+SEND on QP %u) and polling (receives on QP %u) for %d s: %llu "
		      "messages, %.1f MB checked byte for byte (%.1f MB/s; first PSNs just below the 2^24 wrap), "
		      "%lu control verbs on a third thread meanwhile",
		      s->p.a->qp_num, s->p.b->qp_num, seconds, (unsigned long long)msgs, s->bytes / 1e6,
		      s->bytes / 1e6 / (t1 - t0), ops);
	} else {
		fail("a: stopped after %llu checked messages (see above)", (unsigned long long)msgs);
	}
out_pair:
	pair_destroy(&s->p);
out_mr:
	if (s->send_mr)
		ibv_dereg_mr(s->send_mr);
	if (s->wsrc_mr)
		ibv_dereg_mr(s->wsrc_mr);
	if (s->recv_mr)
		ibv_dereg_mr(s->recv_mr);
	if (s->wdst_mr)
		ibv_dereg_mr(s->wdst_mr);
out_free:
	free(s->send_buf);
	free(s->wsrc_buf);
	free(s->recv_buf);
	free(s->wdst_buf);
	free(s);
}
