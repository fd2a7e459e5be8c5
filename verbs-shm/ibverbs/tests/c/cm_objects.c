/* librdmacm objects without a connection, against one daemon: rdma_create_qp with no
 * CQs (it makes them, each on its own completion channel, as librdmacm does) or one,
 * and rdma_destroy_qp (which destroys only the CQs it made); rdma_getaddrinfo and
 * rdma_bind_addr with IPv4 and (refused: EAFNOSUPPORT) IPv6. Prints "ok". */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "check.h"

int main(void)
{
	struct rdma_event_channel *ec = rdma_create_event_channel();
	CHECK(ec, "rdma_create_event_channel");
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ec, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
	CHECK(id->verbs, "id->verbs");

	/* No PD, no CQs: all made for the id. */
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 6,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	CHECK(rdma_create_qp(id, NULL, &a) == 0, "rdma_create_qp without CQs");
	CHECK(id->qp && id->pd && id->send_cq && id->recv_cq, "id fields");
	CHECK(id->send_cq != id->recv_cq, "one CQ per queue");
	CHECK(id->send_cq_channel && id->recv_cq_channel &&
		      id->send_cq_channel != id->recv_cq_channel,
	      "one channel per CQ");
	CHECK(id->send_cq->channel == id->send_cq_channel &&
		      id->recv_cq->channel == id->recv_cq_channel,
	      "the CQs' channels");
	CHECK(id->qp->send_cq == id->send_cq && id->qp->recv_cq == id->recv_cq, "the QP's CQs");
	CHECK(id->recv_cq->cqe >= 6 && id->send_cq->cqe >= 4, "CQ sizes %d %d",
	      id->recv_cq->cqe, id->send_cq->cqe);
	CHECK(rdma_create_qp(id, NULL, &a) == -1 && errno == EINVAL, "a second QP on the id");
	CHECK(ibv_req_notify_cq(id->recv_cq, 0) == 0, "req_notify recv");
	CHECK(ibv_req_notify_cq(id->send_cq, 0) == 0, "req_notify send");
	char *buf = malloc(4096);
	CHECK(buf, "malloc");
	struct ibv_mr *mr = ibv_reg_mr(id->pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "reg_mr on id->pd");
	struct ibv_sge sge = { (uintptr_t)buf, 64, mr->lkey };
	struct ibv_recv_wr r = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(id->qp, &r, &bad) == 0, "post_recv");
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(id->recv_cq, 1, &wc) == 0, "nothing completed");
	rdma_destroy_qp(id);
	CHECK(!id->qp && !id->send_cq && !id->recv_cq && !id->send_cq_channel &&
		      !id->recv_cq_channel,
	      "cleared by rdma_destroy_qp");

	/* The application's send CQ, a recv CQ made for it: destroy leaves ours. */
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	CHECK(cq, "create_cq");
	struct ibv_qp_init_attr b = { .send_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	CHECK(rdma_create_qp(id, NULL, &b) == 0, "rdma_create_qp with a send CQ");
	CHECK(id->send_cq == cq && id->recv_cq && id->recv_cq != cq, "one CQ made");
	CHECK(id->recv_cq_channel && !id->send_cq_channel, "channels");
	rdma_destroy_qp(id);
	CHECK(!id->recv_cq, "made CQ gone");
	CHECK(ibv_destroy_cq(cq) == 0, "the application's CQ survives rdma_destroy_qp");

	CHECK(ibv_dereg_mr(mr) == 0, "dereg_mr");
	free(buf);
	/* Addresses: IPv4 works, IPv6 is refused clearly. */
	struct rdma_addrinfo *res, hints = { .ai_flags = RAI_PASSIVE };
	CHECK(rdma_getaddrinfo("198.18.0.1", "7000", NULL, &res) == 0, "getaddrinfo IPv4");
	CHECK(res->ai_family == AF_INET && res->ai_dst_addr &&
		      ((struct sockaddr_in *)res->ai_dst_addr)->sin_port == htons(7000),
	      "destination");
	rdma_freeaddrinfo(res);
	CHECK(rdma_getaddrinfo(NULL, "7001", &hints, &res) == 0 && res->ai_src_addr,
	      "getaddrinfo passive");
	rdma_freeaddrinfo(res);
	errno = 0;
	CHECK(rdma_getaddrinfo("::1", "7000", NULL, &res) == -1 && errno == EAFNOSUPPORT,
	      "getaddrinfo IPv6");
	hints.ai_family = AF_INET6;
	errno = 0;
	CHECK(rdma_getaddrinfo("198.18.0.1", "7000", &hints, &res) == -1 && errno == EAFNOSUPPORT,
	      "an AF_INET6 hint");
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(7002) };
	errno = 0;
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&s6) == -1 && errno == EAFNOSUPPORT,
	      "bind to IPv6");

	/* Addresses given in the hints, no node or service (libfabric's way). */
	struct sockaddr_in d4 = { .sin_family = AF_INET, .sin_port = htons(7003) };
	inet_pton(AF_INET, "198.18.0.9", &d4.sin_addr);
	struct rdma_addrinfo h2 = { .ai_dst_addr = (struct sockaddr *)&d4,
				    .ai_dst_len = sizeof d4 };
	CHECK(rdma_getaddrinfo(NULL, NULL, &h2, &res) == 0 && res->ai_dst_addr &&
		      !res->ai_src_addr &&
		      memcmp(res->ai_dst_addr, &d4, sizeof d4) == 0,
	      "getaddrinfo from the hints' address");
	rdma_freeaddrinfo(res);
	errno = 0;
	CHECK(rdma_getaddrinfo(NULL, NULL, NULL, &res) == -1 && errno == EINVAL,
	      "getaddrinfo of nothing");

	/* Port 0: rdma_listen picks an ephemeral port; a loopback address binds to the
	 * device (as rdma_cm). */
	struct rdma_cm_id *lid;
	CHECK(rdma_create_id(ec, &lid, NULL, RDMA_PS_TCP) == 0, "rdma_create_id (listener)");
	struct sockaddr_in lo = { .sin_family = AF_INET };
	inet_pton(AF_INET, "127.0.0.1", &lo.sin_addr);
	CHECK(rdma_bind_addr(lid, (struct sockaddr *)&lo) == 0, "bind to loopback");
	CHECK(rdma_listen(lid, 0) == 0, "listen on port 0");
	uint16_t p = ntohs(rdma_get_src_port(lid));
	CHECK(p >= 49152, "ephemeral port %u", p);
	CHECK(((struct sockaddr_in *)rdma_get_local_addr(lid))->sin_port == htons(p),
	      "the bound address holds the port");
	struct sockaddr_in *la = (struct sockaddr_in *)rdma_get_local_addr(lid);
	CHECK(la->sin_addr.s_addr != htonl(INADDR_LOOPBACK) && la->sin_addr.s_addr != 0,
	      "a loopback bind names the device's address, where peers reach it");
	CHECK(rdma_destroy_id(lid) == 0, "rdma_destroy_id (listener)");

	CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
	rdma_destroy_event_channel(ec);
	printf("ok\n");
	return 0;
}
