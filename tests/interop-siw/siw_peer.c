/*
 * siw_peer: the Linux (siw) end of the interop cells that rping/perftest cannot drive:
 * private data, rejects, bad STags, abortive closes, and iwarpd's load generator protocol
 * (dataplane/loadgen/src/proto.rs: hello/accept in MPA private data, pattern.rs data).
 * Runs inside a siw-vm guest (built on the host, which the guests share), librdmacm.
 *
 *   siw_peer client      -a IP -p PORT [--pd HEX]                  connect, print the answer
 *   siw_peer server      -a IP -p PORT [--reject HEX] [--pd HEX]   one connection
 *   siw_peer lgen-client -a IP -p PORT --op read|write|send [--size N] [--count K] [--verify]
 *                        [--bad-stag] [--close graceful|abort|wait]
 *   siw_peer lgen-server -a IP -p PORT [--bad-stag] [--close graceful|abort|wait]
 *
 * Every line it prints starts with a keyword the test script greps: "hello", "pd",
 * "established", "rejected", "accept", "wc", "async", "cm", "verify", "done", "error".
 * Exit status 0 when the run went as asked, 1 otherwise, 2 for usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <endian.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define LGEN_MAGIC 0x4c47454eu
#define MAX_PD 196

static struct {
	const char *mode, *addr, *port, *op, *close;
	uint8_t pd[MAX_PD], reject[MAX_PD];
	int pd_len, reject_len, have_reject;
	uint32_t size, count;
	int verify, bad_stag, timeout_s;
} o = { .size = 4096, .count = 4, .close = "graceful", .timeout_s = 20, .reject_len = -1 };

static struct rdma_event_channel *ch;
static struct rdma_cm_id *id;           /* the connected id */
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static uint8_t *buf;
static size_t buf_len;
/* Data slices the client's WRITEs rotate through (see the client's setup). */
#define WRITE_SLICES 8
static size_t write_slices = 1;
static int disconnected, qp_fatal;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int parse_hex(const char *s, uint8_t *out, int max)
{
	int n = 0;
	size_t l = strlen(s);
	if (l % 2 || (int)l / 2 > max)
		return -1;
	for (size_t i = 0; i < l; i += 2) {
		unsigned v;
		if (sscanf(s + i, "%2x", &v) != 1)
			return -1;
		out[n++] = v;
	}
	return n;
}

static void print_hex(const char *what, const void *p, int len)
{
	const uint8_t *b = p;
	printf("%s len=%d hex=", what, len);
	for (int i = 0; i < len; i++)
		printf("%02x", b[i]);
	printf("\n");
	fflush(stdout);
}

/* pattern.rs: word i of the pattern of (qp, seq), little-endian. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t pat_seed(uint32_t qp, uint64_t seq)
{
	return mix64(mix64((uint64_t)qp ^ 0x6c67656e00000000ull) ^ seq);
}

static void pat_fill(uint8_t *p, uint64_t len, uint32_t qp, uint64_t seq)
{
	uint64_t s = pat_seed(qp, seq);
	for (uint64_t i = 0; i < len; i += 8) {
		uint64_t w = htole64(s + (i / 8 + 1) * 0x9e3779b97f4a7c15ull);
		memcpy(p + i, &w, len - i < 8 ? len - i : 8);
	}
}

static long pat_mismatch(const uint8_t *p, uint64_t len, uint32_t qp, uint64_t seq)
{
	uint64_t s = pat_seed(qp, seq);
	for (uint64_t i = 0; i < len; i += 8) {
		uint64_t w = htole64(s + (i / 8 + 1) * 0x9e3779b97f4a7c15ull);
		if (memcmp(p + i, &w, len - i < 8 ? len - i : 8))
			return (long)i;
	}
	return -1;
}

static void put32(uint8_t *b, uint32_t v) { v = htobe32(v); memcpy(b, &v, 4); }
static void put64(uint8_t *b, uint64_t v) { v = htobe64(v); memcpy(b, &v, 8); }
static uint32_t get32(const uint8_t *b) { uint32_t v; memcpy(&v, b, 4); return be32toh(v); }
static uint64_t get64(const uint8_t *b) { uint64_t v; memcpy(&v, b, 8); return be64toh(v); }

static void die(const char *what)
{
	printf("error %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Drains async events and the CQ once; returns completions seen (status in *st). */
