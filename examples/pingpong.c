/*
 * pingpong: a SEND/RECV ping-pong over the iwarpd verbs C API (iwarp_verbs.h).
 *
 *   pingpong server [-d DAEMON] [-p PORT] [-e] [-u]
 *   pingpong client SERVER_IP [-d DAEMON] [-p PORT] [-n ITERS] [-s SIZE] [-e] [-u]
 *
 * The daemon is /run/iwarpd/<DAEMON>.verbs (default "iwarpd"), or the socket in
 * $IWARP_VERBS_SOCKET. The client says ITERS and SIZE in the connection's private data;
 * each ping carries a pattern the server checks and answers inverted, which the client
 * checks in turn. The client prints the average round-trip latency. Before the first
 * ping, the client RDMA-Writes a pattern into the server's buffer (address and rkey from
 * the accept's private data) and RDMA-Reads it back; the server checks it too. -e waits
 * for completions on a completion channel instead of busy polling; -u registers malloc'd
 * memory (iwv_reg_user_mr) instead of an arena. Exit status 0 means
 * every message and every RDMA transfer arrived intact.
 */
#define _POSIX_C_SOURCE 200809L

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <iwarp_verbs.h>

#define WAIT_MS 10000 /* longest wait for any event or completion */
#define MAGIC 0x69777070u /* "iwpp" */

struct hello {
    uint32_t magic;
    uint32_t iters;
    uint32_t size;
};

/* The server's answer in the accept's private data: its RDMA target buffer. */
struct target {
    uint32_t magic;
    uint32_t rkey;
    uint64_t addr;
};

struct app {
    struct iwv_context *ctx;
    struct iwv_pd *pd;
    struct iwv_arena *arena;
    struct iwv_mr *mr;
    struct iwv_comp_channel *comp;
    struct iwv_cq *cq;
    struct iwv_event_channel *cm;
    struct iwv_cm_id *listen_id; /* server */
    struct iwv_cm_id *id;        /* the connection */
    struct iwv_qp *qp;
    unsigned char *send_buf;
    unsigned char *recv_buf;
    unsigned char *rdma_buf; /* server: the RDMA target */
    uint32_t size;
    int events; /* -e */
    int user;   /* -u */
    void *heap; /* -u: the malloc'd buffers */
};

static void die(const char *what, int rc)
{
    fprintf(stderr, "pingpong: %s: %s (%s)\n", what, iwv_strerror(rc),
            iwv_last_error_message());
    exit(1);
}

