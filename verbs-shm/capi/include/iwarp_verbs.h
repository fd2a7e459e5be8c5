/*
 * iwarp_verbs.h: the C API of the iwarpd verbs client library (libiwarp_verbs_capi).
 *
 * Verbs (libibverbs-like) and connection management (librdmacm-like) over shared memory
 * with the iwarpd daemon: posting a work request and polling a completion are memory
 * writes and reads, never a system call. See docs/CAPI.md and docs/APPS.md.
 *
 * Conventions
 *  - Functions returning int answer 0 (or a count) on success and a negative error code
 *    (-IWV_E...) on failure. Functions returning a pointer answer NULL on failure; then
 *    iwv_last_error() (and errno) give the code. iwv_last_error_message() gives the
 *    daemon's sentence for the last failure of the calling thread.
 *  - Handles are opaque. Destroying a handle that other objects still use (a CQ of a
 *    QP, a PD of an MR, an arena of an MR) releases your handle; the daemon's object
 *    goes when its last user is gone.
 *  - Every handle may be used from several threads (its mutable state is locked).
 *  - Once the daemon is gone every call, post and poll answers -IWV_EDAEMONGONE (never a
 *    hang) and every event fd becomes readable.
 *  - Timeouts: timeout_ms < 0 waits forever, 0 does not wait (-IWV_EAGAIN), > 0 waits at
 *    most that long (-IWV_ETIMEDOUT).
 *
 * The structures below are ABI: their sizes are checked on both sides (the static
 * assertions at the end of this file and in the library).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- error codes */

/* errno-style codes (the Linux values); functions answer them negated. */
enum iwv_error {
    IWV_EPERM = 1,            /* not allowed (admin request)                       */
    IWV_ENOENT = 2,           /* no such object                                    */
    IWV_EIO = 5,              /* the daemon failed internally                      */
    IWV_EBADF = 9,            /* a descriptor was refused                          */
    IWV_EAGAIN = 11,          /* nothing to read now / daemon not ready            */
    IWV_ENOMEM = 12,          /* out of memory or resources                        */
    IWV_EACCES = 13,          /* permission denied by the daemon's policy          */
    IWV_EFAULT = 14,          /* a NULL pointer where one is required              */
    IWV_EBUSY = 16,           /* in use (still bound, still attached)              */
    IWV_EXDEV = 18,           /* object on another dataplane core                  */
    IWV_EINVAL = 22,          /* invalid argument, state or transition             */
    IWV_ENOSPC = 28,          /* a configured limit is reached                     */
    IWV_EPROTO = 71,          /* the daemon's answer made no sense                 */
    IWV_EPROTONOSUPPORT = 93, /* protocol version mismatch                         */
    IWV_EADDRINUSE = 98,      /* address in use (listen)                           */
    IWV_ENETUNREACH = 101,    /* no route to the address                           */
    IWV_ENOTCONN = 107,       /* no such connection                                */
    IWV_ESHUTDOWN = 108,      /* the daemon is shutting down                       */
    IWV_ETIMEDOUT = 110,      /* the daemon did not answer in time / wait timed out */
    IWV_EDAEMONGONE = 1001,   /* the daemon is gone: every object is gone with it   */
    IWV_EQUEUEFULL = 1002,    /* work queue full: poll completions, post again      */
    IWV_EPANIC = 1003,        /* a bug in the library (caught, nothing unwound)     */
    IWV_EDAEMONFULL = 1004    /* the daemon serves control.max_clients: try later   */
};

/* A sentence for a code (negative or positive); never NULL. */
const char *iwv_strerror(int code);
/* The code (negative) of the calling thread's last failure; 0 if none. */
int iwv_last_error(void);
/* The calling thread's last failure in words (with the daemon's message); "" if none.
 * Valid until the thread's next call into the library. */
const char *iwv_last_error_message(void);

/* ---------------------------------------------------------------- handles */

