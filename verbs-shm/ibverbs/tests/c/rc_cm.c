/* SEND/RECV, RDMA WRITE and RDMA READ between two RC QPs connected through librdmacm,
 * every byte verified. Compiled against the system's <infiniband/verbs.h> and
 * <rdma/rdma_cma.h>, linked against iwarpd's libibverbs.so.1 and librdmacm.so.1.
 *
 *   rc_cm server IP PORT      rc_cm client IP PORT
 *   rc_cm server IP PORT badkey    rc_cm client IP PORT badkey
 *
 * The client advertises two regions of its buffer in a SEND: SRC (filled with pattern
 * 1) and DST. The server RDMA READs SRC and checks pattern 1, RDMA WRITEs pattern 2 into
 * DST, then SENDs "done" (solicited). The client checks DST holds pattern 2 and answers
 * "bye"; both disconnect. Prints "ok" and exits 0 when every check passed. The server
 * waits for completions through its completion channel, the client polls.
 * With "badkey" the client instead RDMA WRITEs with a wrong rkey: its WR completes with a
 * remote error, and both sides get an async event on their QP
 * (ibv_get_async_event): the server IBV_EVENT_QP_ACCESS_ERR, the client
 * IBV_EVENT_QP_FATAL (the Terminate it received). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "check.h"
#include "cm_check.h"

#define REGION (256 * 1024)
#define MSG 64

struct advert {
	uint64_t src_addr, dst_addr;
	uint32_t rkey, len;
};

static struct rdma_event_channel *ec;
static struct ibv_comp_channel *cch;
static struct ibv_cq *cq;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static char *buf; /* [msg in | msg out | SRC | DST] */

static char pattern(int which, size_t i)
{
	return (char)((i * 7 + which * 13 + (i >> 9)) & 0xff);
}

static void setup(struct rdma_cm_id *id)
{
	pd = ibv_alloc_pd(id->verbs);
	CHECK(pd, "alloc_pd");
	buf = malloc(2 * MSG + 2 * REGION);
	CHECK(buf, "malloc");
	memset(buf, 0, 2 * MSG + 2 * REGION);
	mr = ibv_reg_mr(pd, buf, 2 * MSG + 2 * REGION,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(mr, "reg_mr");
	cch = ibv_create_comp_channel(id->verbs);
	CHECK(cch, "comp channel");
	cq = ibv_create_cq(id->verbs, 32, NULL, cch, 0);
	CHECK(cq, "create_cq");
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 8, .max_recv_wr = 8,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	CHECK(rdma_create_qp(id, pd, &a) == 0, "rdma_create_qp");
	CHECK(id->qp && id->qp->send_cq == cq, "id->qp");
	struct ibv_sge sge = { (uintptr_t)buf, MSG, mr->lkey };
	struct ibv_recv_wr r = { .wr_id = 100, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(id->qp, &r, &bad) == 0, "post_recv");
}

/* The next completion: by polling, or through the channel. */
static struct ibv_wc next_wc(int use_channel)
{
	struct ibv_wc wc;
	for (long spins = 0;; spins++) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0, "poll_cq");
		if (n == 1) {
			CHECK(wc.status == IBV_WC_SUCCESS, "wc %lu: %s (vendor %u)",
			      (unsigned long)wc.wr_id, ibv_wc_status_str(wc.status), wc.vendor_err);
			return wc;
		}
		if (use_channel) {
			CHECK(ibv_req_notify_cq(cq, 0) == 0, "req_notify");
			n = ibv_poll_cq(cq, 1, &wc); /* raced with the arm? */
			CHECK(n >= 0, "poll_cq");
			if (n == 1) {
				CHECK(wc.status == IBV_WC_SUCCESS, "wc: %s", ibv_wc_status_str(wc.status));
				return wc;
			}
			struct ibv_cq *ecq;
			void *ectx;
			CHECK(ibv_get_cq_event(cch, &ecq, &ectx) == 0 && ecq == cq, "get_cq_event");
			ibv_ack_cq_events(cq, 1);
		}
		CHECK(spins < 2000000000L, "no completion");
	}
}

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *local,
		 uint32_t len, uint64_t raddr, uint32_t rkey, unsigned flags)
{
	struct ibv_sge sge = { (uintptr_t)local, len, mr->lkey };
	struct ibv_send_wr w = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED | flags },
			   *bad;
	w.wr.rdma.remote_addr = raddr;
	w.wr.rdma.rkey = rkey;
	CHECK(ibv_post_send(qp, &w, &bad) == 0, "post_send op %d", op);
}

