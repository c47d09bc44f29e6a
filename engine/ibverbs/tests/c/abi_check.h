/*
 * Declarations shared by the parts of abi_check: a C program built against the stock
 * libibverbs headers (rdma-core 44) that exercises what the Debian tools do not. It opens the
 * first device, connects RC QPs of that device to each other through GID index 1 and checks
 * threads (part a), completion events (part b), registration of the program's own memory
 * (part c), misuse (part d), the ibv_wr_* send API (part e), the attributes middleware
 * relies on (part f), one rdma_cm ID used from several threads (part g), ibv_resize_cq and
 * the extended CQ of ibv_create_cq_ex (part h), and ibv_rereg_mr, on-demand paging and
 * ibv_advise_mr (part i), and what rdma-core's own test suite checks (part j). Every check prints one "ok: ..." or "FAIL: ..." line.
 */
#ifndef ABI_CHECK_H
#define ABI_CHECK_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

/* The opened device: context, one PD and what was queried at start. */
struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	union ibv_gid gid; /* GID index 1, the IPv4-mapped RoCEv2 GID */
};

/* How a pair of QPs is created: queue depths, SGEs, the RNR settings, B's CQ channel. */
struct pair_opts {
	uint32_t sq, rq, sge;
	uint8_t min_rnr_timer; /* B's (and A's) minimum RNR NAK timer (IB encoding) */
	uint8_t rnr_retry;     /* 7 = retry forever */
	struct ibv_comp_channel *ch_b; /* completion channel of B's CQ, or NULL */
	void *cq_b_ctx;                /* cq_context of B's CQ */
};

/* Two RC QPs of the same device, each with one CQ for its sends and receives. */
struct pair {
	struct ibv_cq *cq_a, *cq_b;
	struct ibv_qp *a, *b;
	struct ibv_qp_cap cap_a, cap_b; /* as returned by ibv_create_qp */
};

/* Reporting: one line per check; the failure count decides the exit status. */
void ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int failures(void);

/* Seconds on the monotonic clock. */
double now(void);
void sleep_ms(int ms);

/* The byte at offset i of the pattern `seed`: distinct for each seed and for shifted offsets. */
static inline uint8_t pat(uint64_t seed, size_t i)
{
	uint32_t x = (uint32_t)i + (uint32_t)seed * 2654435761u + (uint32_t)(seed >> 32);
	return (uint8_t)(x ^ (x >> 8) ^ (x >> 16) ^ (x >> 24));
}
void fill_pat(unsigned char *p, size_t len, uint64_t seed);
/* Offset of the first byte that differs from the pattern, or -1. */
long find_pat_mismatch(const unsigned char *p, size_t len, uint64_t seed);
/* Offset of the first byte that is not `b`, or -1. */
long find_byte_mismatch(const unsigned char *p, size_t len, unsigned char b);

/* Opens the first device of ibv_get_device_list, queries it and allocates the PD. */
int dev_open(struct dev *d);
void dev_close(struct dev *d);

/* CQs and QPs of a pair in RESET; pair_connect brings both to RTS, connected to each other. */
int pair_create(struct dev *d, struct pair *p, const struct pair_opts *o);
int qp_to_init(struct ibv_qp *qp);
int qp_to_rtr(struct dev *d, struct ibv_qp *qp, uint32_t dest_qpn, uint8_t min_rnr_timer);
int qp_to_rts(struct ibv_qp *qp, uint8_t rnr_retry);
int pair_connect(struct dev *d, struct pair *p, const struct pair_opts *o);
int pair_open(struct dev *d, struct pair *p, const struct pair_opts *o); /* create + connect */
void pair_destroy(struct pair *p);
/* The QP's state from ibv_query_qp, or -1. */
int qp_state(struct ibv_qp *qp);

/* Polls one completion: 1 = got one, 0 = none within timeout_ms, -1 = ibv_poll_cq failed. */
int poll_wc(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms);

/* Posts one signaled work request with one SGE; returns ibv_post_send's result. */
int post_one(struct ibv_qp *qp, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
	     uint64_t raddr, uint32_t rkey, uint64_t wr_id);
/* Posts one receive with one SGE; returns ibv_post_recv's result. */
int post_recv_one(struct ibv_qp *qp, void *addr, uint32_t len, uint32_t lkey, uint64_t wr_id);

/* The parts; each returns after printing its checks. */
void part_threads(struct dev *d, int seconds);
void part_events(struct dev *d);
void part_memory(struct dev *d);
void part_misuse(struct dev *d);
void part_wr_api(struct dev *d);
void part_middleware(struct dev *d);
void part_cm_threads(struct dev *d);
void part_cq_ex(struct dev *d);
void part_rereg(struct dev *d);
void part_suite(struct dev *d);

#endif