struct iwv_context;       /* a connection to one iwarpd                          */
struct iwv_arena;         /* memory shared with the daemon                       */
struct iwv_pd;            /* protection domain                                   */
struct iwv_mr;            /* memory region, or fast-register MR (iwv_alloc_mr)    */
struct iwv_mw;            /* memory window                                       */
struct iwv_comp_channel;  /* completion channel                                  */
struct iwv_cq;            /* completion queue                                    */
struct iwv_qp;            /* queue pair                                          */
struct iwv_srq;           /* shared receive queue                                */
struct iwv_event_channel; /* CM event channel                                    */
struct iwv_cm_id;         /* CM identifier (listener or connection)              */

/* ---------------------------------------------------------------- device */

struct iwv_device_attr {
    char vendor[64];  /* NUL-terminated (truncated if longer) */
    char daemon[64];
    char version[32];
    uint32_t ports;
    uint32_t cores;
    uint32_t max_qp;
    uint32_t max_qp_wr;
    uint32_t max_sge;
    uint32_t max_cq;
    uint32_t max_cqe;
    uint32_t max_mr;
    uint64_t max_mr_size;
    uint32_t max_pd;
    uint32_t max_srq;
    uint32_t max_srq_wr;
    uint32_t max_ird;
    uint32_t max_ord;
    uint32_t max_private_data;
    uint64_t max_arena_bytes;
    uint8_t memory_windows; /* 1 if supported */
    uint8_t srq;            /* 1 if supported */
    uint8_t reserved[6];
};

struct iwv_port_attr {
    uint32_t index;
    uint8_t ip[4];
    uint8_t prefix_len;
    uint8_t mac[6];
    uint8_t link_up;
    uint32_t mtu;
    uint32_t speed_mbps;
    char device[64]; /* NUL-terminated */
};

/* Connects to daemon `name` (/run/iwarpd/<name>.verbs; NULL: "iwarpd"), or to the
 * socket in the environment variable IWARP_VERBS_SOCKET if set. A daemon that serves
 * control.max_clients clients already answers IWV_EDAEMONFULL (try again later); one
 * whose policy does not admit this user IWV_EACCES; a user over its connection limit
 * (control.max_conns_per_uid) gets IWV_ENOSPC. */
struct iwv_context *iwv_open(const char *name);
/* Connects to the verbs socket at `socket_path`. */
struct iwv_context *iwv_open_path(const char *socket_path);
/* Releases the context handle (the connection stays while objects of it exist). */
int iwv_close(struct iwv_context *ctx);
int iwv_query_device(struct iwv_context *ctx, struct iwv_device_attr *attr);
int iwv_query_port(struct iwv_context *ctx, uint32_t port, struct iwv_port_attr *attr);
/* How long a verb waits for the daemon's answer (default 10 s; at least 1 ms). */
int iwv_set_timeout(struct iwv_context *ctx, uint32_t timeout_ms);

/* ---------------------------------------------------------------- async events */

enum iwv_async_event_type {
    IWV_EVENT_LLP_CLOSE_COMPLETE = 0,
    IWV_EVENT_TERMINATE_RECEIVED = 1, /* code: the Terminate's code        */
    IWV_EVENT_LLP_CONNECTION_RESET = 2,
    IWV_EVENT_LLP_CONNECTION_LOST = 3,
    IWV_EVENT_LLP_INTEGRITY_ERROR = 4, /* code */
    IWV_EVENT_REMOTE_OPERATION_ERROR = 5, /* code */
    IWV_EVENT_PROTECTION_ERROR = 6,       /* code */
    IWV_EVENT_BAD_CLOSE = 7,
    IWV_EVENT_BAD_LLP_CLOSE = 8,
    IWV_EVENT_CQ_ERROR = 9,
    IWV_EVENT_SRQ_ERROR = 10,
    IWV_EVENT_LOCAL_QP_CATASTROPHIC = 11,
    IWV_EVENT_CQ_OVERFLOW = 12,
    IWV_EVENT_SRQ_LIMIT_REACHED = 13,
    IWV_EVENT_QP_RQ_LIMIT_REACHED = 14,
    IWV_EVENT_QP_ERROR_STATE_ENTERED = 15
};