static int pump_verbs(struct ibv_wc *wc)
{
	if (id && id->verbs) {
		struct ibv_async_event ev;
		while (ibv_get_async_event(id->verbs, &ev) == 0) {
			printf("async %s\n", ibv_event_type_str(ev.event_type));
			if (ev.event_type == IBV_EVENT_QP_FATAL || ev.event_type == IBV_EVENT_QP_ACCESS_ERR ||
			    ev.event_type == IBV_EVENT_QP_REQ_ERR)
				qp_fatal = 1;
			ibv_ack_async_event(&ev);
		}
	}
	if (!cq)
		return 0;
	int n = ibv_poll_cq(cq, 1, wc);
	if (n > 0 && wc->status != IBV_WC_SUCCESS)
		printf("wc status=%d (%s) opcode=%d vendor_err=0x%x\n", wc->status,
		       ibv_wc_status_str(wc->status), wc->opcode, wc->vendor_err);
	return n;
}

/* Waits for a CM event (any type when want < 0), polling verbs meanwhile. */
static struct rdma_cm_event *wait_cm(int want, double timeout_s)
{
	double end = now_s() + timeout_s;
	struct ibv_wc wc;
	while (now_s() < end) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(ch, &ev) == 0) {
			printf("cm %s status=%d\n", rdma_event_str(ev->event), ev->status);
			fflush(stdout);
			if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
				disconnected = 1;
			if (want < 0 || (int)ev->event == want || ev->event == RDMA_CM_EVENT_REJECTED ||
			    ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_CONNECT_ERROR ||
			    ev->event == RDMA_CM_EVENT_UNREACHABLE || ev->event == RDMA_CM_EVENT_ADDR_ERROR ||
			    ev->event == RDMA_CM_EVENT_ROUTE_ERROR || ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ||
			    ev->event == RDMA_CM_EVENT_ESTABLISHED)
				return ev;
			rdma_ack_cm_event(ev);
		} else if (errno != EAGAIN) {
			die("rdma_get_cm_event");
		}
		pump_verbs(&wc);
		usleep(1000);
	}
	printf("error timeout waiting for %s\n", want < 0 ? "a CM event" : rdma_event_str(want));
	return NULL;
}

static void setup_qp(struct rdma_cm_id *cid, size_t len, int access)
{
	pd = ibv_alloc_pd(cid->verbs);
	cq = pd ? ibv_create_cq(cid->verbs, 64, NULL, NULL, 0) : NULL;
	if (!cq)
		die("pd/cq");
	int fl = fcntl(cid->verbs->async_fd, F_GETFL);
	fcntl(cid->verbs->async_fd, F_SETFL, fl | O_NONBLOCK);
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 1, .max_recv_sge = 1 } };
	if (rdma_create_qp(cid, pd, &qa))
		die("rdma_create_qp");
	buf_len = len ? len : 64;
	/* data, then 64 bytes of control slots (receive at +0, send at +32) */
	buf = aligned_alloc(4096, (buf_len + 64 + 4095) & ~4095ul);
	memset(buf, 0, buf_len + 64);
	mr = ibv_reg_mr(pd, buf, buf_len + 64, IBV_ACCESS_LOCAL_WRITE | access);
	if (!mr)
		die("ibv_reg_mr");
	id = cid;
}

