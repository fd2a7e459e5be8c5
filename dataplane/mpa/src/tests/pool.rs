//! Storage lent by an [`MpaPool`]: an idle established connection holds no heap, rings
//! and staging buffers go back when done, an exhausted pool makes the connection wait.

use super::*;

fn limits(rings_max: usize, staging_max: usize) -> PoolLimits {
    PoolLimits {
        rings_max,
        staging_max,
    }
}

/// An established pair, events drained and both frames acknowledged.
fn established() -> Pair {
    let c = MpaConfig::default();
    let mut p = Pair::new(&c, &c, b"hello");
    p.establish(b"", 4, 4);
    let (ia, ra) = (p.i_sent, p.r_sent);
    p.i.released(ia, |_| {});
    p.r.released(ra, |_| {});
    // The engine drains events until `None`, which frees the queue.
    assert_eq!(p.i.poll_event(), None);
    assert_eq!(p.r.poll_event(), None);
    p
}

fn ulpdu(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

/// Queues ULPDUs of `lens` on the initiator through `pool`; returns their bytes.
fn queue(p: &mut Pair, pool: &mut MpaPool<u32>, lens: &[usize]) -> Vec<Vec<u8>> {
    assert!(p.i.take_tx_ring(pool));
    lens.iter()
        .enumerate()
        .map(|(k, &len)| {
            let u = ulpdu(len, k as u8);
            p.isrc.ulpdus.insert(k as u32, u.clone());
            p.i.push_ulpdu(k as u32, len).unwrap();
            u
        })
        .collect()
}

/// The initiator's stream from `p.i_sent` to its end, rendered through `pool`.
fn stream(p: &mut Pair, pool: &mut MpaPool<u32>) -> (u64, Vec<u8>) {
    let start = p.i_sent;
    let end = p.i.end_offset();
    let mut buf = vec![0u8; (end - start) as usize];
    p.i.tx_pooled(&mut p.isrc, pool).fill(start, &mut buf);
    p.i_sent = end;
    (start, buf)
}

#[test]
fn an_idle_established_connection_holds_no_heap() {
    let mut p = established();
    assert_eq!(p.i.heap_bytes(), 0);
    assert_eq!(p.r.heap_bytes(), 0);
    let mut pool = MpaPool::new(&MpaConfig::default(), limits(4, 4));
    let want = queue(&mut p, &mut pool, &[100, 1000, 14]);
    assert!(
        p.i.heap_bytes() >= 1024 * 16,
        "the ring of 1024 entries is lent"
    );
    let (start, bytes) = stream(&mut p, &mut pool);
    let mut sink = Sink::default();
    // Split inside the second FPDU: it is staged in a lent buffer, given back when done.
    let cut = 300;
    let mut rx = p.r.rx_pooled(&mut sink, &mut pool);
    assert_eq!(rx.deliver(start, &bytes[..cut]), cut);
    assert_eq!(pool.staging_out(), 1);
    let mut rx = p.r.rx_pooled(&mut sink, &mut pool);
    assert_eq!(
        rx.deliver(start + cut as u64, &bytes[cut..]),
        bytes.len() - cut
    );
    assert_eq!(sink.got, want);
    assert_eq!(pool.staging_out(), 0);
    assert_eq!(p.r.heap_bytes(), 0);
    // Acknowledged: the ring goes back too.
    let mut released = Vec::new();
    assert!(p
        .i
        .released_pooled(p.i_sent, |d| released.push(d), &mut pool));
    assert_eq!(released, [0, 1, 2]);
    assert_eq!(pool.rings_out(), 0);
    assert_eq!(p.i.heap_bytes(), 0);
    // The next burst reuses the same ring: no new allocation.
    queue(&mut p, &mut pool, &[64]);
    assert_eq!(pool.counters().rings_allocated, 1);
    assert_eq!(pool.counters().staging_allocated, 1);
}

#[test]
fn an_exhausted_pool_makes_connections_wait_never_fail() {
    let mut a = established();
    let mut b = established();
    let mut pool = MpaPool::new(&MpaConfig::default(), limits(1, 1));
    // One ring: the second connection waits for it.
    let want_a = queue(&mut a, &mut pool, &[500, 700]);
    assert!(!b.i.take_tx_ring(&mut pool));
    assert_eq!(pool.counters().ring_waits, 1);
    assert_eq!(pool.rings_available(), 0);

    // One staging buffer, held by A's responder in the middle of an FPDU.
    let (a_start, a_bytes) = stream(&mut a, &mut pool);
    let mut a_sink = Sink::default();
    assert_eq!(
        a.r.rx_pooled(&mut a_sink, &mut pool)
            .deliver(a_start, &a_bytes[..600]),
        600
    );
    assert_eq!(pool.staging_out(), 1);

    // A's FPDUs acknowledged: the ring goes to B.
    assert!(a.i.released_pooled(a.i_sent, |_| {}, &mut pool));
    let want_b = queue(&mut b, &mut pool, &[300, 900]);
    let (b_start, b_bytes) = stream(&mut b, &mut pool);

    // B's first FPDU is whole (no staging); its second straddles: without a buffer the
    // octets from its start on are left unconsumed.
    let mut b_sink = Sink::default();
    let cut = 400;
    let first = 2 + 300 + 2 + 4;
    let n =
        b.r.rx_pooled(&mut b_sink, &mut pool)
            .deliver(b_start, &b_bytes[..cut]);
    assert_eq!(n, first, "consumed up to the straddling FPDU");
    assert_eq!(b_sink.got, want_b[..1]);
    assert_eq!(pool.counters().staging_waits, 1);
    assert_eq!(b.r.poll_event(), None, "waiting is not a failure");

    // A completes its FPDU and gives the buffer back; B's peer sends the rest again.
    let rest = &a_bytes[600..];
    assert_eq!(
        a.r.rx_pooled(&mut a_sink, &mut pool)
            .deliver(a_start + 600, rest),
        rest.len()
    );
    assert_eq!(a_sink.got, want_a);
    assert_eq!(pool.staging_out(), 0);
    let at = b_start + first as u64;
    let again = &b_bytes[first..];
    let mut rx = b.r.rx_pooled(&mut b_sink, &mut pool);
    assert_eq!(rx.deliver(at, &again[..100]), 100);
    let mut rx = b.r.rx_pooled(&mut b_sink, &mut pool);
    assert_eq!(rx.deliver(at + 100, &again[100..]), again.len() - 100);
    assert_eq!(b_sink.got, want_b);
    assert_eq!(pool.staging_out(), 0);
}

#[test]
fn split_fpdus_render_in_the_shared_scratch_buffer() {
    let mut p = established();
    let mut pool = MpaPool::new(&MpaConfig::default(), limits(1, 1));
    queue(&mut p, &mut pool, &[1000]);
    let start = p.i_sent;
    let end = p.i.end_offset();
    let mut whole = vec![0u8; (end - start) as usize];
    p.i.tx_pooled(&mut p.isrc, &mut pool)
        .fill(start, &mut whole);
    let held = p.i.heap_bytes();
    // TCP asks for pieces (the MSS shrank): same bytes, and no buffer of its own.
    for (a, b) in [(0, 500), (500, 1001), (1001, whole.len())] {
        let mut part = vec![0u8; b - a];
        p.i.tx_pooled(&mut p.isrc, &mut pool)
            .fill(start + a as u64, &mut part);
        assert_eq!(part, whole[a..b]);
    }
    assert_eq!(p.i.heap_bytes(), held);
    // Without a pool the connection allocates its own once.
    let mut part = vec![0u8; 10];
    p.i.tx(&mut p.isrc).fill(start + 3, &mut part);
    assert_eq!(part, whole[3..13]);
    assert!(p.i.heap_bytes() > held);
}