enum iwv_resource_type {
    IWV_RESOURCE_QP = 0,     /* handle: iwv_qp_num()    */
    IWV_RESOURCE_CQ = 1,     /* handle: iwv_cq_handle() */
    IWV_RESOURCE_SRQ = 2,    /* handle: iwv_srq_handle() */
    IWV_RESOURCE_DEVICE = 3  /* handle: 0               */
};

struct iwv_async_event {
    uint32_t event_type;    /* enum iwv_async_event_type */
    uint32_t resource_type; /* enum iwv_resource_type    */
    uint32_t handle;
    uint32_t code;
};

/* The next asynchronous event (ibv_get_async_event). */
int iwv_get_async_event(struct iwv_context *ctx, struct iwv_async_event *event,
                        int timeout_ms);
/* Readable while an asynchronous event waits (or the daemon is gone); do not read it. */
int iwv_async_fd(struct iwv_context *ctx);

/* ---------------------------------------------------------------- memory */

enum iwv_access_flags {
    IWV_ACCESS_LOCAL_READ = 1 << 0,
    IWV_ACCESS_LOCAL_WRITE = 1 << 1,
    IWV_ACCESS_REMOTE_READ = 1 << 2,
    IWV_ACCESS_REMOTE_WRITE = 1 << 3,
    IWV_ACCESS_MW_BIND = 1 << 4,
    IWV_ACCESS_ZERO_BASED = 1 << 5 /* iwv_reg_mr only: first byte at tagged offset 0 */
};

/* An arena of at least `len` bytes (page-rounded): hugepages if the daemon has free ones
 * (with hugepages_required: -IWV_ENOMEM rather than 4 KiB pages). */
struct iwv_arena *iwv_alloc_arena(struct iwv_context *ctx, size_t len, int hugepages_required);
void *iwv_arena_addr(struct iwv_arena *arena); /* first byte */
size_t iwv_arena_len(struct iwv_arena *arena);
uint32_t iwv_arena_handle(struct iwv_arena *arena);
int iwv_free_arena(struct iwv_arena *arena);

struct iwv_pd *iwv_alloc_pd(struct iwv_context *ctx);
int iwv_dealloc_pd(struct iwv_pd *pd);

/* Registers [offset, offset + len) of `arena` (VA-based at iwv_arena_addr + offset unless
 * IWV_ACCESS_ZERO_BASED). O(1) in the daemon. */
struct iwv_mr *iwv_reg_mr(struct iwv_pd *pd, struct iwv_arena *arena, size_t offset,
                          size_t len, uint32_t access);
/* Registers ordinary memory (malloc): the enclosing pages are remapped in place onto
 * memory shared with the daemon; the buffer keeps its address and contents. No other
 * thread may write those pages during the call; neighbouring data in the same pages is
 * shared too; the buffer must not be freed while the MR exists. Memory that cannot be
 * remapped: -IWV_EINVAL (use iwv_alloc_arena). */
struct iwv_mr *iwv_reg_user_mr(struct iwv_pd *pd, void *addr, size_t len, uint32_t access);

enum iwv_rereg_mr_flags {
    IWV_REREG_MR_CHANGE_TRANSLATION = 1 << 0, /* new arena, offset, len */
    IWV_REREG_MR_CHANGE_ACCESS = 1 << 2
};
/* ibv_rereg_mr: the STag keeps its index and gets a new key (read iwv_mr_lkey again).
 * Without CHANGE_TRANSLATION, arena/offset/len are ignored (may be NULL/0); without
 * CHANGE_ACCESS, access is ignored. */
