/* The edges of the verbs against one daemon, as rdma-core's man pages define the answers.
 *
 *   edges local    illegal QP transitions; malformed WRs (EINVAL, bad_wr set, nothing
 *                  posted); a CQ overrun (more completions than CQEs: IBV_EVENT_CQ_ERR
 *                  naming the CQ); fork after ibv_fork_init (the child has no access to
 *                  registered pages, the parent's MR and bytes are intact); an
 *                  extended CQ (ibv_create_cq_ex) read with ibv_start_poll /
 *                  ibv_next_poll / ibv_end_poll and the ibv_wc_read_* functions.
 *   edges gone     makes objects, prints "ready", waits for a line on stdin (the test
 *                  kills the daemon meanwhile), then: every verb answers an errno or
 *                  -1, none hangs; ibv_get_async_event gives IBV_EVENT_DEVICE_FATAL
 *                  once, then EIO; the device list is empty.
 *
 * Prints "ok" last and exits 0 when every check passed. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "check.h"

static struct ibv_context *open_first(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1, "device list: %d devices", n);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open");
	ibv_free_device_list(list);
	return ctx;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t rq)
{
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 8, .max_recv_wr = rq,
					       .max_send_sge = 2, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	CHECK(qp, "create_qp");
	return qp;
}

static void transitions(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp *qp = make_qp(pd, cq, 8);
	struct ibv_qp_attr at = { .qp_state = 42 };
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == EINVAL, "state 42");
	at.qp_state = IBV_QPS_INIT;
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == 0, "RESET -> INIT");
	at.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == 0, "INIT -> ERR");
	at.qp_state = IBV_QPS_RTS;
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == EINVAL, "ERR -> RTS");
	at.qp_state = IBV_QPS_INIT;
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == EINVAL, "ERR -> INIT");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR,
	      "still ERR: %d", qa.qp_state);
	at.rate_limit = 1000;
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_RATE_LIMIT) == EOPNOTSUPP, "rate limit");
	CHECK(ibv_destroy_qp(qp) == 0, "destroy");
}

static void bad_wrs(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_mr *mr, char *buf)
{
	struct ibv_qp *qp = make_qp(pd, cq, 8);
	struct ibv_sge sge[40];
	for (int i = 0; i < 40; i++)
		sge[i] = (struct ibv_sge){ (uintptr_t)buf, 8, mr->lkey };
	struct ibv_send_wr ok = { .wr_id = 1, .sg_list = sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND },
			   w, *bad;
	w = ok;
	w.num_sge = -1;
	ok.next = &w;
	bad = NULL;
	CHECK(ibv_post_send(qp, &ok, &bad) == EINVAL && bad == &w, "num_sge -1 (second of two)");
	w = ok;
	w.next = NULL;
	w.num_sge = 40;
	CHECK(ibv_post_send(qp, &w, &bad) == EINVAL && bad == &w, "40 SGEs");
	w.num_sge = 1;
	w.sg_list = NULL;
	CHECK(ibv_post_send(qp, &w, &bad) == EINVAL && bad == &w, "NULL sg_list");
	w.sg_list = sge;
	w.opcode = 77;
	CHECK(ibv_post_send(qp, &w, &bad) == EINVAL && bad == &w, "opcode 77");
	w.opcode = IBV_WR_SEND;
	w.send_flags = IBV_SEND_IP_CSUM;
	CHECK(ibv_post_send(qp, &w, &bad) == EINVAL && bad == &w, "IP_CSUM");
	w.send_flags = IBV_SEND_INLINE;
	CHECK(ibv_post_send(qp, &w, &bad) == EINVAL && bad == &w, "inline without max_inline");
	w.send_flags = IBV_SEND_SOLICITED;
	w.opcode = IBV_WR_RDMA_WRITE;
	CHECK(ibv_post_send(qp, &w, &bad) == EINVAL && bad == &w, "solicited WRITE");
	struct ibv_recv_wr r = { .wr_id = 2, .sg_list = sge, .num_sge = 2 }, *rbad;
	r.num_sge = -3;
	CHECK(ibv_post_recv(qp, &r, &rbad) == EINVAL && rbad == &r, "recv num_sge -3");
	/* The first WR of the list was posted; the refused ones were not: moving the QP to
	 * ERR flushes exactly one send WR. */
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == 0, "to ERR");
	struct ibv_wc wc[8];
	int got = 0;
	for (int tries = 0; tries < 2000000 && got < 1; tries++) {
		int n = ibv_poll_cq(cq, 8, wc + got);
		CHECK(n >= 0, "poll");
		got += n;
	}
	usleep(100000);
	got += ibv_poll_cq(cq, 8 - got, wc + got);
	CHECK(got == 1 && wc[0].wr_id == 1 && wc[0].status == IBV_WC_WR_FLUSH_ERR,
	      "%d completions, the first %lu %s", got, (unsigned long)wc[0].wr_id,
	      ibv_wc_status_str(wc[0].status));
	CHECK(ibv_destroy_qp(qp) == 0, "destroy");
}

