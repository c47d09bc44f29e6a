/*
 * Part c: the program's own memory. malloc'ed, stack and mmap'ed buffers registered at odd
 * addresses with odd lengths (one crossing two page boundaries) are used as SGEs of SENDs/RECVs,
 * RDMA WRITEs and READs, with one SGE and with several; every byte of each target buffer is checked,
 * including the guard bytes around what was written. MRs from ibv_reg_mr_iova2 and ibv_reg_mr_iova
 * with an iova different from the address are the remote addresses of a WRITE and a READ.
 */
#include "abi_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define GUARD 0xa5
#define RAW_MAX (3 * 4096)
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* Three SGEs for the gather/scatter transfers. */
static const struct pair_opts mem_opts = { .sq = 16, .rq = 16, .sge = 3, .min_rnr_timer = 12, .rnr_retry = 7 };

/* A registered region: `len` bytes at raw + off; remote addresses are iova + offset. */
struct buf {
	const char *name;
	unsigned char *raw;
	size_t raw_len, off, len;
	uint64_t iova;
	uint64_t seed; /* pattern of a source buffer */
	struct ibv_mr *mr;
};

/* `len` bytes at offset `off` of a buffer's region. */
struct seg {
	struct buf *b;
	size_t off, len;
};

static unsigned char *region(const struct buf *b)
{
	return b->raw + b->off;
}

static int reg(struct dev *d, struct buf *b)
{
	errno = 0;
	b->mr = ibv_reg_mr(d->pd, region(b), b->len, ACCESS);
	if (!check(b->mr && b->mr->addr == region(b) && b->mr->length == b->len && b->mr->pd == d->pd &&
			   b->mr->context == d->ctx,
		   "c: ibv_reg_mr(%s + %zu, %zu bytes) (%s)", b->name, b->off, b->len,
		   b->mr ? "addr, length, pd and context as given" : strerror(errno)))
		return -1;
	b->iova = (uintptr_t)region(b);
	return 0;
}

/* What the scattered bytes of a transfer must look like in buffer b: guard bytes elsewhere. */
static void expected_image(unsigned char *img, const struct buf *b, const struct seg *src, int nsrc,
			   const struct seg *dst, int ndst)
{
	int si = 0;
	size_t spos = 0;

	memset(img, GUARD, b->raw_len);
	for (int di = 0; di < ndst && si < nsrc; di++) {
		for (size_t k = 0; k < dst[di].len && si < nsrc; k++) {
			if (dst[di].b == b) {
				const struct seg *s = &src[si];

				img[b->off + dst[di].off + k] = pat(s->b->seed, s->off + spos);
			}
			if (++spos == src[si].len) {
				si++;
				spos = 0;
			}
		}
	}
}

/*
 * One transfer on QP A: SEND gathers src into the receive posted on B with dst as its SGEs; WRITE
 * gathers src into the remote dst[0]; READ scatters the remote src[0] into the local dst.
 */