int iwv_rereg_mr(struct iwv_mr *mr, int flags, struct iwv_arena *arena, size_t offset,
                 size_t len, uint32_t access);
/* Deregisters an MR or deallocates a fast-register MR. */
int iwv_dereg_mr(struct iwv_mr *mr);
uint32_t iwv_mr_lkey(struct iwv_mr *mr);
uint32_t iwv_mr_rkey(struct iwv_mr *mr);
uint64_t iwv_mr_addr(struct iwv_mr *mr);   /* tagged offset of the first byte */
uint64_t iwv_mr_length(struct iwv_mr *mr); /* bytes (fast-register MR: the maximum) */

/* A fast-register MR of up to max_pages 4 KiB pages (ibv_alloc_mr): an STag in the
 * Invalid state that an IWV_WR_FAST_REG work request makes valid. */
struct iwv_mr *iwv_alloc_mr(struct iwv_pd *pd, uint32_t max_pages);

enum iwv_mw_type { IWV_MW_TYPE_1 = 1, IWV_MW_TYPE_2 = 2 };
struct iwv_mw *iwv_alloc_mw(struct iwv_pd *pd, uint32_t type);
/* Binds a type 1 window by verb to [addr, addr + length) of `mr` (which needs
 * IWV_ACCESS_MW_BIND) with remote rights `access`. Type 2: post an IWV_WR_BIND_MW. */
int iwv_bind_mw(struct iwv_mw *mw, struct iwv_mr *mr, uint64_t addr, uint64_t length,
                uint32_t access, int zero_based);
uint32_t iwv_mw_rkey(struct iwv_mw *mw);
int iwv_dealloc_mw(struct iwv_mw *mw);

/* ---------------------------------------------------------------- completions */

enum iwv_wc_status {
    IWV_WC_SUCCESS = 0,
    IWV_WC_FLUSHED = 1,
    IWV_WC_INVALID_WQE = 2,
    IWV_WC_LOCAL_QP_CATASTROPHIC = 3,
    IWV_WC_REMOTE_TERMINATION = 4,
    IWV_WC_INVALID_STAG = 5,
    IWV_WC_BASE_BOUNDS = 6,
    IWV_WC_ACCESS_VIOLATION = 7,
    IWV_WC_INVALID_PD = 8,
    IWV_WC_WRAP_ERROR = 9,
    IWV_WC_INVALIDATE_STAG_INVALID = 10,
    IWV_WC_ZERO_ORD = 11,
    IWV_WC_QP_NOT_PRIVILEGED = 12,
    IWV_WC_STAG_NOT_INVALID = 13,
    IWV_WC_INVALID_LENGTH = 14,
    IWV_WC_INVALID_ACCESS_RIGHTS = 15,
    IWV_WC_INVALID_REGION = 16,
    IWV_WC_INVALID_WINDOW = 17,
    IWV_WC_INVALID_VA = 18,
    IWV_WC_MW_BIND_ERROR = 19,
    IWV_WC_REMOTE_ACCESS_ERROR = 20,
    IWV_WC_REMOTE_OPERATION_ERROR = 21
};

enum iwv_wc_opcode {
    IWV_WC_SEND = 0,
    IWV_WC_SEND_SE = 1,
    IWV_WC_SEND_INV = 2,
    IWV_WC_SEND_SE_INV = 3,
    IWV_WC_RDMA_WRITE = 4,
    IWV_WC_RDMA_READ = 5,
    IWV_WC_RDMA_READ_INV = 6,
    IWV_WC_BIND_MW = 7,
    IWV_WC_FAST_REG = 8,
    IWV_WC_LOCAL_INV = 9,
    IWV_WC_RECV = 10
};

enum iwv_wc_flags {
    IWV_WC_WITH_INV = 1 << 0,  /* invalidated_stag is valid */
    IWV_WC_SOLICITED = 1 << 1
};

