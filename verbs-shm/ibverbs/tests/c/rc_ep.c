/* Synchronous endpoints as rdma_server / rdma_client use them: rdma_getaddrinfo,
 * rdma_create_ep, rdma_listen, rdma_get_request, rdma_accept / rdma_connect returning
 * once established, the <rdma/rdma_verbs.h> helpers (rdma_reg_msgs, rdma_post_recv,
 * rdma_post_send, rdma_post_read, rdma_post_write, rdma_get_send_comp,
 * rdma_get_recv_comp), rdma_disconnect waiting for DISCONNECTED, rdma_destroy_ep.
 * Also rdma_migrate_id between a channel and synchronous mode, and the refusals
 * (rdma_get_request on an id with a channel, migrating a synchronous id to NULL, a
 * synchronous rdma_connect to a port nobody listens on).
 *
 *   rc_ep server IP PORT      rc_ep client IP PORT
 *
 * The client advertises SRC (pattern 1) and DST of its buffer in a SEND; the server
 * RDMA READs SRC and checks it, RDMA WRITEs pattern 2 into DST and SENDs "done"; the
 * client checks DST. Buffers are malloc'd (application memory). Prints "ok". */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "check.h"

#define REGION (128 * 1024 + 17)
#define MSG 64

struct advert {
	uint64_t src_addr, dst_addr;
	uint32_t rkey, len;
};

static char pattern(int which, size_t i)
{
	return (char)((i * 5 + which * 29 + (i >> 10)) & 0xff);
}

static struct ibv_qp_init_attr qp_attr(void)
{
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.cap.max_send_wr = 4;
	a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.sq_sig_all = 1;
	return a;
}

static void one_comp(int send, struct rdma_cm_id *id, const char *what)
{
	struct ibv_wc wc;
	int n;
	do {
		n = send ? rdma_get_send_comp(id, &wc) : rdma_get_recv_comp(id, &wc);
	} while (n == 0);
	CHECK(n == 1, "%s: get_comp returned %d", what, n);
	CHECK(wc.status == IBV_WC_SUCCESS, "%s: status %s", what, ibv_wc_status_str(wc.status));
}

/* The refusals and rdma_migrate_id, before the real work. */
static void migrate_and_refusals(const char *ip, const char *port)
{
	struct rdma_event_channel *ec = rdma_create_event_channel();
	CHECK(ec, "create_event_channel");
	struct rdma_cm_id *aid, *out;
	CHECK(rdma_create_id(ec, &aid, NULL, RDMA_PS_TCP) == 0, "create_id");
	/* rdma_get_request is for synchronous listeners only. */
	errno = 0;
	CHECK(rdma_get_request(aid, &out) == -1 && errno == EINVAL, "get_request on async id");
	/* Into synchronous mode; not twice. */
	CHECK(rdma_migrate_id(aid, NULL) == 0, "migrate to sync");
	CHECK(aid->channel && aid->channel != ec, "own channel");
	errno = 0;
	CHECK(rdma_migrate_id(aid, NULL) == -1 && errno == EINVAL, "migrate sync to NULL");
	/* Synchronous: resolving returns with the event kept in id->event. */
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };
	CHECK(inet_pton(AF_INET, ip, &dst.sin_addr) == 1, "inet_pton");
	CHECK(rdma_resolve_addr(aid, NULL, (struct sockaddr *)&dst, 2000) == 0, "resolve_addr");
	CHECK(aid->event && aid->event->event == RDMA_CM_EVENT_ADDR_RESOLVED, "sync event %s",
	      aid->event ? rdma_event_str(aid->event->event) : "none");
	/* Back onto the channel: the next event arrives there. */
	CHECK(rdma_migrate_id(aid, ec) == 0, "migrate to channel");
	CHECK(aid->channel == ec, "channel is ec");
	CHECK(rdma_resolve_route(aid, 2000) == 0, "resolve_route");
	struct rdma_cm_event *ev;
	CHECK(rdma_get_cm_event(ec, &ev) == 0, "get_cm_event");
	CHECK(ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED && ev->id == aid, "event %s",
	      rdma_event_str(ev->event));
	CHECK(rdma_ack_cm_event(ev) == 0, "ack");
	CHECK(rdma_destroy_id(aid) == 0, "destroy_id");
	rdma_destroy_event_channel(ec);
}