static int xfer_once(struct pair *p, const char *label, enum ibv_wr_opcode op, const struct seg *src, int nsrc,
		     const struct seg *dst, int ndst)
{
	static unsigned char img[RAW_MAX];
	struct ibv_sge lsge[4], rsge[4];
	const struct seg *local = op == IBV_WR_RDMA_READ ? dst : src;
	const struct seg *remote = op == IBV_WR_RDMA_READ ? src : dst;
	int nlocal = op == IBV_WR_RDMA_READ ? ndst : nsrc;
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;
	size_t total = 0;
	int rc, r;

	for (int i = 0; i < ndst; i++)
		memset(dst[i].b->raw, GUARD, dst[i].b->raw_len);
	for (int i = 0; i < nsrc; i++)
		total += src[i].len;
	for (int i = 0; i < nlocal; i++) {
		lsge[i].addr = (uintptr_t)(region(local[i].b) + local[i].off);
		lsge[i].length = (uint32_t)local[i].len;
		lsge[i].lkey = local[i].b->mr->lkey;
	}
	if (op == IBV_WR_SEND) {
		struct ibv_recv_wr rwr, *rbad = NULL;

		for (int i = 0; i < ndst; i++) {
			rsge[i].addr = (uintptr_t)(region(dst[i].b) + dst[i].off);
			rsge[i].length = (uint32_t)dst[i].len;
			rsge[i].lkey = dst[i].b->mr->lkey;
		}
		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = 7;
		rwr.sg_list = rsge;
		rwr.num_sge = ndst;
		rc = ibv_post_recv(p->b, &rwr, &rbad);
		if (rc) {
			fail("c: %s: ibv_post_recv: %s", label, strerror(rc));
			return -1;
		}
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 9;
	wr.sg_list = lsge;
	wr.num_sge = nlocal;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op != IBV_WR_SEND) {
		wr.wr.rdma.remote_addr = remote[0].b->iova + remote[0].off;
		wr.wr.rdma.rkey = remote[0].b->mr->rkey;
	}
	rc = ibv_post_send(p->a, &wr, &bad);
	if (rc) {
		fail("c: %s: ibv_post_send: %s", label, strerror(rc));
		return -1;
	}
	r = poll_wc(p->cq_a, &wc, 5000);
	if (r != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != 9) {
		fail("c: %s: send-side completion: %s", label,
		     r == 1 ? ibv_wc_status_str(wc.status) : r == 0 ? "none within 5 s" : "ibv_poll_cq failed");
		return -1;
	}
	if (op == IBV_WR_SEND) {
		r = poll_wc(p->cq_b, &wc, 5000);
		if (r != 1 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != total) {
			fail("c: %s: receive completion: %s, byte_len %u (expected %zu)", label,
			     r == 1 ? ibv_wc_status_str(wc.status) : r == 0 ? "none within 5 s" : "ibv_poll_cq failed",
			     r == 1 ? wc.byte_len : 0, total);
			return -1;
		}
	}
	for (int i = 0; i < ndst; i++) {
		const struct buf *b = dst[i].b;
		size_t k;

		expected_image(img, b, src, nsrc, dst, ndst);
		for (k = 0; k < b->raw_len && b->raw[k] == img[k]; k++)
			;
		if (k < b->raw_len) {
			long rel = (long)k - (long)b->off;

			fail("c: %s: %s byte %ld of the region (%s) is 0x%02x, expected 0x%02x", label, b->name, rel,
			     rel < 0 || (size_t)rel >= b->len ? "a guard byte outside it" : "inside it", b->raw[k],
			     img[k]);
			return -1;
		}
	}
	ok("c: %s: %zu bytes, every byte of the target and its guard bytes checked", label, total);
	return 0;
}

/* xfer_once; after a failure the pair is replaced, so that the next transfer starts clean. */
static void xfer(struct dev *d, struct pair *p, const char *label, enum ibv_wr_opcode op, const struct seg *src,
		 int nsrc, const struct seg *dst, int ndst)
{
	if (p->a && xfer_once(p, label, op, src, nsrc, dst, ndst) == 0)
		return;
	if (!p->a)
		fail("c: %s: not run (no QP pair)", label);
	pair_destroy(p);
	pair_open(d, p, &mem_opts);
}