struct iwv_wc {
    uint64_t wr_id;
    uint32_t status;   /* enum iwv_wc_status */
    uint32_t opcode;   /* enum iwv_wc_opcode */
    uint32_t byte_len; /* receives only (send-queue completions: 0) */
    uint32_t qp_num;   /* iwv_qp_num() of the QP */
    uint32_t wc_flags; /* enum iwv_wc_flags */
    uint32_t invalidated_stag;
};

/* A name for a completion status; never NULL. */
const char *iwv_wc_status_str(uint32_t status);

struct iwv_comp_channel *iwv_create_comp_channel(struct iwv_context *ctx);
/* Readable when a notification may wait (poll/epoll); do not read it. */
int iwv_comp_channel_fd(struct iwv_comp_channel *channel);
/* -IWV_EBUSY while CQs are attached. */
int iwv_destroy_comp_channel(struct iwv_comp_channel *channel);
/* The CQ whose armed notification fired, and its cq_context (ibv_get_cq_event). */
int iwv_get_cq_event(struct iwv_comp_channel *channel, struct iwv_cq **cq, void **cq_context,
                     int timeout_ms);
void iwv_ack_cq_events(struct iwv_cq *cq, unsigned int nevents);

/* A CQ of at least `depth` entries; notifications (iwv_req_notify_cq) go to `channel`
 * (may be NULL). */
struct iwv_cq *iwv_create_cq(struct iwv_context *ctx, uint32_t depth, void *cq_context,
                             struct iwv_comp_channel *channel);
int iwv_resize_cq(struct iwv_cq *cq, uint32_t depth);
int iwv_destroy_cq(struct iwv_cq *cq);
uint32_t iwv_cq_depth(struct iwv_cq *cq);
uint32_t iwv_cq_handle(struct iwv_cq *cq);
/* Up to num_entries completions into wc; answers how many (0: none), or a negative code.
 * A memory read: no system call. */
int iwv_poll_cq(struct iwv_cq *cq, int num_entries, struct iwv_wc *wc);
/* Arms the CQ for the next completion (or only the next solicited or error one). */
int iwv_req_notify_cq(struct iwv_cq *cq, int solicited_only);

/* ---------------------------------------------------------------- work requests */

struct iwv_sge {
    uint64_t addr;   /* tagged offset: iwv_mr_addr(mr) + offset */
    uint32_t length;
    uint32_t lkey;
};

#define IWV_MAX_SGE 6

enum iwv_wr_opcode {
    IWV_WR_SEND = 0,               /* (with IWV_SEND_SOLICITED: Send with SE)          */
    IWV_WR_SEND_WITH_INV = 1,      /* invalidate_stag: the peer's STag to invalidate   */
    IWV_WR_RDMA_WRITE = 2,         /* rdma.remote_addr, rdma.rkey                      */
    IWV_WR_RDMA_READ = 3,          /* into sg_list[0] (one SGE)                        */
    IWV_WR_RDMA_READ_WITH_INV = 4, /* and invalidates sg_list[0].lkey once placed      */
    IWV_WR_LOCAL_INV = 5,          /* invalidate_stag: the local STag                  */
    IWV_WR_FAST_REG = 6,           /* fast_reg                                         */
    IWV_WR_BIND_MW = 7             /* bind (type 2 windows)                            */
};

enum iwv_send_flags {
    IWV_SEND_SIGNALED = 1 << 0,
    IWV_SEND_READ_FENCE = 1 << 1,
    IWV_SEND_LOCAL_FENCE = 1 << 2,
    IWV_SEND_SOLICITED = 1 << 3
};