static int post_recv_at(uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(buf + off), .length = len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	if (ibv_post_recv(id->qp, &wr, &bad)) {
		printf("error ibv_post_recv: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int post_send_at(uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(buf + off), .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	if (ibv_post_send(id->qp, &wr, &bad)) {
		printf("error ibv_post_send: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* Completions polled while waiting for another opcode, kept for their own wait. */
#define STASH_MAX 64
static struct ibv_wc stash[STASH_MAX];
static int nstash;

/* Waits for a completion of `opcode` (successful ones of other opcodes are kept for later
 * waits). 0 on success, -1 on an error completion or timeout, -2 on a disconnect, -3 on a
 * flushed WR (the QP left RTS: the peer closed). */
static int wait_wc(enum ibv_wc_opcode opcode, struct ibv_wc *out)
{
	for (int i = 0; i < nstash; i++) {
		if (stash[i].opcode == opcode) {
			*out = stash[i];
			memmove(&stash[i], &stash[i + 1], (size_t)(nstash - i - 1) * sizeof(stash[0]));
			nstash--;
			return 0;
		}
	}
	double end = now_s() + o.timeout_s;
	while (now_s() < end) {
		struct ibv_wc wc;
		int n = pump_verbs(&wc);
		if (n > 0) {
			if (wc.status == IBV_WC_WR_FLUSH_ERR)
				return -3;
			if (wc.status != IBV_WC_SUCCESS)
				return -1;
			if (wc.opcode == opcode) {
				*out = wc;
				return 0;
			}
			if (nstash == STASH_MAX) {
				printf("error more than %d completions unclaimed\n", STASH_MAX);
				return -1;
			}
			stash[nstash++] = wc;
			continue;
		}
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(ch, &ev) == 0) {
			printf("cm %s status=%d\n", rdma_event_str(ev->event), ev->status);
			int disc = ev->event == RDMA_CM_EVENT_DISCONNECTED;
			rdma_ack_cm_event(ev);
			if (disc) {
				disconnected = 1;
				return -2;
			}
		}
		usleep(200);
	}
	printf("error timeout waiting for a completion\n");
	return -1;
}

static int post_rdma_at(enum ibv_wr_opcode opc, uint32_t rkey, uint64_t raddr, uint32_t len,
		       size_t off)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(buf + off), .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = opc,
		.send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.rkey = rkey;
	wr.wr.rdma.remote_addr = raddr;
	if (ibv_post_send(id->qp, &wr, &bad)) {
		printf("error ibv_post_send: %s\n", strerror(errno));
		return -1;
	}
	struct ibv_wc wc;
	double end = now_s() + o.timeout_s;
	while (now_s() < end) {
		int n = pump_verbs(&wc);
		if (n > 0)
			return wc.status == IBV_WC_SUCCESS ? 0 : -1;
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(ch, &ev) == 0) {
			printf("cm %s status=%d\n", rdma_event_str(ev->event), ev->status);
			if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
				disconnected = 1;
			rdma_ack_cm_event(ev);
		}
	}
	printf("error timeout waiting for a completion\n");
	return -1;
}

/* Graceful: rdma_disconnect + DISCONNECTED; abort: QP to ERROR, exit without disconnect;
 * wait: until the peer disconnects. Also gives a pending Terminate time to arrive. */
static int do_close(void)
{
	if (!strcmp(o.close, "abort")) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		int r = ibv_modify_qp(id->qp, &a, IBV_QP_STATE);
		printf("done abort modify_qp=%d\n", r);
		return 0;
	}
	if (!strcmp(o.close, "graceful") && !disconnected)
		rdma_disconnect(id);
	struct rdma_cm_event *ev = NULL;
	while (!disconnected && (ev = wait_cm(RDMA_CM_EVENT_DISCONNECTED, o.timeout_s)))
		rdma_ack_cm_event(ev);
	struct ibv_wc wc;
	for (int i = 0; i < 50; i++) {  /* late async events / flushed completions */
		pump_verbs(&wc);
		usleep(2000);
	}
	printf("done close=%s disconnected=%d qp_fatal=%d\n", o.close, disconnected, qp_fatal);
	return disconnected ? 0 : 1;
}

