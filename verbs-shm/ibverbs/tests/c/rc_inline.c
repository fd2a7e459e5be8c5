/* Inline data (IBV_SEND_INLINE) and type 2 memory windows bound by a WR (IBV_WR_BIND_MW)
 * between two RC QPs connected through librdmacm. Compiled against the system's
 * <infiniband/verbs.h> and <rdma/rdma_cma.h>, linked against iwarpd's libraries.
 *
 *   rc_inline server IP PORT [wr]      rc_inline client IP PORT [wr]
 *
 * The client's QP asks max_inline_data 236 (perftest's) with an SQ of 16. In ROUNDS
 * rounds it posts BATCH inline SENDs of varied lengths (1..236) from a stack buffer in
 * two SGEs with a meaningless lkey, scribbling over the buffer as soon as each post
 * returns, every 8th signaled, so the SQ fills and ibv_post_send answers ENOMEM until
 * completions are polled; then one inline RDMA WRITE of 200 bytes. The server checks
 * every message and the written bytes, then answers "next". Refusals checked first:
 * max_inline_data above the device's (EINVAL), an inline READ (EINVAL), inline bytes
 * above max_inline_data (EINVAL).
 * The server binds a type 2 window over part of its region with an IBV_WR_BIND_MW WR
 * (completion IBV_WC_BIND_MW), binds a type 1 window with ibv_bind_mw (its completion
 * too) and advertises the type 2 one; the client RDMA WRITEs 8 KiB through
 * the window, and the server checks them. Both print "ok" and exit 0 when every check
 * passed. With "wr" both QPs are made by rdma_create_qp_ex with send_ops_flags and every
 * WR (the bind too) is posted through the ibv_wr_* interface (ibv_wr_start, ibv_wr_send /
 * ibv_wr_rdma_write / ibv_wr_rdma_read / ibv_wr_bind_mw, ibv_wr_set_sge_list /
 * ibv_wr_set_inline_data_list, ibv_wr_complete). */
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

#define ROUNDS 24
#define BATCH 32
#define MSG 256
#define NRECV 64
#define INLINE_MAX 236
#define WRITE_LEN 200
#define WIN_OFF 8192
#define WIN_LEN 8192
#define REGION (NRECV * MSG + 2 * WIN_OFF + WIN_LEN)

struct advert {
	uint64_t addr, win_addr;
	uint32_t rkey, win_rkey;
};

static struct rdma_event_channel *ec;
static struct ibv_cq *cq;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static char *buf; /* [NRECV receive slots | write target | window ...] */
static uint32_t sq_depth; /* max_send_wr granted */
static int use_wr;        /* post through ibv_wr_* */

static char pattern(size_t msg, size_t i)
{
	return (char)((i * 7 + msg * 13 + (i >> 5)) & 0xff);
}

static uint32_t msg_len(size_t i)
{
	return 1 + (uint32_t)((i * 37) % INLINE_MAX);
}

static struct ibv_wc next_wc(void)
{
	struct ibv_wc wc;
	for (long spins = 0;; spins++) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0, "poll_cq");
		if (n == 1) {
			CHECK(wc.status == IBV_WC_SUCCESS, "wc %lu op %d: %s (vendor %u)",
			      (unsigned long)wc.wr_id, wc.opcode, ibv_wc_status_str(wc.status),
			      wc.vendor_err);
			return wc;
		}
		CHECK(spins < 2000000000L, "no completion");
	}
}

static int advert_sent; /* the server's advert SEND completions seen */

/* The next completion that is not a SEND's (the server's "next" and advert sends);
 * counts the advert's. */
static struct ibv_wc next_recv(void)
{
	for (;;) {
		struct ibv_wc wc = next_wc();
		if (wc.opcode != IBV_WC_SEND)
			return wc;
		if (wc.wr_id == 1)
			advert_sent++;
	}
}

static void post_recv(struct ibv_qp *qp, int slot)
{
	struct ibv_sge sge = { (uintptr_t)(buf + slot * MSG), MSG, mr->lkey };
	struct ibv_recv_wr r = { .wr_id = 1000 + slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(qp, &r, &bad) == 0, "post_recv");
}