struct iwv_send_wr {
    uint64_t wr_id;
    struct iwv_send_wr *next; /* NULL ends the list */
    struct iwv_sge *sg_list;
    uint32_t num_sge;         /* at most IWV_MAX_SGE */
    uint32_t opcode;          /* enum iwv_wr_opcode */
    uint32_t send_flags;      /* enum iwv_send_flags */
    uint32_t invalidate_stag;
    struct {
        uint64_t remote_addr;
        uint32_t rkey;
        uint32_t reserved;
    } rdma;
    struct {
        struct iwv_arena *arena; /* the memory registered: [offset, offset + length)    */
        uint64_t offset;
        uint64_t length;
        uint32_t stag;           /* iwv_mr_lkey(fast-register MR) with the new key byte */
        uint32_t access;         /* enum iwv_access_flags (ZERO_BASED ignored)          */
        uint32_t zero_based;     /* else VA-based at iwv_arena_addr + offset            */
        uint32_t reserved;
    } fast_reg;
    struct {
        uint32_t mw_stag;  /* iwv_mw_rkey(mw) with the new key byte */
        uint32_t mr_lkey;
        uint64_t addr;     /* tagged offset in the MR of the window's first byte */
        uint64_t length;
        uint32_t access;   /* remote rights */
        uint32_t zero_based;
    } bind;
};

struct iwv_recv_wr {
    uint64_t wr_id;
    struct iwv_recv_wr *next; /* NULL ends the list */
    struct iwv_sge *sg_list;
    uint32_t num_sge;
    uint32_t reserved;
};

/* ---------------------------------------------------------------- queue pairs */

struct iwv_qp_cap {
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
};

struct iwv_qp_init_attr {
    struct iwv_cq *send_cq;
    struct iwv_cq *recv_cq;
    struct iwv_srq *srq;   /* NULL: the QP has its own receive queue */
    struct iwv_qp_cap cap; /* 0 fields: 128 WRs, 2 SGEs */
    uint32_t sq_sig_all;   /* every send WR completes */
    uint32_t ord;          /* 0: 8 */
    uint32_t ird;          /* 0: 8 */
    uint32_t remote_read;  /* inbound RDMA Read allowed */
    uint32_t remote_write; /* inbound RDMA Write allowed */
    uint32_t bind_enabled; /* memory window binds allowed */
    void *qp_context;
};

enum iwv_qp_state {
    IWV_QPS_IDLE = 0,
    IWV_QPS_RTS = 1,
    IWV_QPS_CLOSING = 2,
    IWV_QPS_TERMINATE = 3,
    IWV_QPS_ERROR = 4
};

enum iwv_qp_attr_mask {
    IWV_QP_STATE = 1 << 0,
    IWV_QP_ORD = 1 << 1,
    IWV_QP_IRD = 1 << 2,
    IWV_QP_MAX_SEND_WR = 1 << 3,
    IWV_QP_MAX_RECV_WR = 1 << 4,
    IWV_QP_RQ_LIMIT = 1 << 5
};

struct iwv_qp_attr {
    uint32_t qp_state; /* enum iwv_qp_state */
    uint32_t ord;
    uint32_t ird;
    struct iwv_qp_cap cap;
    uint32_t rq_limit;
    /* iwv_query_qp only: */
    uint32_t qp_num;
    uint32_t core;
    uint32_t connected;
    int32_t terminate_sent;     /* Terminate code sent, or -1 */
    int32_t terminate_received; /* Terminate code received, or -1 */
    uint32_t reserved;
};

/* A QP in state IDLE; connect it with iwv_connect (active side). For a connection
 * request use iwv_cm_create_qp. */
struct iwv_qp *iwv_create_qp(struct iwv_pd *pd, const struct iwv_qp_init_attr *attr);
int iwv_modify_qp(struct iwv_qp *qp, const struct iwv_qp_attr *attr, int attr_mask);
int iwv_query_qp(struct iwv_qp *qp, struct iwv_qp_attr *attr);
int iwv_destroy_qp(struct iwv_qp *qp);
uint32_t iwv_qp_num(struct iwv_qp *qp);
void *iwv_qp_context(struct iwv_qp *qp);
/* Posts the list (ring writes and one doorbell per batch, no system call). On failure
 * *bad_wr (if bad_wr is not NULL) is the first WR not posted. */
