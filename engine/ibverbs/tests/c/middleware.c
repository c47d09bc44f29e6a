/*
 * Part f: the attributes middleware (UCX, libfabric's verbs provider) passes and expects:
 * errno set on every failure, flow labels masked to 20 bits, a usable GID 0 (the IPv4 GID, as
 * GID 1), an address handle to the device's own GID, and UD receives carrying the GRH
 * area (IPv4 header at offset 20, its destination the device's address), IBV_WC_GRH, src_qp and
 * the L3 header type in sl (2: IPv4) as ConnectX reports it.
 */
#include "abi_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QKEY 0x11111111u

static void errno_on_failures(struct dev *d)
{
	struct ibv_port_attr pa;
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct ibv_cq *cq = ibv_create_cq(d->ctx, 4, NULL, NULL, 0);
	struct ibv_qp *qp;
	int rc;

	errno = 0;
	rc = ibv_query_port(d->ctx, 2, &pa);
	check(rc == EINVAL && errno == EINVAL, "errno: ibv_query_port(port 2) = %d, errno %d (want EINVAL both)", rc,
	      errno);
	if (!cq) {
		fail("errno: ibv_create_cq: %s", strerror(errno));
		return;
	}
	memset(&init, 0, sizeof(init));
	init.send_cq = init.recv_cq = cq;
	init.qp_type = IBV_QPT_RC;
	init.cap.max_send_wr = init.cap.max_recv_wr = 1;
	init.cap.max_send_sge = init.cap.max_recv_sge = 1;
	qp = ibv_create_qp(d->pd, &init);
	if (!qp) {
		fail("errno: ibv_create_qp: %s", strerror(errno));
		ibv_destroy_cq(cq);
		return;
	}
	/* RESET -> RTR skips INIT: refused, and errno says why (UCX prints %m). */
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	errno = 0;
	rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
	check(rc != 0 && errno == rc, "errno: ibv_modify_qp(RESET->RTR) = %d, errno %d (want equal, non-zero)", rc,
	      errno);
	/* A bad path MTU. */
	if (qp_to_init(qp) == 0) {
		attr.qp_state = IBV_QPS_RTR;
		attr.path_mtu = 9;
		errno = 0;
		rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PATH_MTU);
		check(rc == EINVAL && errno == EINVAL, "errno: ibv_modify_qp(path_mtu 9) = %d, errno %d", rc, errno);
	}
	errno = 0;
	rc = ibv_destroy_cq(cq);
	check(rc == EBUSY && errno == EBUSY, "errno: ibv_destroy_cq of a CQ in use = %d, errno %d (want EBUSY)", rc,
	      errno);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
}

static void gid_table(struct dev *d)
{
	union ibv_gid g;
	struct ibv_gid_entry e, table[4];
	ssize_t n;
	int rc;

	/* GID 0 is usable, not rxe's IPv6 link-local one: the same IPv4 RoCEv2 GID as index 1 (UCX
	 * refuses a port whose GID 0 is empty; libfabric's verbs provider takes index 0). */
	memset(&g, 0xaa, sizeof(g));
	rc = ibv_query_gid(d->ctx, 1, 0, &g);
	check(rc == 0 && !memcmp(&g, &d->gid, sizeof(g)), "gid: GID 0 is the IPv4 GID too (rc %d)", rc);
	for (int i = 0; i < 2; i++) {
		rc = ibv_query_gid_ex(d->ctx, 1, i, &e, 0);
		check(rc == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(&e.gid, &d->gid, sizeof(g)),
		      "gid: ibv_query_gid_ex(index %d) is the RoCEv2 IPv4 GID (rc %d)", i, rc);
	}
	n = ibv_query_gid_table(d->ctx, table, 4, 0);
	check(n == 2 && table[0].gid_index == 0 && table[1].gid_index == 1,
	      "gid: ibv_query_gid_table lists indexes 0 and 1 (got %zd)", n);
	errno = 0;
	rc = ibv_query_gid(d->ctx, 1, d->port.gid_tbl_len, &g);
	check(rc == -1 && errno == EINVAL, "gid: an index past the table is -1 with errno EINVAL (%d, %d)", rc, errno);
}