static void *map3(void)
{
	void *p = mmap(NULL, RAW_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void part_memory(struct dev *d)
{
	unsigned char stack_src_raw[8192], stack_dst_raw[8192];
	struct buf hs = { "malloc src", malloc(8192), 8192, 3, 4093, 0, 11, NULL };
	struct buf hd = { "malloc dst", malloc(8192), 8192, 1, 4093, 0, 0, NULL };
	struct buf ss = { "stack src", stack_src_raw, 8192, 5, 3001, 0, 12, NULL };
	struct buf sd = { "stack dst", stack_dst_raw, 8192, 7, 4201, 0, 0, NULL };
	struct buf ms = { "mmap src", map3(), RAW_MAX, 4089, 4111, 0, 13, NULL };
	struct buf md = { "mmap dst", map3(), RAW_MAX, 4095, 4099, 0, 0, NULL };
	struct buf is = { "iova src", malloc(8192), 8192, 9, 5000, 0, 14, NULL };
	struct buf id = { "iova dst", malloc(8192), 8192, 11, 5000, 0, 0, NULL };
	struct buf *all[] = { &hs, &hd, &ss, &sd, &ms, &md, &is, &id };
	struct buf *srcs[] = { &hs, &ss, &ms, &is };
	struct pair p;
	int have_pair = 0;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (!all[i]->raw) {
			fail("c: allocating %s", all[i]->name);
			goto out;
		}
		memset(all[i]->raw, GUARD, all[i]->raw_len);
	}
	for (size_t i = 0; i < sizeof(srcs) / sizeof(srcs[0]); i++)
		fill_pat(region(srcs[i]), srcs[i]->len, srcs[i]->seed);
	for (size_t i = 0; i < 6; i++)
		if (reg(d, all[i]))
			goto out;

	/* iova MRs: same page offset as the address (as the kernel requires), far from it. */
	{
		uint64_t iova_s = 0x200000000000ull + ((uintptr_t)region(&is) & 4095);
		uint64_t iova_d = 0x300000000000ull + ((uintptr_t)region(&id) & 4095);

		errno = 0;
		is.mr = ibv_reg_mr_iova(d->pd, region(&is), is.len, iova_s, ACCESS);
		if (!check(is.mr && is.mr->addr == region(&is) && is.mr->length == is.len,
			   "c: ibv_reg_mr_iova(malloc + 9, 5000 bytes, iova 0x%llx) (%s)", (unsigned long long)iova_s,
			   is.mr ? "addr and length as given" : strerror(errno)))
			goto out;
		is.iova = iova_s;
		errno = 0;
		id.mr = ibv_reg_mr_iova2(d->pd, region(&id), id.len, iova_d, ACCESS);
		if (!check(id.mr && id.mr->addr == region(&id) && id.mr->length == id.len,
			   "c: ibv_reg_mr_iova2(malloc + 11, 5000 bytes, iova 0x%llx) (%s)", (unsigned long long)iova_d,
			   id.mr ? "addr and length as given" : strerror(errno)))
			goto out;
		id.iova = iova_d;
	}

	if (pair_open(d, &p, &mem_opts))
		goto out;
	have_pair = 1;

	{
		struct seg s1[] = { { &hs, 0, 4093 } }, d1[] = { { &md, 0, 4099 } };
		struct seg s2[] = { { &ms, 0, 4111 } }, d2[] = { { &sd, 0, 4201 } };
		struct seg s3[] = { { &ss, 0, 3001 } }, d3[] = { { &hd, 0, 4093 } };

		xfer(d, &p, "SEND malloc+3 (4093) -> RECV mmap+4095 (across pages)", IBV_WR_SEND, s1, 1, d1, 1);
		xfer(d, &p, "SEND mmap+4089 (4111, across 2 page boundaries) -> RECV stack+7", IBV_WR_SEND, s2, 1, d2, 1);
		xfer(d, &p, "SEND stack+5 (3001) -> RECV malloc+1", IBV_WR_SEND, s3, 1, d3, 1);
	}
	{
		struct seg s1[] = { { &ss, 0, 3001 } }, d1[] = { { &hd, 17, 3001 } };
		struct seg s2[] = { { &ms, 1, 4110 } }, d2[] = { { &sd, 91, 4110 } };
		struct seg s3[] = { { &hs, 0, 4093 } }, d3[] = { { &md, 6, 4093 } };

		xfer(d, &p, "WRITE stack+5 (3001) -> malloc+1 at offset 17", IBV_WR_RDMA_WRITE, s1, 1, d1, 1);
		xfer(d, &p, "WRITE mmap+4090 (4110) -> stack+7 at offset 91", IBV_WR_RDMA_WRITE, s2, 1, d2, 1);
		xfer(d, &p, "WRITE malloc+3 (4093) -> mmap+4095 at offset 6", IBV_WR_RDMA_WRITE, s3, 1, d3, 1);
	}
	{
		struct seg s1[] = { { &ms, 11, 4000 } }, d1[] = { { &hd, 93, 4000 } };
		struct seg s2[] = { { &hs, 0, 4093 } }, d2[] = { { &md, 0, 4093 } };
		struct seg s3[] = { { &ss, 0, 3001 } }, d3[] = { { &sd, 1, 3001 } };

		xfer(d, &p, "READ mmap+4089 at offset 11 (4000) -> malloc+1 at offset 93", IBV_WR_RDMA_READ, s1, 1, d1, 1);
		xfer(d, &p, "READ malloc+3 (4093) -> mmap+4095", IBV_WR_RDMA_READ, s2, 1, d2, 1);
		xfer(d, &p, "READ stack+5 (3001) -> stack+7 at offset 1", IBV_WR_RDMA_READ, s3, 1, d3, 1);
	}
	{
		struct seg s1[] = { { &hs, 1, 2000 }, { &ss, 7, 1 }, { &ms, 3000, 1111 } };
		struct seg d1[] = { { &hd, 2, 1000 }, { &md, 10, 4089 } };
		struct seg s2[] = { { &ss, 0, 1500 }, { &ms, 2000, 2111 } };
		struct seg d2[] = { { &hd, 3, 3611 } };
		struct seg s3[] = { { &ms, 0, 4111 } };
		struct seg d3[] = { { &hd, 0, 2000 }, { &sd, 100, 2111 } };

		xfer(d, &p, "SEND of 3 SGEs (malloc, stack, mmap) -> RECV of 2 SGEs (malloc, mmap)", IBV_WR_SEND, s1, 3, d1,
		     2);
		xfer(d, &p, "WRITE of 2 SGEs (stack, mmap) -> malloc+1 at offset 3", IBV_WR_RDMA_WRITE, s2, 2, d2, 1);
		xfer(d, &p, "READ mmap+4089 (4111) -> 2 SGEs (malloc, stack)", IBV_WR_RDMA_READ, s3, 1, d3, 2);
	}
	{
		struct seg s1[] = { { &hs, 0, 3000 } }, d1[] = { { &id, 7, 3000 } };
		struct seg s2[] = { { &is, 1000, 2000 } }, d2[] = { { &hd, 5, 2000 } };

		xfer(d, &p, "WRITE to an ibv_reg_mr_iova2 MR at iova + 7", IBV_WR_RDMA_WRITE, s1, 1, d1, 1);
		xfer(d, &p, "READ from an ibv_reg_mr_iova MR at iova + 1000", IBV_WR_RDMA_READ, s2, 1, d2, 1);
	}
	for (size_t i = 0; i < sizeof(srcs) / sizeof(srcs[0]); i++) {
		long at = find_pat_mismatch(region(srcs[i]), srcs[i]->len, srcs[i]->seed);

		check(at < 0, "c: %s unchanged by the transfers that read it (first changed byte %ld)", srcs[i]->name,
		      at);
	}
out:
	if (have_pair)
		pair_destroy(&p);
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (all[i]->mr) {
			int rc = ibv_dereg_mr(all[i]->mr);

			check(rc == 0, "c: ibv_dereg_mr(%s) (%s)", all[i]->name, strerror(rc));
		}
	}
	free(hs.raw);
	free(hd.raw);
	free(is.raw);
	free(id.raw);
	if (ms.raw)
		munmap(ms.raw, RAW_MAX);
	if (md.raw)
		munmap(md.raw, RAW_MAX);
}