int iwv_post_send(struct iwv_qp *qp, struct iwv_send_wr *wr, struct iwv_send_wr **bad_wr);
int iwv_post_recv(struct iwv_qp *qp, struct iwv_recv_wr *wr, struct iwv_recv_wr **bad_wr);

struct iwv_srq_attr {
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t srq_limit; /* SRQ-limit event threshold (0: none) */
    uint32_t armed;     /* iwv_query_srq only */
};

enum iwv_srq_attr_mask { IWV_SRQ_MAX_WR = 1 << 0, IWV_SRQ_LIMIT = 1 << 1 };

struct iwv_srq *iwv_create_srq(struct iwv_pd *pd, const struct iwv_srq_attr *attr);
int iwv_modify_srq(struct iwv_srq *srq, const struct iwv_srq_attr *attr, int attr_mask);
int iwv_query_srq(struct iwv_srq *srq, struct iwv_srq_attr *attr);
int iwv_post_srq_recv(struct iwv_srq *srq, struct iwv_recv_wr *wr,
                      struct iwv_recv_wr **bad_wr);
int iwv_destroy_srq(struct iwv_srq *srq);
uint32_t iwv_srq_handle(struct iwv_srq *srq);

/* ---------------------------------------------------------------- connection manager */

struct iwv_addr {
    uint8_t ip[4];   /* 0.0.0.0: any (listen) */
    uint16_t port;   /* host byte order */
    uint16_t reserved;
};

/* Fills `addr` from a dotted IPv4 string (NULL: 0.0.0.0) and a port. */
int iwv_addr_init(struct iwv_addr *addr, const char *ipv4, uint16_t port);

#define IWV_MAX_PRIVATE_DATA 512

struct iwv_conn_param {
    const void *private_data;
    uint32_t private_data_len; /* at most IWV_MAX_PRIVATE_DATA */
    uint32_t responder_resources; /* IRD; 0: the QP's */
    uint32_t initiator_depth;     /* ORD; 0: the QP's */
    uint32_t reserved;
};

enum iwv_cm_event_type {
    IWV_CM_EVENT_CONNECT_REQUEST = 0,
    IWV_CM_EVENT_ESTABLISHED = 1,
    IWV_CM_EVENT_REJECTED = 2,
    IWV_CM_EVENT_CONNECT_ERROR = 3, /* status: enum iwv_connect_error */
    IWV_CM_EVENT_DISCONNECTED = 4,
    IWV_CM_EVENT_DEVICE_REMOVAL = 5
};

enum iwv_connect_error {
    IWV_CONNECT_REFUSED = 1,
    IWV_CONNECT_RESET = 2,
    IWV_CONNECT_TIMEOUT = 3,
    IWV_CONNECT_UNREACHABLE = 4,
    IWV_CONNECT_MPA = 5, /* mpa_code: the MPA error */
    IWV_CONNECT_ABORTED = 6
};

struct iwv_cm_event {
    /* The id the event is for. CONNECT_REQUEST: a new id for the request, yours: create
     * its QP with iwv_cm_create_qp, then iwv_accept or iwv_reject; destroy it with
     * iwv_destroy_id. NULL if the id was destroyed meanwhile. */
    struct iwv_cm_id *id;
    struct iwv_cm_id *listen_id; /* CONNECT_REQUEST: the listener */
    uint32_t event;              /* enum iwv_cm_event_type */
    int32_t status;              /* CONNECT_ERROR: enum iwv_connect_error; else 0 */
    const void *private_data;    /* valid until iwv_ack_cm_event */
    uint32_t private_data_len;
    uint32_t qp_num;             /* ESTABLISHED: the QP */
    struct iwv_addr remote;      /* CONNECT_REQUEST */
    struct iwv_addr local;       /* CONNECT_REQUEST */
    uint32_t ird;                /* CONNECT_REQUEST: the peer's */
    uint32_t ord;
    uint32_t mpa_code;           /* CONNECT_ERROR with IWV_CONNECT_MPA */
    uint32_t reserved;
};