static int post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, struct ibv_sge *sge,
		int nsge, uint64_t raddr, uint32_t rkey, unsigned flags)
{
	if (use_wr) {
		struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
		CHECK(x, "ibv_qp_to_qp_ex");
		ibv_wr_start(x);
		x->wr_id = wr_id;
		x->wr_flags = flags & ~IBV_SEND_INLINE;
		if (op == IBV_WR_SEND)
			ibv_wr_send(x);
		else if (op == IBV_WR_RDMA_WRITE)
			ibv_wr_rdma_write(x, rkey, raddr);
		else
			ibv_wr_rdma_read(x, rkey, raddr);
		if (flags & IBV_SEND_INLINE) {
			struct ibv_data_buf b[4];
			CHECK(nsge <= 4, "nsge");
			for (int i = 0; i < nsge; i++)
				b[i] = (struct ibv_data_buf){ (void *)(uintptr_t)sge[i].addr,
							      sge[i].length };
			ibv_wr_set_inline_data_list(x, nsge, b);
		} else {
			ibv_wr_set_sge_list(x, nsge, sge);
		}
		return ibv_wr_complete(x);
	}
	struct ibv_send_wr w = { .wr_id = wr_id, .sg_list = sge, .num_sge = nsge, .opcode = op,
				 .send_flags = flags },
			   *bad = NULL;
	w.wr.rdma.remote_addr = raddr;
	w.wr.rdma.rkey = rkey;
	int rc = ibv_post_send(qp, &w, &bad);
	CHECK(rc == 0 || bad == &w, "bad_wr not set (rc %d)", rc);
	return rc;
}

static void setup(struct rdma_cm_id *id, uint32_t max_inline)
{
	pd = ibv_alloc_pd(id->verbs);
	CHECK(pd, "alloc_pd");
	buf = calloc(1, REGION);
	CHECK(buf, "calloc");
	mr = ibv_reg_mr(pd, buf, REGION,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	CHECK(mr, "reg_mr");
	cq = ibv_create_cq(id->verbs, 256, NULL, NULL, 0);
	CHECK(cq, "create_cq");
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 16, .max_recv_wr = NRECV,
					       .max_send_sge = 2, .max_recv_sge = 1,
					       .max_inline_data = 100000 } };
	errno = 0;
	CHECK(ibv_create_qp(pd, &a) == NULL && errno == EINVAL,
	      "max_inline_data 100000 not refused with EINVAL");
	a.cap.max_inline_data = max_inline;
	if (use_wr) {
		struct ibv_qp_init_attr_ex x = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = a.cap,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
			.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
					  IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_BIND_MW
		};
		struct ibv_qp_init_attr_ex atomics = x;
		atomics.send_ops_flags |= IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
		errno = 0;
		CHECK(rdma_create_qp_ex(id, &atomics) != 0 && errno == EOPNOTSUPP,
		      "atomics in send_ops_flags not refused with EOPNOTSUPP");
		CHECK(rdma_create_qp_ex(id, &x) == 0, "rdma_create_qp_ex");
		a.cap = x.cap;
	} else {
		CHECK(rdma_create_qp(id, pd, &a) == 0, "rdma_create_qp");
	}
	sq_depth = a.cap.max_send_wr;
	CHECK(a.cap.max_inline_data >= max_inline, "max_inline_data %u granted, %u asked",
	      a.cap.max_inline_data, max_inline);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(id->qp, &qa, IBV_QP_CAP, &qi) == 0, "query_qp");
	CHECK(qi.cap.max_inline_data == a.cap.max_inline_data, "query_qp max_inline_data %u",
	      qi.cap.max_inline_data);
	for (int i = 0; i < NRECV; i++)
		post_recv(id->qp, i);
}