/* An AH to the device's own GID with UCX's flow label, and a UD SEND through it to a UD QP of the
 * same device: the receiver's GRH area and completion as UCX's UD transport checks them. */
static void ud_to_self(struct dev *d)
{
	struct ibv_cq *cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	struct ibv_ah_attr ah_attr;
	struct ibv_qp *tx = NULL, *rx = NULL;
	struct ibv_ah *ah = NULL;
	struct ibv_mr *mr = NULL;
	unsigned char *buf = calloc(1, 8192);
	struct ibv_wc wc;
	struct ibv_sge sge;
	struct ibv_send_wr swr, *bad;
	int rc;

	if (!cq || !buf) {
		fail("ud: setup: %s", strerror(errno));
		goto out;
	}
	mr = ibv_reg_mr(d->pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE);
	memset(&init, 0, sizeof(init));
	init.send_cq = init.recv_cq = cq;
	init.qp_type = IBV_QPT_UD;
	init.cap.max_send_wr = init.cap.max_recv_wr = 4;
	init.cap.max_send_sge = init.cap.max_recv_sge = 1;
	tx = ibv_create_qp(d->pd, &init);
	rx = ibv_create_qp(d->pd, &init);
	if (!mr || !tx || !rx) {
		fail("ud: setup: reg_mr/create_qp: %s", strerror(errno));
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		struct ibv_qp *qp = i ? rx : tx;

		memset(&attr, 0, sizeof(attr));
		attr.qp_state = IBV_QPS_INIT;
		attr.port_num = 1;
		attr.qkey = QKEY;
		rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
		attr.qp_state = IBV_QPS_RTR;
		rc = rc ? rc : ibv_modify_qp(qp, &attr, IBV_QP_STATE);
		attr.qp_state = IBV_QPS_RTS;
		rc = rc ? rc : ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
		if (rc) {
			fail("ud: setup: modify_qp: %s", strerror(rc));
			goto out;
		}
	}
	memset(&ah_attr, 0, sizeof(ah_attr));
	ah_attr.is_global = 1;
	ah_attr.port_num = 1;
	ah_attr.grh.dgid = d->gid;
	ah_attr.grh.sgid_index = 1;
	ah_attr.grh.hop_limit = 255;
	ah_attr.grh.flow_label = 0xffffffffu;
	/* DSCP 26 with ECT(0): the IPv4 TOS byte of the SEND, as rxe writes it. */
	ah_attr.grh.traffic_class = 0x6a;
	errno = 0;
	ah = ibv_create_ah(d->pd, &ah_attr);
	if (!check(ah != NULL, "ud: ibv_create_ah to the device's own GID, flow label 0xffffffff (%s)",
		   ah ? "made" : strerror(errno)))
		goto out;
	if (post_recv_one(rx, buf + 4096, 4096, mr->lkey, 1)) {
		fail("ud: post_recv failed");
		goto out;
	}
	memcpy(buf, "middleware", 11);
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 11, .lkey = mr->lkey };
	memset(&swr, 0, sizeof(swr));
	swr.wr_id = 2;
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qpn = rx->qp_num;
	swr.wr.ud.remote_qkey = QKEY;
	rc = ibv_post_send(tx, &swr, &bad);
	if (rc) {
		fail("ud: post_send: %s", strerror(rc));
		goto out;
	}
	for (int got = 0; got < 2;) {
		if (poll_wc(cq, &wc, 10000) != 1) {
			fail("ud: no completion within 10 s");
			goto out;
		}
		got++;
		if (wc.wr_id != 1)
			continue;
		{
			const unsigned char *grh = buf + 4096;
			struct in_addr dst, own;

			memcpy(&dst, grh + 36, 4);
			memcpy(&own, d->gid.raw + 12, 4);
			check(wc.status == IBV_WC_SUCCESS && wc.byte_len == 40 + 11 &&
				      !memcmp(grh + 40, "middleware", 11),
			      "ud: the SEND to self arrived (%s, %u bytes)", ibv_wc_status_str(wc.status), wc.byte_len);
			check(wc.wc_flags & IBV_WC_GRH, "ud: IBV_WC_GRH set");
			check(wc.src_qp == tx->qp_num, "ud: src_qp %u is the sender's %u", wc.src_qp, tx->qp_num);
			check((wc.sl & 7) == 2, "ud: sl %u says IPv4 (2)", wc.sl);
			check(grh[20] == 0x45 && dst.s_addr == own.s_addr,
			      "ud: GRH area: IPv4 header at offset 20 (0x%02x) whose destination is the device's address",
			      grh[20]);
			check(grh[21] == 0x6a,
			      "ud: GRH area: TOS 0x%02x is the AH's traffic class 0x6a (through the kernel: IP_TOS, IP_RECVTOS)",
			      grh[21]);
			{
				struct ibv_ah_attr back;

				memset(&back, 0, sizeof(back));
				rc = ibv_init_ah_from_wc(d->ctx, 1, &wc, (struct ibv_grh *)grh, &back);
				check(rc == 0 && back.grh.traffic_class == 0x6a,
				      "ud: ibv_init_ah_from_wc: traffic class 0x%02x (rc %d)", back.grh.traffic_class, rc);
			}
		}
	}