static struct rdma_cm_id *resolve_and_connect(const void *pdata, int plen,
					      struct rdma_cm_event **out)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct rdma_cm_id *cid;
	if (rdma_getaddrinfo(o.addr, o.port, &hints, &res))
		die("rdma_getaddrinfo");
	if (rdma_create_id(ch, &cid, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_resolve_addr(cid, NULL, res->ai_dst_addr, 2000))
		die("rdma_resolve_addr");
	struct rdma_cm_event *ev = wait_cm(RDMA_CM_EVENT_ADDR_RESOLVED, 5);
	if (!ev || ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
		exit(1);
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(cid, 2000))
		die("rdma_resolve_route");
	ev = wait_cm(RDMA_CM_EVENT_ROUTE_RESOLVED, 5);
	if (!ev || ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED)
		exit(1);
	rdma_ack_cm_event(ev);
	/* WRITEs each get a slice of their own (up to WRITE_SLICES): siw with zcopy_tx
	 * completes a WRITE once its pages are handed to TCP, and rewriting them for the next
	 * WRITE changed bytes still waiting to go out, after their MPA CRC was computed
	 * (docs/INTEROP.md difference 14). */
	int writes = o.op && !strcmp(o.op, "write");
	size_t slices = writes ? (o.count < WRITE_SLICES ? (o.count ? o.count : 1) : WRITE_SLICES) : 1;
	setup_qp(cid, (size_t)o.size * slices, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	write_slices = slices;
	if (o.op && !strcmp(o.op, "send") && post_recv_at(2, buf_len, 16))
		exit(1);
	struct rdma_conn_param cp = { .private_data = pdata, .private_data_len = plen,
		.initiator_depth = 1, .responder_resources = 1 };
	if (rdma_connect(cid, &cp))
		die("rdma_connect");
	ev = wait_cm(RDMA_CM_EVENT_ESTABLISHED, o.timeout_s);
	if (!ev)
		exit(1);
	if (ev->param.conn.private_data_len)
		print_hex(ev->event == RDMA_CM_EVENT_ESTABLISHED ? "pd established" : "pd rejected",
			  ev->param.conn.private_data, ev->param.conn.private_data_len);
	*out = ev;
	return cid;
}

static int run_client(void)
{
	struct rdma_cm_event *ev;
	resolve_and_connect(o.pd, o.pd_len, &ev);
	int ok = ev->event == RDMA_CM_EVENT_ESTABLISHED;
	printf("%s status=%d\n", ok ? "established" : "rejected", ev->status);
	rdma_ack_cm_event(ev);
	if (!ok)
		return 0;
	return do_close();
}

/* SENDs of the load generator's pattern against its credits (depth 1: one credit,
 * returned after each SEND with the server's count of bad payloads). */
static int lgen_sends(uint32_t credits)
{
	int bad_total = 0;
	for (uint32_t k = 0; k < o.count; k++) {
		struct ibv_wc wc;
		while (credits == 0) {
			if (wait_wc(IBV_WC_RECV, &wc))
				return -1;
			const uint8_t *m = buf + buf_len;
			if (m[0] == 1) {
				credits += get32(m + 4);
				bad_total += (int)get64(m + 8);
			}
			if (post_recv_at(2, buf_len, 16))
				return -1;
		}
		pat_fill(buf, o.size, 7, k);
		if (post_send_at(1, 0, o.size) || wait_wc(IBV_WC_SEND, &wc))
			return -1;
		credits--;
	}
	/* the last credit says whether the server found the payloads good */
	struct ibv_wc wc;
	if (wait_wc(IBV_WC_RECV, &wc) == 0 && buf[buf_len] == 1)
		bad_total += (int)get64(buf + buf_len + 8);
	printf("verify server counted %d bad sends\n", bad_total);
	return bad_total ? -1 : 0;
}

static int run_lgen_client(void)
{
	int read = !strcmp(o.op, "read"), send = !strcmp(o.op, "send");
	uint8_t hello[20] = {0};
	put32(hello, LGEN_MAGIC);
	hello[4] = 0; hello[5] = 1;               /* version 1 */
	hello[6] = send ? 3 : read ? 2 : 1;
	hello[7] = o.verify ? 1 : 0;
	put32(hello + 8, o.size);
	put32(hello + 12, 1);                     /* depth: one slot */
	put32(hello + 16, 7);                     /* qp index */
	struct rdma_cm_event *ev;
	resolve_and_connect(hello, sizeof hello, &ev);
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		printf("rejected status=%d\n", ev->status);
		return 1;
	}
	const uint8_t *a = ev->param.conn.private_data;
	if (ev->param.conn.private_data_len < 32 || get32(a) != LGEN_MAGIC) {
		printf("error accept private data is not a loadgen accept\n");
		return 1;
	}
	uint32_t stag = get32(a + 8);
	uint64_t base = get64(a + 12), len = get64(a + 20);
	uint32_t credits = get32(a + 28);
	rdma_ack_cm_event(ev);
	printf("established accept stag=0x%08x base=0x%llx len=%llu credits=%u\n", stag,
	       (unsigned long long)base, (unsigned long long)len, credits);
	if (send) {
		int r = lgen_sends(credits);
		printf("done send %u x %u B: %s\n", o.count, o.size, r ? "failed" : "ok");
		int c = do_close();
		return r ? 1 : c;
	}
	if (o.bad_stag)
		stag ^= 0x00ffff00;           /* another index: no such STag at the peer */
	int fails = 0, bad = 0;
	for (uint32_t k = 0; k < o.count; k++) {
		size_t off = read ? 0 : (size_t)(k % write_slices) * o.size;
		if (!read)
			pat_fill(buf + off, o.size, 7, k);
		else
			memset(buf, 0xee, o.size);
		if (post_rdma_at(read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE, stag, base, o.size, off)) {
			fails++;
			break;
		}
		if (read && o.verify) {
			long at = pat_mismatch(buf, o.size, 7, 0);
			if (at >= 0) {
				printf("verify mismatch at %ld of read %u\n", at, k);
				bad++;
			}
		}
	}
	printf("done %s %u x %u B: %d failed, %d mismatches\n", o.op, o.count, o.size, fails, bad);
	int r = do_close();
	if (o.bad_stag)
		return fails ? 0 : 1;
	return fails || bad ? 1 : r;
}

