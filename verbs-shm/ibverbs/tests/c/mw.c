/* Memory windows through rdma-core's inline ibv_alloc_mw / ibv_bind_mw / ibv_dealloc_mw,
 * against one daemon: type 1 bound by the verb (new rkey), type 2 allocated, refusals
 * (a type 2 window by the verb, a range outside the MR, an MR without MW_BIND, a bad
 * type), the PD busy while windows exist, ibv_dereg_mr of an MR with a bound window
 * EBUSY (the MR stays). Prints "ok". */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "check.h"

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1, "a device");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(cq, "create_cq");
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	CHECK(qp, "create_qp");
	char *buf = malloc(8192);
	CHECK(buf, "malloc");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
					       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	CHECK(mr, "reg_mr with MW_BIND");
	struct ibv_mr *plain = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(plain, "reg_mr without MW_BIND");

	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(mw1, "alloc_mw type 1");
	CHECK(mw1->type == IBV_MW_TYPE_1 && mw1->pd == pd && mw1->context == ctx, "fields");
	struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw2, "alloc_mw type 2");
	CHECK(mw2->type == IBV_MW_TYPE_2 && mw2->rkey != mw1->rkey, "type 2 fields");
	errno = 0;
	CHECK(!ibv_alloc_mw(pd, (enum ibv_mw_type)3) && errno == EINVAL, "type 3");

	struct ibv_mw_bind b = { .wr_id = 7,
				 .bind_info = { .mr = mr, .addr = (uintptr_t)buf + 100,
						.length = 1000,
						.mw_access_flags = IBV_ACCESS_REMOTE_READ |
								   IBV_ACCESS_REMOTE_WRITE } };
	CHECK(ibv_bind_mw(qp, mw1, &b) == 0, "bind type 1");
	CHECK(mw1->rkey != 0 && mw1->rkey != mr->rkey, "window rkey %#x", mw1->rkey);
	uint32_t first = mw1->rkey;
	CHECK(ibv_bind_mw(qp, mw1, &b) == 0, "rebind type 1");
	printf("rkeys %#x %#x\n", first, mw1->rkey);
	CHECK(ibv_bind_mw(qp, mw2, &b) == EINVAL, "a type 2 window by the verb");
	struct ibv_mw_bind outside = b;
	outside.bind_info.addr = (uintptr_t)buf + 8000;
	CHECK(ibv_bind_mw(qp, mw1, &outside) != 0, "a range outside the MR");
	struct ibv_mw_bind nobind = b;
	nobind.bind_info.mr = plain;
	nobind.bind_info.length = 100;
	CHECK(ibv_bind_mw(qp, mw1, &nobind) != 0, "an MR without MW_BIND");

	CHECK(ibv_dealloc_pd(pd) == EBUSY, "PD busy while windows exist");
	/* An MR with a bound window: EBUSY, and it stays registered. */
	CHECK(ibv_dereg_mr(mr) == EBUSY, "dereg of an MR with a bound window");
	CHECK(ibv_bind_mw(qp, mw1, &b) == 0, "the MR is still there");
	CHECK(ibv_dealloc_mw(mw1) == 0, "dealloc type 1");
	CHECK(ibv_dealloc_mw(mw2) == 0, "dealloc type 2");
	CHECK(ibv_dereg_mr(plain) == 0 && ibv_dereg_mr(mr) == 0, "dereg");
	CHECK(ibv_destroy_qp(qp) == 0 && ibv_destroy_cq(cq) == 0, "destroy");
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "close");
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
