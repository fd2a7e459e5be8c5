/*
 * Out-of-line wrappers for DPDK's static inline functions and macros, so that Rust can
 * call them, plus the memif peer-loss guard (see shim.c).
 */
#ifndef IWARP_DPDK_SHIM_H
#define IWARP_DPDK_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

/* ethdev fast path */
uint16_t shim_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **pkts, uint16_t n);
uint16_t shim_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **pkts, uint16_t n);

/* mbufs */
struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *mp);
int shim_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int n);
void shim_pktmbuf_free(struct rte_mbuf *m);
void shim_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int n);
void *shim_pktmbuf_mtod(struct rte_mbuf *m);
char *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
uint16_t shim_pktmbuf_tailroom(const struct rte_mbuf *m);
/* Sets the TX offload request: ORs `ol_flags` in and writes l2_len/l3_len/l4_len. */
void shim_mbuf_set_tx_offload(struct rte_mbuf *m, uint64_t ol_flags, uint16_t l2_len,
			      uint16_t l3_len, uint16_t l4_len);

/* external buffers (client memory) */
struct rte_mbuf_ext_shared_info *shim_pktmbuf_ext_shinfo_init_helper(
	void *buf_addr, uint16_t *buf_len, rte_mbuf_extbuf_free_callback_t free_cb,
	void *fcb_opaque);
void shim_pktmbuf_attach_extbuf(struct rte_mbuf *m, void *buf_addr, rte_iova_t buf_iova,
				uint16_t buf_len, struct rte_mbuf_ext_shared_info *shinfo);
void shim_pktmbuf_detach_extbuf(struct rte_mbuf *m);

/* lcores, errors, time */
unsigned int shim_lcore_id(void);
int shim_errno(void);
void shim_set_errno(int value);
uint64_t shim_rdtsc(void);
uint64_t shim_get_tsc_hz(void);

/*
 * memif peer-loss guard. A polling lcore brackets each burst with a slot's `active` flag;
 * a munmap() made by the EAL interrupt thread (where the memif PMD tears a lost peer's
 * regions down) first raises a barrier and waits, bounded, until no slot is inside a burst.
 */
#define SHIM_GUARD_SLOTS 128
/* Takes a free slot; returns its index or -1 when all are taken. */
int shim_guard_slot_acquire(void);
/* Gives a slot back (the caller no longer polls with it). */
void shim_guard_slot_release(int slot);
uint16_t shim_rx_burst_guarded(int slot, uint16_t port_id, uint16_t queue_id,
			       struct rte_mbuf **pkts, uint16_t n);
uint16_t shim_tx_burst_guarded(int slot, uint16_t port_id, uint16_t queue_id,
			       struct rte_mbuf **pkts, uint16_t n);
/* Barriers run so far, and how many of them gave up waiting (a burst took > 1 s). */
uint64_t shim_guard_barriers(void);
uint64_t shim_guard_timeouts(void);
/* Turns the barrier on (default) or off (only to measure what it prevents). */
void shim_guard_set_enabled(int enabled);
/* The guard's munmap, to check that the process resolves `munmap` to it. */
void *shim_guard_munmap_addr(void);

/* Waits until the EAL interrupt thread has finished `rounds` more turns of its event loop
 * (each marked by an alarm callback), at most timeout_ms per turn. 0, -ETIMEDOUT, or the
 * negative errno of rte_eal_alarm_set. Never call it on the interrupt thread. */
int shim_intr_barrier(unsigned int rounds, unsigned int timeout_ms);

/* Parks the EAL interrupt thread inside a callback that never returns (until the
 * process exits), waiting at most timeout_ms for it to get there: call it right before
 * rte_eal_cleanup(), which does not stop that thread. 0, -ETIMEDOUT or -errno. */
int shim_intr_park(unsigned int timeout_ms);

#endif