static void overrun(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_mr *mr, char *buf)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(cq, "small CQ");
	int depth = cq->cqe;
	struct ibv_qp *qp = make_qp(pd, cq, (uint32_t)depth + 16);
	struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
	for (int i = 0; i < depth + 16; i++) {
		struct ibv_recv_wr r = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *rbad;
		CHECK(ibv_post_recv(qp, &r, &rbad) == 0, "post_recv %d", i);
	}
	/* The flush makes depth + 16 completions for a CQ of depth entries. */
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == 0, "to ERR");
	struct ibv_async_event ev;
	for (;;) {
		CHECK(ibv_get_async_event(ctx, &ev) == 0, "get_async_event");
		ibv_ack_async_event(&ev);
		if (ev.event_type == IBV_EVENT_CQ_ERR)
			break;
		printf("async %s (before the CQ error)\n", ibv_event_type_str(ev.event_type));
	}
	CHECK(ev.element.cq == cq, "CQ_ERR names %p, not %p", (void *)ev.element.cq, (void *)cq);
	printf("CQ of %d overrun: %s\n", depth, ibv_event_type_str(ev.event_type));
	CHECK(ibv_destroy_qp(qp) == 0, "destroy qp");
	CHECK(ibv_destroy_cq(cq) == 0, "destroy overrun cq");
}

static void cq_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_mr *mr, char *buf)
{
	struct ibv_cq_init_attr_ex bad = { .cqe = 16,
					   .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &bad) && errno == EOPNOTSUPP, "timestamps refused");
	struct ibv_cq_init_attr_ex a = { .cqe = 16,
					 .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM,
					 .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					 .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED };
	struct ibv_cq_ex *cx = ibv_create_cq_ex(ctx, &a);
	CHECK(cx, "create_cq_ex");
	struct ibv_cq *cq = ibv_cq_ex_to_cq(cx);
	CHECK(cq->cqe >= 16 && cq->context == ctx, "cq fields");
	struct ibv_poll_cq_attr pa = { 0 };
	CHECK(ibv_start_poll(cx, &pa) == ENOENT, "an empty CQ: ENOENT");
	struct ibv_qp *qp = make_qp(pd, cq, 8);
	struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
	for (int i = 0; i < 3; i++) {
		struct ibv_recv_wr r = { .wr_id = 500 + i, .sg_list = &sge, .num_sge = 1 }, *rbad;
		CHECK(ibv_post_recv(qp, &r, &rbad) == 0, "post_recv");
	}
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == 0, "to ERR");
	int rc;
	for (long spins = 0; (rc = ibv_start_poll(cx, &pa)) == ENOENT; spins++)
		CHECK(spins < 200000000L, "no completion");
	CHECK(rc == 0, "start_poll %d", rc);
	int n = 0;
	do {
		CHECK(cx->wr_id == (uint64_t)(500 + n) && cx->status == IBV_WC_WR_FLUSH_ERR,
		      "completion %d: wr_id %lu status %s", n, (unsigned long)cx->wr_id,
		      ibv_wc_status_str(cx->status));
		CHECK(ibv_wc_read_opcode(cx) == IBV_WC_RECV, "opcode %d", ibv_wc_read_opcode(cx));
		CHECK(ibv_wc_read_qp_num(cx) == qp->qp_num, "qp_num");
		n++;
		while ((rc = ibv_next_poll(cx)) == ENOENT && n < 3)
			;
	} while (rc == 0);
	ibv_end_poll(cx);
	CHECK(n == 3, "%d flushed completions", n);
	CHECK(ibv_destroy_qp(qp) == 0, "destroy qp");
	CHECK(ibv_destroy_cq(cq) == 0, "destroy cq_ex");
}