static void server(struct rdma_cm_id *listener)
{
	struct rdma_cm_id *id;
	expect_cm_event(ec, RDMA_CM_EVENT_CONNECT_REQUEST, &id);
	setup(id, 0);
	CHECK(rdma_accept(id, NULL) == 0, "accept");
	expect_cm_event(ec, RDMA_CM_EVENT_ESTABLISHED, NULL);
	struct ibv_qp *qp = id->qp;

	/* A type 2 window over [WIN_OFF, WIN_OFF + WIN_LEN) of the write area. */
	char *area = buf + NRECV * MSG;
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw, "alloc_mw type 2");
	uint32_t win_rkey = ibv_inc_rkey(mw->rkey);
	struct ibv_send_wr bw = { .wr_id = 77, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	bw.bind_mw.mw = mw;
	bw.bind_mw.rkey = win_rkey;
	bw.bind_mw.bind_info.mr = mr;
	bw.bind_mw.bind_info.addr = (uintptr_t)(area + WIN_OFF);
	bw.bind_mw.bind_info.length = WIN_LEN;
	bw.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (use_wr) {
		struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
		ibv_wr_start(x);
		x->wr_id = 77;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_bind_mw(x, mw, win_rkey, &bw.bind_mw.bind_info);
		CHECK(ibv_wr_complete(x) == 0, "ibv_wr_bind_mw");
	} else {
		CHECK(ibv_post_send(qp, &bw, &bad) == 0, "post BIND_MW");
	}
	struct ibv_wc wc = next_wc();
	CHECK(wc.wr_id == 77 && wc.opcode == IBV_WC_BIND_MW, "bind wc %lu op %d",
	      (unsigned long)wc.wr_id, wc.opcode);
	/* A window key of another index is refused. */
	bw.bind_mw.rkey = win_rkey ^ 0x100;
	CHECK(ibv_post_send(qp, &bw, &bad) == EINVAL && bad == &bw, "BIND_MW of a foreign key");
	/* A type 1 window bound by ibv_bind_mw: its rkey set at once, and (signaled) its
	 * IBV_WC_BIND_MW with the bind's wr_id on the send CQ, as rdma-core's providers;
	 * unsignaled, none (the next completion is the signaled one after it). */
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(mw1, "alloc_mw type 1");
	struct ibv_mw_bind b1 = { .wr_id = 79, .bind_info = bw.bind_mw.bind_info };
	CHECK(ibv_bind_mw(qp, mw1, &b1) == 0, "ibv_bind_mw type 1, unsignaled");
	b1.wr_id = 78;
	b1.send_flags = IBV_SEND_SIGNALED;
	CHECK(ibv_bind_mw(qp, mw1, &b1) == 0, "ibv_bind_mw type 1");
	CHECK(mw1->rkey != 0 && mw1->rkey != mr->rkey, "type 1 rkey %#x", mw1->rkey);
	wc = next_wc();
	CHECK(wc.wr_id == 78 && wc.opcode == IBV_WC_BIND_MW && wc.status == IBV_WC_SUCCESS,
	      "type 1 bind wc %lu op %d status %d", (unsigned long)wc.wr_id, wc.opcode,
	      wc.status);
	CHECK(ibv_dealloc_mw(mw1) == 0, "dealloc type 1");

	char *out = area + WIN_OFF + WIN_LEN; /* not in the window */
	struct advert ad = { (uintptr_t)area, (uintptr_t)(area + WIN_OFF), mr->rkey, win_rkey };
	memcpy(out, &ad, sizeof ad);
	struct ibv_sge sge = { (uintptr_t)out, sizeof ad, mr->lkey };
	CHECK(post(qp, IBV_WR_SEND, 1, &sge, 1, 0, 0, IBV_SEND_SIGNALED) == 0, "send advert");
	/* Its completion comes when the client acknowledges it, which may be in the
	 * segment carrying the client's first message: the send and receive queues'
	 * completions on one CQ are not ordered. Counted by next_recv, checked below. */

	size_t seen = 0;
	for (int round = 0; round < ROUNDS; round++) {
		for (int k = 0; k < BATCH; k++, seen++) {
			/* The completion of the last "next" may come after the messages that
			 * followed it. */
			wc = next_recv();
			CHECK(wc.opcode == IBV_WC_RECV, "op %d", wc.opcode);
			int slot = (int)(wc.wr_id - 1000);
			CHECK(slot >= 0 && slot < NRECV, "wr_id %lu", (unsigned long)wc.wr_id);
			CHECK(wc.byte_len == msg_len(seen), "message %zu: %u bytes, %u sent", seen,
			      wc.byte_len, msg_len(seen));
			for (uint32_t j = 0; j < wc.byte_len; j++)
				CHECK(buf[slot * MSG + j] == pattern(seen, j),
				      "message %zu byte %u: %02x", seen, j,
				      (unsigned char)buf[slot * MSG + j]);
			post_recv(qp, slot);
		}
		/* The round's inline WRITE came before its last SEND. */
		for (size_t j = 0; j < WRITE_LEN; j++)
			CHECK(area[(round % 4) * MSG + j] == pattern(100000 + round, j),
			      "round %d WRITE byte %zu", round, j);
		strcpy(out, "next");
		sge.length = 5;
		CHECK(post(qp, IBV_WR_SEND, 2, &sge, 1, 0, 0, IBV_SEND_SIGNALED) == 0, "next");
	}
	CHECK(advert_sent == 1, "the advert's SEND completion (wr_id 1, IBV_WC_SEND): %d",
	      advert_sent);
	/* The WRITE through the window, then "fin". */
	wc = next_recv();
	CHECK(wc.opcode == IBV_WC_RECV, "fin");
	int slot = (int)(wc.wr_id - 1000);
	CHECK(strcmp(buf + slot * MSG, "fin") == 0, "fin text");
	for (size_t j = 0; j < WIN_LEN; j++)
		CHECK(area[WIN_OFF + j] == pattern(200000, j), "window byte %zu", j);
	expect_cm_event(ec, RDMA_CM_EVENT_DISCONNECTED, NULL);
	rdma_destroy_qp(id);
	CHECK(ibv_dealloc_mw(mw) == 0, "dealloc_mw");
	CHECK(rdma_destroy_id(id) == 0, "destroy_id");
	CHECK(rdma_destroy_id(listener) == 0, "destroy listener");
}