static void repost_recv(struct ibv_qp *qp)
{
	struct ibv_sge sge = { (uintptr_t)buf, MSG, mr->lkey };
	struct ibv_recv_wr r = { .wr_id = 101, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(qp, &r, &bad) == 0, "post_recv");
}

/* The next async event of the id's context, which must be `want` on `qp`. */
static void expect_async(struct rdma_cm_id *id, enum ibv_event_type want)
{
	struct ibv_async_event ev;
	for (;;) {
		CHECK(ibv_get_async_event(id->verbs, &ev) == 0, "get_async_event");
		ibv_ack_async_event(&ev);
		printf("async %s\n", ibv_event_type_str(ev.event_type));
		fflush(stdout);
		if (ev.event_type == want)
			break;
	}
	CHECK(ev.element.qp == id->qp, "event names QP %p, not %p", (void *)ev.element.qp,
	      (void *)id->qp);
}

int main(int argc, char **argv)
{
	CHECK(argc == 4 || (argc == 5 && strcmp(argv[4], "badkey") == 0),
	      "usage: rc_cm server|client IP PORT [badkey]");
	int badkey = argc == 5;
	int server = strcmp(argv[1], "server") == 0;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[3])) };
	CHECK(inet_pton(AF_INET, argv[2], &sa.sin_addr) == 1, "address %s", argv[2]);
	ec = rdma_create_event_channel();
	CHECK(ec, "create_event_channel");
	struct rdma_cm_id *id, *listener = NULL;
	CHECK(rdma_create_id(ec, &id, NULL, RDMA_PS_TCP) == 0, "create_id");
	char *out;
	if (server) {
		listener = id;
		CHECK(rdma_bind_addr(listener, (struct sockaddr *)&sa) == 0, "bind");
		CHECK(rdma_listen(listener, 4) == 0, "listen");
		printf("listening\n");
		fflush(stdout);
		expect_cm_event(ec, RDMA_CM_EVENT_CONNECT_REQUEST, &id);
		CHECK(id != listener && id->verbs, "request id");
		setup(id);
		struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4 };
		CHECK(rdma_accept(id, &p) == 0, "accept");
		expect_cm_event(ec, RDMA_CM_EVENT_ESTABLISHED, NULL);
		if (badkey) {
			expect_async(id, IBV_EVENT_QP_ACCESS_ERR);
			printf("ok\n");
			return 0;
		}
		out = buf + MSG;
		char *src = buf + 2 * MSG, *dst = src + REGION;
		/* 1: the advertisement. */
		struct ibv_wc wc = next_wc(1);
		CHECK(wc.opcode == IBV_WC_RECV && wc.byte_len == sizeof(struct advert), "advert");
		struct advert ad;
		memcpy(&ad, buf, sizeof ad);
		repost_recv(id->qp);
		/* 2: READ the client's SRC into our DST, check pattern 1. */
		post(id->qp, IBV_WR_RDMA_READ, 1, dst, ad.len, ad.src_addr, ad.rkey, 0);
		wc = next_wc(1);
		CHECK(wc.opcode == IBV_WC_RDMA_READ && wc.wr_id == 1, "read wc");
		for (size_t i = 0; i < ad.len; i++)
			CHECK(dst[i] == pattern(1, i), "READ byte %zu", i);
		/* 3: WRITE pattern 2 into the client's DST, then SEND done. */
		for (size_t i = 0; i < ad.len; i++)
			src[i] = pattern(2, i);
		post(id->qp, IBV_WR_RDMA_WRITE, 2, src, ad.len, ad.dst_addr, ad.rkey, 0);
		strcpy(out, "done");
		post(id->qp, IBV_WR_SEND, 3, out, 5, 0, 0, IBV_SEND_SOLICITED);
		int seen = 0;
		while (seen != 3) {
			wc = next_wc(1);
			CHECK(wc.opcode == IBV_WC_RDMA_WRITE || wc.opcode == IBV_WC_SEND, "op %d",
			      wc.opcode);
			seen |= wc.opcode == IBV_WC_RDMA_WRITE ? 1 : 2;
		}
		/* 4: bye. */
		wc = next_wc(1);
		CHECK(wc.opcode == IBV_WC_RECV && strcmp(buf, "bye") == 0, "bye");
		expect_cm_event(ec, RDMA_CM_EVENT_DISCONNECTED, NULL);
	} else {
		CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000) == 0, "resolve_addr");
		expect_cm_event(ec, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
		CHECK(rdma_resolve_route(id, 2000) == 0, "resolve_route");
		expect_cm_event(ec, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
		setup(id);
		struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4,
					     .retry_count = 7 };
		CHECK(rdma_connect(id, &p) == 0, "connect");
		expect_cm_event(ec, RDMA_CM_EVENT_ESTABLISHED, NULL);
		out = buf + MSG;
		char *src = buf + 2 * MSG, *dst = src + REGION;
		if (badkey) {
			post(id->qp, IBV_WR_RDMA_WRITE, 20, src, 4096, 0x1000, mr->rkey ^ 0x5a5a00, 0);
			struct ibv_wc wc;
			int n;
			while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
				;
			/* A Terminate answered the WRITE with a protection error (invalid
			 * STag): the completion says a remote access error. */
			CHECK(n == 1 && wc.wr_id == 20 && wc.status == IBV_WC_REM_ACCESS_ERR,
			      "bad-key WRITE: %s (vendor_err %u)", ibv_wc_status_str(wc.status),
			      wc.vendor_err);
			expect_async(id, IBV_EVENT_QP_FATAL);
			printf("ok\n");
			return 0;
		}
		for (size_t i = 0; i < REGION; i++)
			src[i] = pattern(1, i);
		struct advert ad = { (uintptr_t)src, (uintptr_t)dst, mr->rkey, REGION };
		memcpy(out, &ad, sizeof ad);
		post(id->qp, IBV_WR_SEND, 10, out, sizeof ad, 0, 0, 0);
		struct ibv_wc wc = next_wc(0);
		CHECK(wc.opcode == IBV_WC_SEND && wc.wr_id == 10, "advert sent");
		wc = next_wc(0);
		CHECK(wc.opcode == IBV_WC_RECV && strcmp(buf, "done") == 0, "done received");
		for (size_t i = 0; i < REGION; i++)
			CHECK(dst[i] == pattern(2, i), "WRITE byte %zu", i);
		strcpy(out, "bye");
		post(id->qp, IBV_WR_SEND, 11, out, 4, 0, 0, 0);
		wc = next_wc(0);
		CHECK(wc.opcode == IBV_WC_SEND && wc.wr_id == 11, "bye sent");
		CHECK(rdma_disconnect(id) == 0, "disconnect");
		expect_cm_event(ec, RDMA_CM_EVENT_DISCONNECTED, NULL);
	}
	rdma_destroy_qp(id);
	CHECK(rdma_destroy_id(id) == 0, "destroy_id");
	if (listener)
		CHECK(rdma_destroy_id(listener) == 0, "destroy listener");
	CHECK(ibv_destroy_cq(cq) == 0, "destroy_cq");
	CHECK(ibv_destroy_comp_channel(cch) == 0, "destroy channel");
	CHECK(ibv_dereg_mr(mr) == 0, "dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
	rdma_destroy_event_channel(ec);
	free(buf);
	printf("ok\n");
	return 0;
}
