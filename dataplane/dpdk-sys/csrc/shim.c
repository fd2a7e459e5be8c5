/*
 * Out-of-line wrappers for DPDK's static inline functions and macros (see shim.h), and
 * the memif peer-loss guard.
 *
 * Why the guard exists: when a memif peer goes away, the PMD's control code runs
 * memif_disconnect() on the EAL interrupt thread. It clears the CONNECTED flag, then
 * munmap()s the shared regions that hold the rings and buffers, then frees the region
 * descriptors. It raises no ethdev event (librte_net_memif.so 22.11 does not even import
 * rte_eth_dev_callback_process), so no LSC callback can run first. A lcore that read the
 * flag just before it was cleared is still inside rx/tx_burst walking the rings, and
 * faults when they are unmapped under it.
 *
 * The guard interposes munmap() for the process (the executable's definition wins over
 * libc's for every shared object, including the dlopen'ed PMD plugins). On the interrupt
 * thread only, and only while some queue uses a guard slot, munmap first raises a barrier
 * and waits (bounded, 1 s) until no slot is inside a burst. A burst that starts while the
 * barrier is up returns 0 without touching the device; one that starts after the barrier
 * is down sees the CONNECTED flag already cleared (it was cleared before the munmap) and
 * the PMD returns 0 by itself. The fast path pays one seq_cst store and one load per burst.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rte_config.h>
#include <rte_alarm.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include "shim.h"

uint16_t shim_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port_id, queue_id, pkts, n);
}

uint16_t shim_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port_id, queue_id, pkts, n);
}

struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int shim_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int n)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, n);
}

void shim_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

void shim_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int n)
{
	rte_pktmbuf_free_bulk(mbufs, n);
}

void *shim_pktmbuf_mtod(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, void *);
}

char *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_append(m, len);
}

uint16_t shim_pktmbuf_tailroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_tailroom(m);
}

void shim_mbuf_set_tx_offload(struct rte_mbuf *m, uint64_t ol_flags, uint16_t l2_len,
			      uint16_t l3_len, uint16_t l4_len)
{
	m->ol_flags |= ol_flags;
	m->l2_len = l2_len;
	m->l3_len = l3_len;
	m->l4_len = l4_len;
}

struct rte_mbuf_ext_shared_info *shim_pktmbuf_ext_shinfo_init_helper(
	void *buf_addr, uint16_t *buf_len, rte_mbuf_extbuf_free_callback_t free_cb,
	void *fcb_opaque)
{
	return rte_pktmbuf_ext_shinfo_init_helper(buf_addr, buf_len, free_cb, fcb_opaque);
}

void shim_pktmbuf_attach_extbuf(struct rte_mbuf *m, void *buf_addr, rte_iova_t buf_iova,
				uint16_t buf_len, struct rte_mbuf_ext_shared_info *shinfo)
{
	rte_pktmbuf_attach_extbuf(m, buf_addr, buf_iova, buf_len, shinfo);
}

void shim_pktmbuf_detach_extbuf(struct rte_mbuf *m)
{
	rte_pktmbuf_detach_extbuf(m);
}

unsigned int shim_lcore_id(void)
{
	return rte_lcore_id();
}

int shim_errno(void)
{
	return rte_errno;
}

void shim_set_errno(int value)
{
	rte_errno = value;
}

uint64_t shim_rdtsc(void)
{
	return rte_rdtsc();
}

uint64_t shim_get_tsc_hz(void)
{
	return rte_get_tsc_hz();
}

/* ---- memif peer-loss guard ------------------------------------------------------------ */

struct shim_guard_slot {
	_Atomic uint32_t used;
	_Atomic uint32_t active;
} __attribute__((aligned(64)));

static struct shim_guard_slot guard_slots[SHIM_GUARD_SLOTS];
static _Atomic uint32_t guard_slots_in_use;
static _Atomic uint32_t guard_barrier;
static _Atomic uint64_t guard_barriers;
static _Atomic uint64_t guard_timeouts;
static _Atomic uint32_t guard_disabled;