static void server(const char *ip, const char *port)
{
	struct rdma_addrinfo hints, *res;
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	CHECK(rdma_getaddrinfo(ip, port, &hints, &res) == 0, "getaddrinfo");
	struct ibv_qp_init_attr a = qp_attr();
	struct rdma_cm_id *listen_id, *id;
	CHECK(rdma_create_ep(&listen_id, res, NULL, &a) == 0, "create_ep (passive)");
	CHECK(listen_id->qp == NULL, "a passive endpoint has no QP");
	CHECK(rdma_listen(listen_id, 0) == 0, "listen");
	printf("listening\n");
	fflush(stdout);
	CHECK(rdma_get_request(listen_id, &id) == 0, "get_request");
	CHECK(id->event && id->event->event == RDMA_CM_EVENT_CONNECT_REQUEST, "request event");
	CHECK(id->qp && id->pd && id->recv_cq && id->recv_cq_channel && id->send_cq_channel,
	      "the request's QP and CQs from the endpoint's attributes");

	char *msgs = malloc(2 * MSG), *region = malloc(REGION);
	CHECK(msgs && region, "malloc");
	struct ibv_mr *mmr = rdma_reg_msgs(id, msgs, 2 * MSG);
	struct ibv_mr *rmr = rdma_reg_write(id, region, REGION);
	CHECK(mmr && rmr, "reg");
	CHECK(rdma_post_recv(id, NULL, msgs, MSG, mmr) == 0, "post_recv");
	CHECK(rdma_accept(id, NULL) == 0, "accept");
	CHECK(id->event && id->event->event == RDMA_CM_EVENT_ESTABLISHED, "accept returned %s",
	      id->event ? rdma_event_str(id->event->event) : "no event");

	one_comp(0, id, "advert");
	struct advert ad;
	memcpy(&ad, msgs, sizeof ad);
	CHECK(ad.len == REGION, "advert len %u", ad.len);
	memset(region, 0, REGION);
	CHECK(rdma_post_read(id, NULL, region, REGION, rmr, 0, ad.src_addr, ad.rkey) == 0,
	      "post_read");
	one_comp(1, id, "read");
	for (size_t i = 0; i < REGION; i++)
		CHECK(region[i] == pattern(1, i), "READ byte %zu", i);
	for (size_t i = 0; i < REGION; i++)
		region[i] = pattern(2, i);
	CHECK(rdma_post_write(id, NULL, region, REGION, rmr, 0, ad.dst_addr, ad.rkey) == 0,
	      "post_write");
	one_comp(1, id, "write");
	strcpy(msgs + MSG, "done");
	CHECK(rdma_post_send(id, NULL, msgs + MSG, 5, mmr, 0) == 0, "post_send");
	one_comp(1, id, "send done");

	CHECK(rdma_disconnect(id) == 0, "disconnect");
	CHECK(id->event && id->event->event == RDMA_CM_EVENT_DISCONNECTED, "disconnect returned %s",
	      id->event ? rdma_event_str(id->event->event) : "no event");
	CHECK(rdma_dereg_mr(mmr) == 0 && rdma_dereg_mr(rmr) == 0, "dereg");
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen_id);
	rdma_freeaddrinfo(res);
	free(msgs);
	free(region);
}

static void client(const char *ip, const char *port)
{
	migrate_and_refusals(ip, port);

	struct rdma_addrinfo hints, *res, *nobody;
	memset(&hints, 0, sizeof hints);
	hints.ai_port_space = RDMA_PS_TCP;
	/* Nobody listens one port up: a synchronous connect fails with ECONNREFUSED. */
	char other[16];
	snprintf(other, sizeof other, "%d", atoi(port) + 1);
	CHECK(rdma_getaddrinfo(ip, other, &hints, &nobody) == 0, "getaddrinfo");
	struct ibv_qp_init_attr a = qp_attr();
	struct rdma_cm_id *id;
	CHECK(rdma_create_ep(&id, nobody, NULL, &a) == 0, "create_ep (active, nobody)");
	errno = 0;
	CHECK(rdma_connect(id, NULL) == -1 && errno == ECONNREFUSED, "connect to nobody");
	rdma_destroy_ep(id);
	rdma_freeaddrinfo(nobody);

	CHECK(rdma_getaddrinfo(ip, port, &hints, &res) == 0, "getaddrinfo");
	a = qp_attr();
	CHECK(rdma_create_ep(&id, res, NULL, &a) == 0, "create_ep (active)");
	CHECK(id->qp && id->pd && id->send_cq && id->recv_cq, "the endpoint's QP and CQs");
	CHECK(a.cap.max_send_wr >= 4 && a.cap.max_recv_wr >= 4, "caps written back");

	char *msgs = malloc(2 * MSG), *region = malloc(2 * REGION);
	CHECK(msgs && region, "malloc");
	for (size_t i = 0; i < REGION; i++) {
		region[i] = pattern(1, i);
		region[REGION + i] = 0;
	}
	struct ibv_mr *mmr = rdma_reg_msgs(id, msgs, 2 * MSG);
	struct ibv_mr *rmr = ibv_reg_mr(id->pd, region, 2 * REGION,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
						IBV_ACCESS_REMOTE_WRITE);
	CHECK(mmr && rmr, "reg");
	CHECK(rdma_post_recv(id, NULL, msgs + MSG, MSG, mmr) == 0, "post_recv");
	CHECK(rdma_connect(id, NULL) == 0, "connect");
	CHECK(id->event && id->event->event == RDMA_CM_EVENT_ESTABLISHED, "connect returned %s",
	      id->event ? rdma_event_str(id->event->event) : "no event");

	struct advert ad = { (uintptr_t)region, (uintptr_t)region + REGION, rmr->rkey, REGION };
	memcpy(msgs, &ad, sizeof ad);
	CHECK(rdma_post_send(id, NULL, msgs, sizeof ad, mmr, 0) == 0, "post_send");
	one_comp(1, id, "send advert");
	one_comp(0, id, "done");
	CHECK(strcmp(msgs + MSG, "done") == 0, "got %.8s", msgs + MSG);
	for (size_t i = 0; i < REGION; i++)
		CHECK(region[REGION + i] == pattern(2, i), "WRITE byte %zu", i);

	CHECK(rdma_disconnect(id) == 0, "disconnect");
	CHECK(id->event && id->event->event == RDMA_CM_EVENT_DISCONNECTED, "disconnect returned %s",
	      id->event ? rdma_event_str(id->event->event) : "no event");
	CHECK(rdma_dereg_mr(mmr) == 0 && rdma_dereg_mr(rmr) == 0, "dereg");
	rdma_destroy_ep(id);
	rdma_freeaddrinfo(res);
	free(msgs);
	free(region);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: rc_ep server|client IP PORT\n");
		return 2;
	}
	if (strcmp(argv[1], "server") == 0)
		server(argv[2], argv[3]);
	else
		client(argv[2], argv[3]);
	printf("ok\n");
	return 0;
}