static sigjmp_buf segv_jump;
static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(segv_jump, 1);
}

static void forked(struct ibv_mr *mr, char *buf, size_t len)
{
	memset(buf, 0x3c, len);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		/* The child: its copy of the registered pages is not there (MADV_DONTFORK). */
		signal(SIGSEGV, on_segv);
		if (sigsetjmp(segv_jump, 1) == 0) {
			volatile char *p = buf;
			p[len / 2] = 0x11;
			_exit(4); /* the write went somewhere */
		}
		_exit(3); /* SIGSEGV: no mapping, as with rdma-core after ibv_fork_init */
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3, "child: status %d (3 = no access)", st);
	for (size_t i = 0; i < len; i++)
		CHECK((unsigned char)buf[i] == 0x3c, "byte %zu changed by the child", i);
	CHECK(mr->lkey != 0 || mr->rkey != 0, "mr");
}

static int local_edges(void)
{
	CHECK(ibv_fork_init() == 0, "fork_init");
	CHECK(ibv_is_fork_initialized() == IBV_FORK_ENABLED, "fork status %d",
	      ibv_is_fork_initialized());
	struct ibv_context *ctx = open_first();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");
	size_t len = 3 * 4096;
	char *buf = aligned_alloc(4096, len);
	CHECK(buf, "alloc");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "reg_mr");
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cq, "create_cq");
	transitions(pd, cq);
	bad_wrs(pd, cq, mr, buf);
	overrun(ctx, pd, mr, buf);
	cq_ex(ctx, pd, mr, buf);
	forked(mr, buf, len);
	CHECK(ibv_destroy_cq(cq) == 0, "destroy_cq");
	CHECK(ibv_dereg_mr(mr) == 0, "dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "close");
	return 0;
}

static int daemon_gone(void)
{
	struct ibv_context *ctx = open_first();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");
	static char buf[8192];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "reg_mr");
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "channel");
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	CHECK(cq, "create_cq");
	struct ibv_qp *qp = make_qp(pd, cq, 8);
	printf("ready\n");
	fflush(stdout);
	char line[16];
	CHECK(fgets(line, sizeof line, stdin), "stdin");

	/* The daemon is gone. */
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(ctx, &ev) == 0 && ev.event_type == IBV_EVENT_DEVICE_FATAL,
	      "first async event: %d", ev.event_type);
	ibv_ack_async_event(&ev);
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EIO, "then EIO");
	struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
	struct ibv_send_wr w = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_SEND },
			   *bad;
	int rc = ibv_post_send(qp, &w, &bad);
	CHECK(rc != 0, "post_send accepted after the daemon died");
	printf("post_send: %s\n", strerror(rc));
	struct ibv_recv_wr r = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *rbad;
	rc = ibv_post_recv(qp, &r, &rbad);
	CHECK(rc != 0, "post_recv accepted after the daemon died");
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(cq, 1, &wc) <= 0, "poll_cq");
	rc = ibv_req_notify_cq(cq, 0);
	printf("req_notify_cq: %d\n", rc);
	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) == NULL && errno != 0,
	      "reg_mr after the daemon died");
	printf("reg_mr: %s\n", strerror(errno));
	errno = 0;
	CHECK(ibv_alloc_pd(ctx) == NULL && errno != 0, "alloc_pd after the daemon died");
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) != 0, "modify_qp");
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) != 0, "query_device");
	/* Teardown answers, whatever it answers, and returns. */
	printf("destroy_qp: %d\n", ibv_destroy_qp(qp));
	printf("destroy_cq: %d\n", ibv_destroy_cq(cq));
	printf("destroy_comp_channel: %d\n", ibv_destroy_comp_channel(ch));
	printf("dereg_mr: %d\n", ibv_dereg_mr(mr));
	printf("dealloc_pd: %d\n", ibv_dealloc_pd(pd));
	printf("close_device: %d\n", ibv_close_device(ctx));
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(n == 0, "%d devices without a daemon", n);
	if (list)
		ibv_free_device_list(list);
	return 0;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2, "usage: edges local|gone");
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rc = strcmp(argv[1], "gone") == 0 ? daemon_gone() : local_edges();
	if (rc == 0)
		printf("ok\n");
	return rc;
}