/* The load generator server's SEND side: verify each payload against the pattern of
 * (qp, sequence), repost, return credits in batches of max(depth / 2, 1) with the count of
 * bad payloads, until the client disconnects. */
static int lgen_serve_sends(uint32_t qpi, uint32_t size, uint32_t depth)
{
	uint32_t batch = depth / 2 ? depth / 2 : 1, consumed = 0, bad = 0, got = 0, bad_total = 0;
	uint64_t seq = 0;
	for (;;) {
		struct ibv_wc wc;
		int r = wait_wc(IBV_WC_RECV, &wc);
		if (r == -2 || r == -3)
			break;
		if (r)
			return 1;
		size_t slot = (size_t)wc.wr_id;
		if (wc.byte_len != size || pat_mismatch(buf + slot * size, size, qpi, seq) >= 0) {
			bad++;
			bad_total++;
		}
		seq++;
		got++;
		if (post_recv_at(slot, slot * size, size))
			return 1;
		if (++consumed >= batch) {
			uint8_t *m = buf + buf_len + 32;
			memset(m, 0, 16);
			m[0] = 1;
			put32(m + 4, consumed);
			put64(m + 8, bad);
			if (post_send_at(100, buf_len + 32, 16) || wait_wc(IBV_WC_SEND, &wc))
				return 1;
			consumed = 0;
			bad = 0;
		}
	}
	printf("verify received %u sends, %u bad\n", got, bad_total);
	printf("done close=wait disconnected=%d qp_fatal=%d\n", disconnected, qp_fatal);
	return bad_total || !got ? 1 : 0;
}

