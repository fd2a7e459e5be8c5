/* ibv_rereg_mr against one daemon: new access rights (new key), a new range of
 * application memory (mmap'd, not page aligned), refusals (no flags, bad rights, another
 * PD) that leave the MR as it was. Prints "ok". */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

#include "check.h"

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1, "a device");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	CHECK(pd && pd2, "alloc_pd");
	char *a = malloc(5000);
	CHECK(a, "malloc");
	memset(a, 0x11, 5000);
	struct ibv_mr *mr = ibv_reg_mr(pd, a, 5000, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "reg_mr");
	uint32_t key0 = mr->lkey;

	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) == 0,
	      "change access");
	CHECK(mr->lkey != key0 && mr->rkey == mr->lkey && mr->addr == a && mr->length == 5000,
	      "new key %#x (was %#x), same range", mr->lkey, key0);

	char *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED, "mmap");
	for (int i = 0; i < 3 * 4096; i++)
		m[i] = (char)(i * 7);
	uint32_t key1 = mr->lkey;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, m + 100, 8000, 0) == 0,
	      "change translation");
	CHECK(mr->addr == m + 100 && mr->length == 8000 && mr->lkey != key1, "new range");
	for (int i = 0; i < 3 * 4096; i++)
		CHECK(m[i] == (char)(i * 7), "byte %d of the new range kept", i);
	for (int i = 0; i < 5000; i++)
		CHECK(a[i] == 0x11, "byte %d of the old range kept", i);

	uint32_t key2 = mr->lkey;
	errno = 0;
	CHECK(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
	      "no flags");
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_REMOTE_WRITE) == IBV_REREG_MR_ERR_INPUT,
	      "REMOTE_WRITE without LOCAL_WRITE");
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == IBV_REREG_MR_ERR_CMD &&
		      errno == EOPNOTSUPP,
	      "another PD");
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 0, 0) ==
		      IBV_REREG_MR_ERR_INPUT,
	      "NULL range");
	CHECK(mr->lkey == key2 && mr->addr == m + 100 && mr->length == 8000, "unchanged");

	CHECK(ibv_dereg_mr(mr) == 0, "dereg");
	free(a);
	CHECK(ibv_dealloc_pd(pd) == 0 && ibv_dealloc_pd(pd2) == 0, "dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "close");
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