void shim_guard_set_enabled(int enabled)
{
	atomic_store(&guard_disabled, enabled ? 0 : 1);
}

int shim_guard_slot_acquire(void)
{
	for (int i = 0; i < SHIM_GUARD_SLOTS; i++) {
		uint32_t expected = 0;
		if (atomic_compare_exchange_strong(&guard_slots[i].used, &expected, 1)) {
			atomic_store(&guard_slots[i].active, 0);
			atomic_fetch_add(&guard_slots_in_use, 1);
			return i;
		}
	}
	return -1;
}

void shim_guard_slot_release(int slot)
{
	if (slot < 0 || slot >= SHIM_GUARD_SLOTS)
		return;
	atomic_store(&guard_slots[slot].active, 0);
	if (atomic_exchange(&guard_slots[slot].used, 0) == 1)
		atomic_fetch_sub(&guard_slots_in_use, 1);
}

/* Enters a burst; returns 0 (and stays outside) when the barrier is up. */
static inline int guard_enter(struct shim_guard_slot *g)
{
	atomic_store_explicit(&g->active, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&guard_barrier, memory_order_seq_cst) != 0) {
		atomic_store_explicit(&g->active, 0, memory_order_release);
		return 0;
	}
	return 1;
}

static inline void guard_leave(struct shim_guard_slot *g)
{
	atomic_store_explicit(&g->active, 0, memory_order_release);
}

uint16_t shim_rx_burst_guarded(int slot, uint16_t port_id, uint16_t queue_id,
			       struct rte_mbuf **pkts, uint16_t n)
{
	struct shim_guard_slot *g = &guard_slots[slot];
	if (!guard_enter(g))
		return 0;
	uint16_t got = rte_eth_rx_burst(port_id, queue_id, pkts, n);
	guard_leave(g);
	return got;
}

uint16_t shim_tx_burst_guarded(int slot, uint16_t port_id, uint16_t queue_id,
			       struct rte_mbuf **pkts, uint16_t n)
{
	struct shim_guard_slot *g = &guard_slots[slot];
	if (!guard_enter(g))
		return 0;
	uint16_t sent = rte_eth_tx_burst(port_id, queue_id, pkts, n);
	guard_leave(g);
	return sent;
}

uint64_t shim_guard_barriers(void)
{
	return atomic_load(&guard_barriers);
}