static int run_server(int lgen)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct rdma_cm_id *lid;
	if (rdma_getaddrinfo(o.addr, o.port, &hints, &res))
		die("rdma_getaddrinfo");
	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) || rdma_bind_addr(lid, res->ai_src_addr) ||
	    rdma_listen(lid, 4))
		die("listen");
	printf("listening\n");
	fflush(stdout);
	struct rdma_cm_event *ev = wait_cm(RDMA_CM_EVENT_CONNECT_REQUEST, o.timeout_s);
	if (!ev || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		return 1;
	struct rdma_cm_id *cid = ev->id;
	const uint8_t *h = ev->param.conn.private_data;
	int hlen = ev->param.conn.private_data_len;
	print_hex("pd request", h, hlen);
	if (o.have_reject) {
		rdma_reject(cid, o.reject, o.reject_len);
		rdma_ack_cm_event(ev);
		printf("done rejected\n");
		usleep(200000);
		return 0;
	}
	uint8_t acc[MAX_PD];
	int acc_len = o.pd_len;
	memcpy(acc, o.pd, o.pd_len);
	uint32_t op = 0, size = 0, depth = 1, qpi = 0, verify = 0;
	if (lgen) {
		if (hlen < 20 || get32(h) != LGEN_MAGIC) {
			printf("error request private data is not a loadgen hello\n");
			rdma_reject(cid, NULL, 0);
			return 1;
		}
		op = h[6]; verify = h[7] & 1; size = get32(h + 8); depth = get32(h + 12); qpi = get32(h + 16);
		if (depth == 0)
			depth = 1;
		printf("hello op=%u verify=%u size=%u depth=%u qp=%u\n", op, verify, size, depth, qpi);
		if (op < 1 || op > 4 || depth > 32) {
			printf("error loadgen op %u not supported here\n", op);
			rdma_reject(cid, NULL, 0);
			return 1;
		}
	}
	setup_qp(cid, (size_t)size * depth, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	if (lgen && op == 3)
		for (uint32_t j = 0; j < depth; j++)
			if (post_recv_at(j, (size_t)j * size, size))
				return 1;
	if (lgen) {
		if (op == 2)
			for (uint32_t j = 0; j < depth; j++)
				pat_fill(buf + (size_t)j * size, size, qpi, j);
		memset(acc, 0, 32);
		put32(acc, LGEN_MAGIC);
		acc[5] = 1;
		put32(acc + 8, o.bad_stag ? mr->rkey ^ 0x00ffff00 : mr->rkey);
		put64(acc + 12, (uintptr_t)buf);
		put64(acc + 20, (uint64_t)size * depth);
		put32(acc + 28, op == 3 ? depth : 0);
		acc_len = 32;
	}
	struct rdma_conn_param cp = { .private_data = acc, .private_data_len = acc_len,
		.initiator_depth = 1, .responder_resources = 4 };
	if (rdma_accept(cid, &cp))
		die("rdma_accept");
	rdma_ack_cm_event(ev);
	ev = wait_cm(RDMA_CM_EVENT_ESTABLISHED, o.timeout_s);
	if (!ev || ev->event != RDMA_CM_EVENT_ESTABLISHED)
		return 1;
	rdma_ack_cm_event(ev);
	printf("established\n");
	fflush(stdout);
	if (lgen && op == 3)
		return lgen_serve_sends(qpi, size, depth);
	if (!strcmp(o.close, "abort")) {
		usleep(300000);
	}
	return do_close();
}

int main(int argc, char **argv)
{
	static struct option lo[] = {
		{"pd", 1, 0, 'P'}, {"reject", 1, 0, 'R'}, {"op", 1, 0, 'o'}, {"size", 1, 0, 's'},
		{"count", 1, 0, 'n'}, {"verify", 0, 0, 'v'}, {"bad-stag", 0, 0, 'b'},
		{"close", 1, 0, 'c'}, {"timeout", 1, 0, 't'}, {0, 0, 0, 0} };
	if (argc < 2) {
		fprintf(stderr, "usage: siw_peer client|server|lgen-client|lgen-server -a IP -p PORT ...\n");
		return 2;
	}
	o.mode = argv[1];
	int c;
	optind = 2;
	while ((c = getopt_long(argc, argv, "a:p:", lo, NULL)) != -1) {
		switch (c) {
		case 'a': o.addr = optarg; break;
		case 'p': o.port = optarg; break;
		case 'P': if ((o.pd_len = parse_hex(optarg, o.pd, MAX_PD)) < 0) return 2; break;
		case 'R': if ((o.reject_len = parse_hex(optarg, o.reject, MAX_PD)) < 0) return 2;
			  o.have_reject = 1; break;
		case 'o': o.op = optarg; break;
		case 's': o.size = strtoul(optarg, NULL, 0); break;
		case 'n': o.count = strtoul(optarg, NULL, 0); break;
		case 'v': o.verify = 1; break;
		case 'b': o.bad_stag = 1; break;
		case 'c': o.close = optarg; break;
		case 't': o.timeout_s = atoi(optarg); break;
		default: return 2;
		}
	}
	if (!o.addr || !o.port || o.size == 0 || o.size > (64u << 20))
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ch = rdma_create_event_channel();
	if (!ch)
		die("rdma_create_event_channel");
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	if (!strcmp(o.mode, "client"))
		return run_client();
	if (!strcmp(o.mode, "server"))
		return run_server(0);
	if (!strcmp(o.mode, "lgen-client")) {
		if (!o.op || (strcmp(o.op, "read") && strcmp(o.op, "write") && strcmp(o.op, "send")))
			return 2;
		return run_lgen_client();
	}
	if (!strcmp(o.mode, "lgen-server"))
		return run_server(1);
	return 2;
}