struct iwv_event_channel *iwv_create_event_channel(struct iwv_context *ctx);
/* Readable while an event waits (or the daemon is gone); do not read it. */
int iwv_event_channel_fd(struct iwv_event_channel *channel);
/* -IWV_EBUSY while CM ids of it exist. */
int iwv_destroy_event_channel(struct iwv_event_channel *channel);
/* The next event; release it with iwv_ack_cm_event. */
int iwv_get_cm_event(struct iwv_event_channel *channel, struct iwv_cm_event **event,
                     int timeout_ms);
int iwv_ack_cm_event(struct iwv_cm_event *event);

struct iwv_cm_id *iwv_create_id(struct iwv_event_channel *channel, void *context);
void *iwv_cm_id_context(struct iwv_cm_id *id);
int iwv_destroy_id(struct iwv_cm_id *id);
/* Listens on addr (ip 0.0.0.0: every address of the daemon); CONNECT_REQUEST follows. */
int iwv_listen(struct iwv_cm_id *id, const struct iwv_addr *addr, int backlog);
/* Connects an IDLE QP (iwv_create_qp) to `remote`; ESTABLISHED, REJECTED or
 * CONNECT_ERROR follows. param may be NULL. */
int iwv_connect(struct iwv_cm_id *id, struct iwv_qp *qp, const struct iwv_addr *remote,
                const struct iwv_conn_param *param);
/* The QP of a connection request (rdma_create_qp), on the core that received it. */
struct iwv_qp *iwv_cm_create_qp(struct iwv_cm_id *id, struct iwv_pd *pd,
                                const struct iwv_qp_init_attr *attr);
int iwv_accept(struct iwv_cm_id *id, struct iwv_qp *qp, const struct iwv_conn_param *param);
int iwv_reject(struct iwv_cm_id *id, const void *private_data, uint32_t private_data_len);
/* Graceful disconnect once the SQ drained; DISCONNECTED follows. */
int iwv_disconnect(struct iwv_cm_id *id);

/* ---------------------------------------------------------------- ABI checks */

#if defined(__cplusplus) && __cplusplus >= 201103L
#define IWV_STATIC_ASSERT(c, m) static_assert(c, m)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define IWV_STATIC_ASSERT(c, m) _Static_assert(c, m)
#elif defined(__GNUC__) || defined(__clang__)
/* C99 compilers: _Static_assert is a GNU extension there (silenced for -pedantic). */
#define IWV_STATIC_ASSERT(c, m) __extension__ _Static_assert(c, m)
#else
#define IWV_STATIC_ASSERT(c, m)
#endif

#if UINTPTR_MAX == 0xffffffffffffffffu
IWV_STATIC_ASSERT(sizeof(struct iwv_device_attr) == 240, "iwv_device_attr ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_port_attr) == 88, "iwv_port_attr ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_async_event) == 16, "iwv_async_event ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_wc) == 32, "iwv_wc ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_sge) == 16, "iwv_sge ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_send_wr) == 128, "iwv_send_wr ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_recv_wr) == 32, "iwv_recv_wr ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_qp_cap) == 16, "iwv_qp_cap ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_qp_init_attr) == 72, "iwv_qp_init_attr ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_qp_attr) == 56, "iwv_qp_attr ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_srq_attr) == 16, "iwv_srq_attr ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_addr) == 8, "iwv_addr ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_conn_param) == 24, "iwv_conn_param ABI");
IWV_STATIC_ASSERT(sizeof(struct iwv_cm_event) == 72, "iwv_cm_event ABI");
#endif

#ifdef __cplusplus
}
#endif