uint64_t shim_guard_timeouts(void)
{
	return atomic_load(&guard_timeouts);
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Waits until no slot is inside a burst; gives up after 1 s. */
static void guard_quiesce(void)
{
	uint64_t deadline = monotonic_ns() + 1000000000u;
	for (int i = 0; i < SHIM_GUARD_SLOTS; i++) {
		if (atomic_load(&guard_slots[i].used) == 0)
			continue;
		unsigned int spins = 0;
		while (atomic_load_explicit(&guard_slots[i].active, memory_order_seq_cst) != 0) {
			if (++spins % 1024 == 0) {
				if (monotonic_ns() > deadline) {
					atomic_fetch_add(&guard_timeouts, 1);
					return;
				}
				sched_yield();
			} else {
				rte_pause();
			}
		}
	}
}

int munmap(void *addr, size_t len)
{
	int barrier = 0;
	if (atomic_load(&guard_slots_in_use) != 0 && atomic_load(&guard_disabled) == 0 &&
	    rte_thread_is_intr()) {
		barrier = 1;
		atomic_fetch_add_explicit(&guard_barrier, 1, memory_order_seq_cst);
		guard_quiesce();
		atomic_fetch_add(&guard_barriers, 1);
	}
	long ret = syscall(SYS_munmap, addr, len);
	if (barrier)
		atomic_fetch_sub_explicit(&guard_barrier, 1, memory_order_seq_cst);
	return (int)ret;
}

void *shim_guard_munmap_addr(void)
{
	return (void *)&munmap;
}

/*
 * Interrupt-thread barrier. memif runs its control channel on the EAL interrupt thread:
 * a peer's DISCONNECT (or hang-up) makes it run memif_disconnect(), which rte_free()s
 * the regions; closing a device leaves an unregister-pending callback that frees the
 * channel later, also there. If rte_eal_cleanup() has torn the heaps down by then, that
 * rte_free() faults (seen: SIGSEGV at 0x68 in librte_eal on eal-intr-thread after a
 * SIGINT of the perf-loopback daemon, whose two memif ports talk to each other). An
 * alarm callback runs on the interrupt thread: once one alarm ran, and then a second
 * one set afterwards ran too, every event that was pending when the barrier began has
 * been handled (level-triggered epoll: it came in the first alarm's batch or earlier,
 * and that batch is over when the second alarm runs).
 */
static void shim_barrier_alarm(void *arg)
{
	atomic_store_explicit((atomic_int *)arg, 1, memory_order_release);
}

int shim_intr_barrier(unsigned int rounds, unsigned int timeout_ms)
{
	for (unsigned int r = 0; r < rounds; r++) {
		atomic_int done = 0;
		int ret = rte_eal_alarm_set(1, shim_barrier_alarm, &done);
		if (ret != 0)
			return ret;
		uint64_t hz = rte_get_tsc_hz();
		uint64_t end = rte_rdtsc() + hz / 1000 * timeout_ms;
		while (!atomic_load_explicit(&done, memory_order_acquire)) {
			if (rte_rdtsc() > end) {
				/* Waits while the callback runs; afterwards `done` is ours again. */
				rte_eal_alarm_cancel(shim_barrier_alarm, &done);
				return -ETIMEDOUT;
			}
			struct timespec ts = {0, 100000};
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}

/*
 * Parking the interrupt thread for good before rte_eal_cleanup(). 22.11's cleanup does
 * not stop the interrupt thread: it unmaps the memory that holds the interrupt sources
 * while that thread may wake up (a source unregistered, a pending-delete callback, an
 * fd event) and walk them (seen: SIGSEGV in rte_intr_fd_get on eal-intr-thread while the
 * main thread was in rte_eal_memory_detach). A callback that never returns keeps it out
 * of DPDK until the process exits; nothing needs it once the ports are closed. It is the
 * callback of an eventfd source of its own, not an alarm: cleanup unregisters the alarm
 * callback synchronously (it would wait for ever for a parked alarm).
 */
static atomic_int shim_intr_parked;

static void shim_park_callback(void *arg)
{
	(void)arg;
	atomic_store_explicit(&shim_intr_parked, 1, memory_order_release);
	for (;;) {
		struct timespec ts = {0, 50000000};
		nanosleep(&ts, NULL);
	}
}

int shim_intr_park(unsigned int timeout_ms)
{
	static struct rte_intr_handle *handle;
	if (atomic_load_explicit(&shim_intr_parked, memory_order_acquire))
		return 0;
	if (handle == NULL) {
		int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (fd < 0)
			return -errno;
		handle = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
		if (handle == NULL) {
			close(fd);
			return -ENOMEM;
		}
		if (rte_intr_fd_set(handle, fd) != 0 ||
		    rte_intr_type_set(handle, RTE_INTR_HANDLE_EXT) != 0 ||
		    rte_intr_callback_register(handle, shim_park_callback, NULL) != 0) {
			rte_intr_instance_free(handle);
			handle = NULL;
			close(fd);
			return -EINVAL;
		}
		uint64_t one = 1;
		if (write(fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
			return -errno;
	}
	uint64_t end = rte_rdtsc() + rte_get_tsc_hz() / 1000 * timeout_ms;
	while (!atomic_load_explicit(&shim_intr_parked, memory_order_acquire)) {
		if (rte_rdtsc() > end)
			return -ETIMEDOUT;
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	return 0;
}