out:
	if (ah)
		ibv_destroy_ah(ah);
	if (tx)
		ibv_destroy_qp(tx);
	if (rx)
		ibv_destroy_qp(rx);
	if (mr)
		ibv_dereg_mr(mr);
	if (cq)
		ibv_destroy_cq(cq);
	free(buf);
}

/* RC with UCX's flow label 0xffffffff in the RTR address vector: accepted, and connected. */
static void rc_flow_label(struct dev *d)
{
	static const struct pair_opts o = { .sq = 4, .rq = 4, .sge = 1, .min_rnr_timer = 12, .rnr_retry = 7 };
	struct pair p;
	struct ibv_qp_attr attr, q;
	struct ibv_qp_init_attr qi;
	int rc;

	if (pair_create(d, &p, &o))
		return;
	if (qp_to_init(p.a) == 0) {
		memset(&attr, 0, sizeof(attr));
		attr.qp_state = IBV_QPS_RTR;
		attr.path_mtu = d->port.active_mtu;
		attr.dest_qp_num = p.b->qp_num;
		attr.max_dest_rd_atomic = 1;
		attr.min_rnr_timer = 12;
		attr.ah_attr.is_global = 1;
		attr.ah_attr.grh.dgid = d->gid;
		attr.ah_attr.grh.sgid_index = 1;
		attr.ah_attr.grh.hop_limit = 64;
		attr.ah_attr.grh.flow_label = 0xffffffffu;
		attr.ah_attr.port_num = 1;
		errno = 0;
		rc = ibv_modify_qp(p.a, &attr,
				   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
		check(rc == 0, "flow label: modify_qp to RTR with flow_label 0xffffffff (%s)", strerror(rc));
		if (rc == 0 && ibv_query_qp(p.a, &q, IBV_QP_AV, &qi) == 0)
			check(q.ah_attr.grh.flow_label == 0xfffff, "flow label: kept as 0x%x (want its 20 bits, 0xfffff)",
			      q.ah_attr.grh.flow_label);
	}
	pair_destroy(&p);
}

void part_middleware(struct dev *d)
{
	errno_on_failures(d);
	gid_table(d);
	rc_flow_label(d);
	ud_to_self(d);
}