static void fail(const char *msg)
{
    fprintf(stderr, "pingpong: %s\n", msg);
    exit(1);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Byte k of message i: the client's pattern; the server answers it inverted. */
static unsigned char pattern(uint32_t i, uint32_t k)
{
    return (unsigned char)((i * 31u + k * 7u + 1u) & 0xffu);
}

/* The next CM event, which must be `type`. */
static struct iwv_cm_event *expect_cm(struct app *a, uint32_t type)
{
    struct iwv_cm_event *ev = NULL;
    int rc = iwv_get_cm_event(a->cm, &ev, WAIT_MS);
    if (rc < 0)
        die("waiting for a CM event", rc);
    if (ev->event != type) {
        fprintf(stderr, "pingpong: CM event %u (status %d), expected %u\n", ev->event,
                ev->status, type);
        exit(1);
    }
    return ev;
}

/* Waits for one completion: busy polling, or on the completion channel with -e. */
static void wait_wc(struct app *a, struct iwv_wc *wc)
{
    double deadline = now_us() + WAIT_MS * 1000.0;
    unsigned long empty = 0;
    for (;;) {
        int n = iwv_poll_cq(a->cq, 1, wc);
        if (n < 0)
            die("iwv_poll_cq", n);
        if (n == 1) {
            if (wc->status != IWV_WC_SUCCESS) {
                fprintf(stderr, "pingpong: completion of wr_id %llu: %s\n",
                        (unsigned long long)wc->wr_id, iwv_wc_status_str(wc->status));
                exit(1);
            }
            return;
        }
        if (a->events) {
            struct iwv_cq *cq = NULL;
            void *cq_context = NULL;
            int rc = iwv_req_notify_cq(a->cq, 0);
            if (rc < 0)
                die("iwv_req_notify_cq", rc);
            n = iwv_poll_cq(a->cq, 1, wc); /* one may have arrived before arming */
            if (n < 0)
                die("iwv_poll_cq", n);
            if (n == 1) {
                if (wc->status != IWV_WC_SUCCESS)
                    fail("completion in error");
                return;
            }
            rc = iwv_get_cq_event(a->comp, &cq, &cq_context, WAIT_MS);
            if (rc < 0)
                die("iwv_get_cq_event", rc);
            if (cq != a->cq || cq_context != a)
                fail("event for an unknown CQ");
            iwv_ack_cq_events(cq, 1);
        } else if (++empty % 64 == 0) {
            /* Busy polling, but polite on a machine with fewer cores than pollers. */
            sched_yield();
            if (now_us() > deadline)
                fail("no completion in time");
        }
    }
}

static void post_recv(struct app *a, uint64_t wr_id)
{
    struct iwv_sge sge = {iwv_mr_addr(a->mr) + a->size, a->size, iwv_mr_lkey(a->mr)};
    struct iwv_recv_wr wr, *bad = NULL;
    int rc;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    rc = iwv_post_recv(a->qp, &wr, &bad);
    if (rc < 0)
        die("iwv_post_recv", rc);
}

static void post_send(struct app *a, uint64_t wr_id)
{
    struct iwv_sge sge = {iwv_mr_addr(a->mr), a->size, iwv_mr_lkey(a->mr)};
    struct iwv_send_wr wr, *bad = NULL;
    int rc;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IWV_WR_SEND;
    wr.send_flags = IWV_SEND_SIGNALED;
    rc = iwv_post_send(a->qp, &wr, &bad);
    if (rc < 0)
        die("iwv_post_send", rc);
}

/* Waits for the completions of a send and a receive (in either order); checks the
 * receive's length. */
static void wait_send_and_recv(struct app *a)
{
    int sent = 0, received = 0;
    while (!sent || !received) {
        struct iwv_wc wc;
        wait_wc(a, &wc);
        if (wc.opcode == IWV_WC_SEND) {
            sent = 1;
        } else if (wc.opcode == IWV_WC_RECV) {
            if (wc.byte_len != a->size)
                fail("received a message of the wrong length");
            if (wc.qp_num != iwv_qp_num(a->qp))
                fail("completion of another QP");
            received = 1;
        } else {
            fail("unexpected completion opcode");
        }
    }
}

/* One signaled RDMA WR of the whole message between local `buf` and the server's target. */
static void post_rdma(struct app *a, uint32_t opcode, unsigned char *buf, const struct target *t,
                      uint64_t wr_id)
{
    struct iwv_sge sge = {iwv_mr_addr(a->mr) + (uint64_t)(buf - a->send_buf), a->size,
                          iwv_mr_lkey(a->mr)};
    struct iwv_send_wr wr, *bad = NULL;
    int rc;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IWV_SEND_SIGNALED;
    wr.rdma.remote_addr = t->addr;
    wr.rdma.rkey = t->rkey;
    rc = iwv_post_send(a->qp, &wr, &bad);
    if (rc < 0)
        die("iwv_post_send (RDMA)", rc);
}

/* Client: RDMA Write a pattern into the server's target, RDMA Read it back, compare. */
static void rdma_check(struct app *a, const struct target *t, uint32_t iters)
{
    struct iwv_wc wc;
    uint32_t k;
    for (k = 0; k < a->size; k++) {
        a->send_buf[k] = (unsigned char)(pattern(iters, k) ^ 0x5a);
        a->rdma_buf[k] = 0;
    }
    post_rdma(a, IWV_WR_RDMA_WRITE, a->send_buf, t, 1u << 30);
    wait_wc(a, &wc);
    if (wc.opcode != IWV_WC_RDMA_WRITE)
        fail("expected the RDMA Write's completion");
    post_rdma(a, IWV_WR_RDMA_READ, a->rdma_buf, t, (1u << 30) + 1);
    wait_wc(a, &wc);
    if (wc.opcode != IWV_WC_RDMA_READ) {
        fprintf(stderr, "pingpong: completion opcode %u (byte_len %u), expected the Read's\n",
                wc.opcode, wc.byte_len);
        exit(1);
    }
    if (memcmp(a->rdma_buf, a->send_buf, a->size) != 0)
        fail("the RDMA Read did not bring back what the RDMA Write put");
    printf("pingpong: RDMA Write and Read of %u bytes verified\n", a->size);
}

/* Context, memory, CQ and CM channel for messages of `size` bytes. */
static void setup(struct app *a, const char *daemon, uint32_t size)
{
    size_t len = 3 * (size_t)size;
    uint32_t access = IWV_ACCESS_LOCAL_WRITE | IWV_ACCESS_REMOTE_WRITE | IWV_ACCESS_REMOTE_READ;
    a->ctx = iwv_open(daemon);
    if (!a->ctx)
        die("iwv_open", iwv_last_error());
    if (!(a->pd = iwv_alloc_pd(a->ctx)))
        die("iwv_alloc_pd", iwv_last_error());
    if (a->user) {
        /* Ordinary memory: the library remaps its pages in place, shared with iwarpd. */
        if (!(a->heap = malloc(len)))
            fail("out of memory");
        a->mr = iwv_reg_user_mr(a->pd, a->heap, len, access);
        if (!a->mr)
            die("iwv_reg_user_mr", iwv_last_error());
        a->send_buf = a->heap;
    } else {
        if (!(a->arena = iwv_alloc_arena(a->ctx, len, 0)))
            die("iwv_alloc_arena", iwv_last_error());
        if (!(a->mr = iwv_reg_mr(a->pd, a->arena, 0, len, access)))
            die("iwv_reg_mr", iwv_last_error());
        a->send_buf = iwv_arena_addr(a->arena);
    }
    a->recv_buf = a->send_buf + size;
    a->rdma_buf = a->send_buf + 2 * (size_t)size;
    a->size = size;
    if (a->events && !(a->comp = iwv_create_comp_channel(a->ctx)))
        die("iwv_create_comp_channel", iwv_last_error());
    if (!(a->cq = iwv_create_cq(a->ctx, 16, a, a->comp)))
        die("iwv_create_cq", iwv_last_error());
    if (!(a->cm = iwv_create_event_channel(a->ctx)))
        die("iwv_create_event_channel", iwv_last_error());
}

static void qp_attr(struct app *a, struct iwv_qp_init_attr *attr)
{
    memset(attr, 0, sizeof *attr);
    attr->send_cq = a->cq;
    attr->recv_cq = a->cq;
    attr->cap.max_send_wr = 4;
    attr->cap.max_recv_wr = 4;
    attr->cap.max_send_sge = 1;
    attr->cap.max_recv_sge = 1;
    attr->remote_read = 1;
    attr->remote_write = 1;
}

static void teardown(struct app *a)
{
    int rc = 0;
    if (a->id) {
        struct iwv_cm_event *ev;
        if ((rc = iwv_disconnect(a->id)) < 0 && rc != -IWV_EINVAL && rc != -IWV_ENOTCONN)
            die("iwv_disconnect", rc);
        /* Both ends disconnect: each sees DISCONNECTED once. */
        ev = expect_cm(a, IWV_CM_EVENT_DISCONNECTED);
        iwv_ack_cm_event(ev);
    }
    if (a->qp && (rc = iwv_destroy_qp(a->qp)) < 0)
        die("iwv_destroy_qp", rc);
    if (a->id && (rc = iwv_destroy_id(a->id)) < 0)
        die("iwv_destroy_id", rc);
    if (a->listen_id && (rc = iwv_destroy_id(a->listen_id)) < 0)
        die("iwv_destroy_id", rc);
    if ((rc = iwv_destroy_event_channel(a->cm)) < 0)
        die("iwv_destroy_event_channel", rc);
    if ((rc = iwv_destroy_cq(a->cq)) < 0)
        die("iwv_destroy_cq", rc);
    if (a->comp && (rc = iwv_destroy_comp_channel(a->comp)) < 0)
        die("iwv_destroy_comp_channel", rc);
    if ((rc = iwv_dereg_mr(a->mr)) < 0)
        die("iwv_dereg_mr", rc);
    if (a->arena && (rc = iwv_free_arena(a->arena)) < 0)
        die("iwv_free_arena", rc);
    free(a->heap); /* the MR is gone: the daemon no longer writes it */
    if ((rc = iwv_dealloc_pd(a->pd)) < 0)
        die("iwv_dealloc_pd", rc);
    if ((rc = iwv_close(a->ctx)) < 0)
        die("iwv_close", rc);
}

/* Waits for the send completions of the pongs posted and not yet completed. */
static void wait_pongs_sent(struct app *a, uint32_t *unacked)
{
    while (*unacked > 0) {
        struct iwv_wc wc;
        wait_wc(a, &wc);
        if (wc.opcode != IWV_WC_SEND)
            fail("expected a pong's send completion");
        (*unacked)--;
    }
}

static int run_server(struct app *a, const char *daemon, uint16_t port)
{
    struct iwv_addr addr;
    struct iwv_qp_init_attr attr;
    struct iwv_cm_event *ev;
    struct iwv_conn_param param;
    struct target t;
    struct hello h;
    uint32_t i, k, unacked_pongs = 0;
    int rc;

    /* The first message's size is not known yet: set up for the largest. */
    setup(a, daemon, 1u << 20);
    if (!(a->listen_id = iwv_create_id(a->cm, a)))
        die("iwv_create_id", iwv_last_error());
    iwv_addr_init(&addr, NULL, port);
    if ((rc = iwv_listen(a->listen_id, &addr, 4)) < 0)
        die("iwv_listen", rc);
    printf("pingpong: listening on port %u\n", port);
    fflush(stdout);

    rc = iwv_get_cm_event(a->cm, &ev, -1);
    if (rc < 0)
        die("waiting for a connection request", rc);
    if (ev->event != IWV_CM_EVENT_CONNECT_REQUEST || ev->listen_id != a->listen_id)
        fail("expected a connection request on the listener");
    if (ev->private_data_len != sizeof h)
        fail("connection request without the pingpong hello");
    memcpy(&h, ev->private_data, sizeof h);
    a->id = ev->id;
    if (h.magic != MAGIC || h.size == 0 || h.size > (1u << 20)) {
        iwv_reject(a->id, NULL, 0);
        fail("bad hello in the connection request");
    }
    a->size = h.size;
    a->recv_buf = a->send_buf + a->size;
    a->rdma_buf = a->send_buf + 2 * (size_t)a->size;
    iwv_ack_cm_event(ev);

    qp_attr(a, &attr);
    if (!(a->qp = iwv_cm_create_qp(a->id, a->pd, &attr)))
        die("iwv_cm_create_qp", iwv_last_error());
    post_recv(a, 0);
    memset(&param, 0, sizeof param);
    t.magic = MAGIC;
    t.rkey = iwv_mr_rkey(a->mr);
    t.addr = iwv_mr_addr(a->mr) + (uint64_t)(a->rdma_buf - a->send_buf);
    param.private_data = &t;
    param.private_data_len = sizeof t;
    if ((rc = iwv_accept(a->id, a->qp, &param)) < 0)
        die("iwv_accept", rc);
    ev = expect_cm(a, IWV_CM_EVENT_ESTABLISHED);
    iwv_ack_cm_event(ev);

    /* A pong's send completion and the next ping's receive completion share the CQ
     * and may come in either order (the verbs order completions within one queue
     * only): count the sends, wait for the rest at the end. */
    for (i = 0; i < h.iters; i++) {
        struct iwv_wc wc;
        do {
            wait_wc(a, &wc);
            if (wc.opcode == IWV_WC_SEND) {
                if (unacked_pongs == 0)
                    fail("a send completion for no pong");
                unacked_pongs--;
            }
        } while (wc.opcode == IWV_WC_SEND);
        if (wc.opcode != IWV_WC_RECV || wc.byte_len != a->size)
            fail("expected a ping");
        /* The client's RDMA Write came before its first ping on the same QP. */
        for (k = 0; i == 0 && k < a->size; k++)
            if (a->rdma_buf[k] != (unsigned char)(pattern(h.iters, k) ^ 0x5a))
                fail("the client's RDMA Write did not land");
        /* The pong buffer is reused: the previous pong's send must have completed (no
         * receive can come meanwhile: the next ping follows this pong). */
        wait_pongs_sent(a, &unacked_pongs);
        for (k = 0; k < a->size; k++) {
            if (a->recv_buf[k] != pattern(i, k)) {
                fprintf(stderr, "pingpong: ping %u byte %u corrupt\n", i, k);
                return 1;
            }
            a->send_buf[k] = (unsigned char)~a->recv_buf[k];
        }
        if (i + 1 < h.iters)
            post_recv(a, i + 1);
        post_send(a, i);
        unacked_pongs++;
    }
    wait_pongs_sent(a, &unacked_pongs);
    printf("pingpong: server answered %u pings of %u bytes, all intact\n", h.iters, a->size);
    teardown(a);
    return 0;
}

static int run_client(struct app *a, const char *daemon, const char *server, uint16_t port,
                      uint32_t iters, uint32_t size)
{
    struct iwv_addr remote;
    struct iwv_qp_init_attr attr;
    struct iwv_conn_param param;
    struct iwv_cm_event *ev;
    struct hello h = {MAGIC, iters, size};
    struct target t;
    double start, total = 0;
    uint32_t i, k;
    int rc;

    setup(a, daemon, size);
    if (iwv_addr_init(&remote, server, port) < 0)
        die("server address", iwv_last_error());
    if (!(a->id = iwv_create_id(a->cm, a)))
        die("iwv_create_id", iwv_last_error());
    qp_attr(a, &attr);
    if (!(a->qp = iwv_create_qp(a->pd, &attr)))
        die("iwv_create_qp", iwv_last_error());
    post_recv(a, 0);
    memset(&param, 0, sizeof param);
    param.private_data = &h;
    param.private_data_len = sizeof h;
    if ((rc = iwv_connect(a->id, a->qp, &remote, &param)) < 0)
        die("iwv_connect", rc);
    ev = expect_cm(a, IWV_CM_EVENT_ESTABLISHED);
    if (ev->qp_num != iwv_qp_num(a->qp))
        fail("established for another QP");
    if (ev->private_data_len != sizeof t)
        fail("the server's answer has no RDMA target");
    memcpy(&t, ev->private_data, sizeof t);
    iwv_ack_cm_event(ev);
    if (t.magic != MAGIC)
        fail("bad RDMA target in the server's answer");
    rdma_check(a, &t, iters);

    for (i = 0; i < iters; i++) {
        for (k = 0; k < size; k++)
            a->send_buf[k] = pattern(i, k);
        start = now_us();
        post_send(a, i);
        wait_send_and_recv(a);
        total += now_us() - start;
        for (k = 0; k < size; k++) {
            if (a->recv_buf[k] != (unsigned char)~pattern(i, k)) {
                fprintf(stderr, "pingpong: pong %u byte %u corrupt\n", i, k);
                return 1;
            }
        }
        if (i + 1 < iters)
            post_recv(a, i + 1);
    }
    printf("pingpong: %u round trips of %u bytes, all intact: average %.2f us\n", iters, size,
           iters ? total / iters : 0.0);
    teardown(a);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: pingpong server [-d DAEMON] [-p PORT] [-e] [-u]\n"
                    "       pingpong client SERVER_IP [-d DAEMON] [-p PORT] [-n ITERS] "
                    "[-s SIZE] [-e] [-u]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct app a;
    const char *daemon = NULL, *server = NULL;
    unsigned long port = 18515, iters = 1000, size = 64;
    int client, i;

    memset(&a, 0, sizeof a);
    if (argc < 2)
        usage();
    client = strcmp(argv[1], "client") == 0;
    if (!client && strcmp(argv[1], "server") != 0)
        usage();
    i = 2;
    if (client) {
        if (argc < 3)
            usage();
        server = argv[i++];
    }
    for (; i < argc; i++) {
        const char *opt = argv[i];
        if (strcmp(opt, "-e") == 0 || strcmp(opt, "-u") == 0) {
            *(opt[1] == 'e' ? &a.events : &a.user) = 1;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        if (strcmp(opt, "-d") == 0)
            daemon = argv[++i];
        else if (strcmp(opt, "-p") == 0)
            port = strtoul(argv[++i], NULL, 10);
        else if (strcmp(opt, "-n") == 0)
            iters = strtoul(argv[++i], NULL, 10);
        else if (strcmp(opt, "-s") == 0)
            size = strtoul(argv[++i], NULL, 10);
        else
            usage();
    }
    if (port == 0 || port > 65535 || size == 0 || size > (1ul << 20) || iters > 100000000ul)
        usage();
    if (client)
        return run_client(&a, daemon, server, (uint16_t)port, (uint32_t)iters, (uint32_t)size);
    return run_server(&a, daemon, (uint16_t)port);
}
