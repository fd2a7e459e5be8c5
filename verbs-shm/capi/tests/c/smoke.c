/* A C caller of libiwarp_verbs_capi for tests/c_smoke.rs, against its fake daemon:
 * control verbs, a posted WR list, a polled completion, error codes. Speaks on stdout,
 * waits for the test on stdin. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include <iwarp_verbs.h>

#define CHECK(x)                                                                          \
    do {                                                                                  \
        if (!(x)) {                                                                       \
            fprintf(stderr, "smoke: %s failed: %s (%s)\n", #x,                            \
                    iwv_strerror(iwv_last_error()), iwv_last_error_message());            \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

int main(int argc, char **argv)
{
    struct iwv_device_attr dev;
    struct iwv_port_attr port;
    struct iwv_qp_init_attr init;
    struct iwv_send_wr wr[2], *bad = NULL;
    struct iwv_sge sge;
    struct iwv_wc wc[2];
    struct iwv_context *ctx;
    struct iwv_pd *pd;
    struct iwv_arena *arena;
    struct iwv_mr *mr;
    struct iwv_cq *cq;
    struct iwv_qp *qp;
    char line[64];
    int n;

    if (argc != 2)
        return 2;
    CHECK((ctx = iwv_open_path(argv[1])) != NULL);
    CHECK(iwv_query_device(ctx, &dev) == 0);
    CHECK(iwv_query_port(ctx, 9, &port) == -IWV_ENOENT);
    CHECK(iwv_last_error() == -IWV_ENOENT);
    printf("vendor %s max_qp %u port9 \"%s\"\n", dev.vendor, dev.max_qp,
           iwv_strerror(-IWV_ENOENT));
    CHECK((pd = iwv_alloc_pd(ctx)) != NULL);
    CHECK((arena = iwv_alloc_arena(ctx, 4096, 0)) != NULL);
    memcpy(iwv_arena_addr(arena), "smoke", 5);
    CHECK((mr = iwv_reg_mr(pd, arena, 0, 4096, IWV_ACCESS_LOCAL_WRITE)) != NULL);
    CHECK((cq = iwv_create_cq(ctx, 8, NULL, NULL)) != NULL);
    memset(&init, 0, sizeof init);
    init.send_cq = init.recv_cq = cq;
    init.cap.max_send_wr = 4;
    CHECK((qp = iwv_create_qp(pd, &init)) != NULL);

    sge.addr = iwv_mr_addr(mr);
    sge.length = 5;
    sge.lkey = iwv_mr_lkey(mr);
    memset(wr, 0, sizeof wr);
    wr[0].wr_id = 7;
    wr[0].next = &wr[1];
    wr[0].sg_list = &sge;
    wr[0].num_sge = 1;
    wr[0].opcode = IWV_WR_SEND;
    wr[0].send_flags = IWV_SEND_SIGNALED;
    wr[1].wr_id = 8;
    wr[1].sg_list = &sge;
    wr[1].num_sge = 1;
    wr[1].opcode = IWV_WR_RDMA_WRITE;
    wr[1].rdma.remote_addr = 0x1000;
    wr[1].rdma.rkey = 0x99;
    CHECK(iwv_post_send(qp, wr, &bad) == 0);
    printf("posted qp %u cq %u lkey %u addr %llu\n", iwv_qp_num(qp), iwv_cq_handle(cq),
           iwv_mr_lkey(mr), (unsigned long long)iwv_mr_addr(mr));
    fflush(stdout);

    /* The test pushes a completion, then says so. */
    CHECK(fgets(line, sizeof line, stdin) != NULL);
    n = iwv_poll_cq(cq, 2, wc);
    CHECK(n == 1);
    printf("wc wr_id %llu status %u opcode %u byte_len %u qp %u\n",
           (unsigned long long)wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].byte_len,
           wc[0].qp_num);
    CHECK(iwv_destroy_qp(qp) == 0);
    CHECK(iwv_destroy_cq(cq) == 0);
    CHECK(iwv_dereg_mr(mr) == 0);
    CHECK(iwv_free_arena(arena) == 0);
    CHECK(iwv_dealloc_pd(pd) == 0);
    CHECK(iwv_close(ctx) == 0);
    CHECK(iwv_close(NULL) == -IWV_EFAULT);
    printf("done\n");
    return 0;
}