/* Posts one WR, polling send completions while the SQ is full (ENOMEM). */
static void post_retry(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id,
		       struct ibv_sge *sge, int nsge, uint64_t raddr, uint32_t rkey,
		       unsigned flags, int *full)
{
	for (;;) {
		int rc = post(qp, op, wr_id, sge, nsge, raddr, rkey, flags);
		if (rc == 0)
			return;
		CHECK(rc == ENOMEM, "post_send: %d", rc);
		++*full;
		struct ibv_wc wc = next_wc();
		CHECK(wc.opcode == IBV_WC_SEND || wc.opcode == IBV_WC_RDMA_WRITE,
		      "op %d while the SQ is full", wc.opcode);
	}
}

static void client(struct rdma_cm_id *id, struct sockaddr_in *sa)
{
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)sa, 2000) == 0, "resolve_addr");
	expect_cm_event(ec, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
	CHECK(rdma_resolve_route(id, 2000) == 0, "resolve_route");
	expect_cm_event(ec, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
	setup(id, INLINE_MAX);
	CHECK(rdma_connect(id, NULL) == 0, "connect");
	expect_cm_event(ec, RDMA_CM_EVENT_ESTABLISHED, NULL);
	struct ibv_qp *qp = id->qp;
	struct ibv_wc wc = next_wc();
	CHECK(wc.opcode == IBV_WC_RECV && wc.byte_len == sizeof(struct advert), "advert");
	struct advert ad;
	memcpy(&ad, buf + (wc.wr_id - 1000) * MSG, sizeof ad);
	post_recv(qp, (int)(wc.wr_id - 1000));

	char stack[INLINE_MAX + 64];
	struct ibv_sge two[2];
	/* Refusals: nothing is posted. */
	struct ibv_sge big = { (uintptr_t)stack, INLINE_MAX + 64, 0 };
	CHECK(post(qp, IBV_WR_SEND, 9, &big, 1, 0, 0, IBV_SEND_INLINE) == EINVAL,
	      "inline above max_inline_data");
	struct ibv_sge rd = { (uintptr_t)buf, 64, mr->lkey };
	CHECK(post(qp, IBV_WR_RDMA_READ, 9, &rd, 1, ad.addr, ad.rkey, IBV_SEND_INLINE) == EINVAL,
	      "inline READ");

	size_t sent = 0;
	int full = 0;
	for (int round = 0; round < ROUNDS; round++) {
		for (int k = 0; k < BATCH; k++, sent++) {
			uint32_t len = msg_len(sent);
			for (uint32_t j = 0; j < len; j++)
				stack[j] = pattern(sent, j);
			uint32_t first = len / 3;
			two[0] = (struct ibv_sge){ (uintptr_t)stack, first, 0xdeadbeef };
			two[1] = (struct ibv_sge){ (uintptr_t)(stack + first), len - first, 0 };
			unsigned flags = IBV_SEND_INLINE | (k % 8 == 7 ? IBV_SEND_SIGNALED : 0);
			if (k == BATCH - 1) {
				/* The round's inline WRITE first, unsignaled. */
				char w[WRITE_LEN];
				for (size_t j = 0; j < WRITE_LEN; j++)
					w[j] = pattern(100000 + round, j);
				struct ibv_sge ws = { (uintptr_t)w, WRITE_LEN, 0 };
				post_retry(qp, IBV_WR_RDMA_WRITE, 5000 + round, &ws, 1,
					   ad.addr + (round % 4) * MSG, ad.rkey, IBV_SEND_INLINE,
					   &full);
				memset(w, 0xEE, sizeof w);
			}
			post_retry(qp, IBV_WR_SEND, sent, two, 2, 0, 0, flags, &full);
			memset(stack, 0xEE, sizeof stack); /* the bytes were copied at post */
		}
		/* Wait for "next" (send completions may come first). */
		for (;;) {
			wc = next_wc();
			if (wc.opcode == IBV_WC_RECV)
				break;
		}
		int slot = (int)(wc.wr_id - 1000);
		CHECK(strcmp(buf + slot * MSG, "next") == 0, "next text");
		post_recv(qp, slot);
	}
	CHECK(full > 0 || sq_depth >= BATCH, "SQ of %u never full: ENOMEM path not exercised",
	      sq_depth);
	/* 8 KiB through the window, then "fin" (inline). */
	char *src = buf + NRECV * MSG;
	for (size_t j = 0; j < WIN_LEN; j++)
		src[j] = pattern(200000, j);
	struct ibv_sge ws = { (uintptr_t)src, WIN_LEN, mr->lkey };
	post_retry(qp, IBV_WR_RDMA_WRITE, 7, &ws, 1, ad.win_addr, ad.win_rkey, 0, &full);
	strcpy(stack, "fin");
	struct ibv_sge fs = { (uintptr_t)stack, 4, 0 };
	post_retry(qp, IBV_WR_SEND, 8, &fs, 1, 0, 0, IBV_SEND_INLINE | IBV_SEND_SIGNALED, &full);
	for (;;) {
		wc = next_wc();
		if (wc.wr_id == 8)
			break;
	}
	printf("SQ full %d times\n", full);
	CHECK(rdma_disconnect(id) == 0, "disconnect");
	expect_cm_event(ec, RDMA_CM_EVENT_DISCONNECTED, NULL);
	rdma_destroy_qp(id);
	CHECK(rdma_destroy_id(id) == 0, "destroy_id");
}

int main(int argc, char **argv)
{
	CHECK(argc == 4 || (argc == 5 && strcmp(argv[4], "wr") == 0),
	      "usage: rc_inline server|client IP PORT [wr]");
	use_wr = argc == 5;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[3])) };
	CHECK(inet_pton(AF_INET, argv[2], &sa.sin_addr) == 1, "address %s", argv[2]);
	ec = rdma_create_event_channel();
	CHECK(ec, "create_event_channel");
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ec, &id, NULL, RDMA_PS_TCP) == 0, "create_id");
	if (strcmp(argv[1], "server") == 0) {
		CHECK(rdma_bind_addr(id, (struct sockaddr *)&sa) == 0, "bind");
		CHECK(rdma_listen(id, 4) == 0, "listen");
		printf("listening\n");
		fflush(stdout);
		server(id);
	} else {
		client(id, &sa);
	}
	CHECK(ibv_destroy_cq(cq) == 0, "destroy_cq");
	CHECK(ibv_dereg_mr(mr) == 0, "dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
	rdma_destroy_event_channel(ec);
	free(buf);
	printf("ok\n");
	return 0;
}
