/* The verbs objects through rdma-core's own header (compiled against the system's
 * <infiniband/verbs.h>, linked against iwarpd's libibverbs.so.1): PD, MR on malloc'd
 * memory, completion channel, CQ, SRQ, RC QP create/modify/query/destroy, posts and polls
 * through the context's ops table, and the errors an iWARP provider gives.
 * Usage: verbs_objects (the first device). Prints "ok" and exits 0 when every check
 * passed; otherwise names the failed check on stderr and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#include "check.h"

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1, "device list %p, %d devices", (void *)list, n);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open %s", ibv_get_device_name(list[0]));
	CHECK(ctx->device->transport_type == IBV_TRANSPORT_IWARP, "transport %d",
	      ctx->device->transport_type);

	struct ibv_device_attr_ex dx;
	CHECK(ibv_query_device_ex(ctx, NULL, &dx) == 0, "query_device_ex");
	CHECK(dx.orig_attr.max_qp > 0 && dx.orig_attr.atomic_cap == IBV_ATOMIC_NONE,
	      "max_qp %d atomic_cap %d", dx.orig_attr.max_qp, dx.orig_attr.atomic_cap);
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0, "query_port 1");
	CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET, "link layer %d", pa.link_layer);
	CHECK(ibv_query_port(ctx, 2, &pa) == EINVAL, "query_port 2 must fail");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd && pd->context == ctx, "alloc_pd");

	size_t len = 3 * 4096 + 100;
	char *buf = malloc(len);
	CHECK(buf, "malloc");
	memset(buf, 0x5a, len);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf + 7, len - 7,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ);
	CHECK(mr, "reg_mr on malloc'd memory");
	CHECK(mr->addr == buf + 7 && mr->length == len - 7 && mr->pd == pd, "mr fields");
	CHECK(buf[100] == 0x5a && buf[len - 1] == 0x5a, "contents kept by the registration");
	CHECK(!ibv_reg_mr(pd, buf, 64, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL,
	      "REMOTE_WRITE without LOCAL_WRITE");
	CHECK(!ibv_reg_mr(pd, buf, 64, IBV_ACCESS_REMOTE_ATOMIC) && errno == EINVAL,
	      "REMOTE_ATOMIC without LOCAL_WRITE");
	{
		/* The atomic right is granted and has no effect (no atomics on iWARP). */
		struct ibv_mr *amr =
			ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
		CHECK(amr && ibv_dereg_mr(amr) == 0, "LOCAL_WRITE | REMOTE_ATOMIC");
	}
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd with an MR");

	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch && ch->fd >= 0, "create_comp_channel");
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, (void *)0x1234, ch, 0);
	CHECK(cq && cq->cqe >= 64 && cq->cq_context == (void *)0x1234 && cq->channel == ch,
	      "create_cq");
	CHECK(ibv_req_notify_cq(cq, 0) == 0, "req_notify_cq");
	struct ibv_wc wc[4];
	CHECK(ibv_poll_cq(cq, 4, wc) == 0, "poll an empty CQ");

	struct ibv_qp_init_attr ud = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	CHECK(!ibv_create_qp(pd, &ud) && errno == EOPNOTSUPP, "UD QP");

	struct ibv_qp_init_attr ia = { .qp_context = (void *)0x99, .send_cq = cq, .recv_cq = cq,
				       .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 16,
						.max_send_sge = 2, .max_recv_sge = 2 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "create RC QP");
	CHECK(qp->qp_context == (void *)0x99 && qp->qp_type == IBV_QPT_RC && qp->pd == pd &&
		      qp->state == IBV_QPS_RESET && qp->qp_num != 0,
	      "qp fields");
	CHECK(ia.cap.max_send_wr >= 16 && ia.cap.max_recv_sge >= 2, "caps written back");
	CHECK(ibv_destroy_cq(cq) == EBUSY, "destroy_cq with a QP");

	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT,
				  .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS) == 0, "to INIT");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) == 0, "query_qp");
	CHECK(qa.qp_state == IBV_QPS_INIT && qi.send_cq == cq && qi.qp_type == IBV_QPT_RC,
	      "query: state %d", qa.qp_state);

	/* Posts on an unconnected QP are queued (verbs: Idle accepts WRs). */
	struct ibv_sge sge = { .addr = (uintptr_t)buf + 64, .length = 256, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *rbad = NULL;
	CHECK(ibv_post_recv(qp, &rwr, &rbad) == 0, "post_recv");
	struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
			   *sbad = NULL;
	CHECK(ibv_post_send(qp, &swr, &sbad) == 0, "post_send");
	/* What iWARP lacks is refused, naming the WR. */
	struct ibv_send_wr imm = swr;
	imm.opcode = IBV_WR_SEND_WITH_IMM;
	struct ibv_send_wr atom = swr;
	atom.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	imm.next = &atom;
	CHECK(ibv_post_send(qp, &imm, &sbad) == EINVAL && sbad == &imm, "send with immediate");
	CHECK(ibv_post_send(qp, &atom, &sbad) == EINVAL && sbad == &atom, "atomic");
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(mw && mw->type == IBV_MW_TYPE_1, "alloc_mw (tests/c/mw.c does more)");
	CHECK(ibv_dealloc_mw(mw) == 0, "dealloc_mw");

	/* Error: the WRs flush. */
	at.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == 0, "to ERR");
	CHECK(qp->state == IBV_QPS_ERR, "state %d after ERR", qp->state);
	int got = 0;
	for (int i = 0; i < 2000000 && got < 2; i++) {
		int r = ibv_poll_cq(cq, 4 - got, wc + got);
		CHECK(r >= 0, "poll_cq %d", r);
		got += r;
	}
	CHECK(got == 2, "two flushed completions, got %d", got);
	for (int i = 0; i < 2; i++)
		CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].qp_num == qp->qp_num,
		      "wc %d: status %s qp %u", i, ibv_wc_status_str(wc[i].status), wc[i].qp_num);
	/* The armed CQ fired: its event comes through the channel's fd. */
	struct ibv_cq *ev_cq = NULL;
	void *ev_ctx = NULL;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0, "get_cq_event");
	CHECK(ev_cq == cq && ev_ctx == (void *)0x1234, "event for %p", (void *)ev_cq);
	ibv_ack_cq_events(cq, 1);
	int fl = fcntl(ch->fd, F_GETFL);
	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "nonblocking");
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1 && errno == EAGAIN, "no more events");

	/* A shared receive queue and a QP on it. */
	struct ibv_srq_init_attr si = { .srq_context = (void *)0x77,
					.attr = { .max_wr = 32, .max_sge = 2 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &si);
	CHECK(srq && srq->srq_context == (void *)0x77 && srq->pd == pd && si.attr.max_wr >= 32,
	      "create_srq");
	struct ibv_srq_attr sa;
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr >= 32 && sa.max_sge >= 2, "query_srq");
	sa.srq_limit = 4;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0, "arm the SRQ limit");
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 4, "limit %u", sa.srq_limit);
	struct ibv_qp_init_attr is = ia;
	is.srq = srq;
	struct ibv_qp *sqp = ibv_create_qp(pd, &is);
	CHECK(sqp && sqp->srq == srq, "QP with an SRQ");
	CHECK(ibv_post_recv(sqp, &rwr, &rbad) == EINVAL && rbad == &rwr,
	      "post_recv on a QP with an SRQ");
	CHECK(ibv_post_srq_recv(srq, &rwr, &rbad) == 0, "post_srq_recv");
	CHECK(ibv_destroy_srq(srq) == EBUSY, "destroy_srq with a QP");
	CHECK(ibv_destroy_qp(sqp) == 0, "destroy the SRQ's QP");
	CHECK(ibv_destroy_srq(srq) == 0, "destroy_srq");

	CHECK(ibv_destroy_qp(qp) == 0, "destroy_qp");
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "destroy channel with a CQ");
	CHECK(ibv_destroy_cq(cq) == 0, "destroy_cq");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "destroy_comp_channel");
	CHECK(ibv_dereg_mr(mr) == 0, "dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "close_device");
	ibv_free_device_list(list);
	free(buf);
	printf("ok\n");
	return 0;
}
