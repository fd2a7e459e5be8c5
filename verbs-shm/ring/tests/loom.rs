//! Model checking of the index protocol with loom: the same ring code, built over loom's
//! atomics (`RUSTFLAGS="--cfg loom" cargo test -p iwarp-shm-ring --release --test loom`).
//!
//! loom explores every interleaving of the two threads and every value a `Relaxed` or
//! `Acquire` load may legally return under the C++11 memory model. A slot carries two
//! words (`v`, `!v`) written with relaxed stores; if the doorbell ordering were too weak,
//! some execution would let the consumer read a stale or half-written slot and the
//! assertions below would fail.
#![cfg(loom)]

use iwarp_shm_ring::{Consumer, Producer, Region, RingError, RingLayout};
use loom::thread;

const SLOT: usize = 16;

fn slot(v: u64) -> [u8; SLOT] {
    let mut b = [0u8; SLOT];
    b[..8].copy_from_slice(&v.to_ne_bytes());
    b[8..].copy_from_slice(&(!v).to_ne_bytes());
    b
}

fn ring(entries: u32) -> (Producer, Consumer, Region) {
    let layout = RingLayout::new(entries, SLOT as u32).unwrap();
    let region = Region::alloc(layout.total_bytes());
    let p = Producer::init(region.clone(), layout).unwrap();
    let c = Consumer::attach(region.clone(), layout).unwrap();
    (p, c, region)
}

/// Three slots through a ring of two: every slot arrives once, in order, intact, and the
/// producer never overwrites a slot the consumer has not copied yet.
#[test]
fn push_pop_in_order_and_intact() {
    loom::model(|| {
        let (mut p, mut c, _region) = ring(2);
        let producer = thread::spawn(move || {
            for v in 1..=3u64 {
                loop {
                    match p.push(&slot(v)) {
                        Ok(()) => break,
                        Err(RingError::Full) => thread::yield_now(),
                        Err(e) => panic!("push: {e}"),
                    }
                }
            }
        });
        let mut out = [0u8; SLOT];
        for v in 1..=3u64 {
            while !c.pop(&mut out).expect("pop") {
                thread::yield_now();
            }
            assert_eq!(out, slot(v));
        }
        producer.join().unwrap();
        assert_eq!(c.len(), Ok(0));
    });
}

/// Bursts: one doorbell publishes several slots, one consumer store frees several.
#[test]
fn bursts_in_order_and_intact() {
    loom::model(|| {
        let (mut p, mut c, _region) = ring(2);
        let producer = thread::spawn(move || {
            let mut all = Vec::new();
            for v in 1..=3u64 {
                all.extend_from_slice(&slot(v));
            }
            let mut sent = 0;
            while sent < 3 {
                let n = p.push_burst(&all[sent * SLOT..]).expect("push_burst");
                if n == 0 {
                    thread::yield_now();
                }
                sent += n;
            }
        });
        let mut got = 0u64;
        let mut out = [0u8; 2 * SLOT];
        while got < 3 {
            let n = c.pop_burst(&mut out).expect("pop_burst");
            if n == 0 {
                thread::yield_now();
            }
            for s in out.chunks_exact(SLOT).take(n) {
                got += 1;
                assert_eq!(s, slot(got));
            }
        }
        producer.join().unwrap();
    });
}

/// A malicious producer scribbles a slot and publishes a legal, an absurd and a
/// backwards index while the consumer polls: the consumer only ever gets bytes or
/// `Corrupt`, never an out-of-range access or a panic, and `len` never exceeds the
/// capacity.
#[test]
fn malicious_producer_cannot_break_the_consumer() {
    loom::model(|| {
        let (_p, mut c, region) = ring(2);
        let evil = region.clone();
        let attacker = thread::spawn(move || {
            assert!(evil.store_u64(SLOT0, 7));
            assert!(evil.store_u64(PRODUCER_INDEX, 1));
            assert!(evil.store_u64(PRODUCER_INDEX, 1 << 40));
            assert!(evil.store_u64(PRODUCER_INDEX, 0));
        });
        let mut out = [0u8; SLOT];
        for _ in 0..2 {
            match c.pop(&mut out) {
                Ok(true) => assert_eq!(out[..8], 7u64.to_ne_bytes()),
                Ok(false) => {}
                Err(RingError::Corrupt { .. }) => {}
                Err(e) => panic!("unexpected {e}"),
            }
            if let Ok(n) = c.len() {
                assert!(n <= 2);
            }
        }
        attacker.join().unwrap();
    });
}

/// A ring of one slot: the tightest wrap. `len` and `free` seen from either side stay
/// within the capacity while the other side works.
#[test]
fn single_slot_ring_with_len_and_free() {
    loom::model(|| {
        let (mut p, mut c, _region) = ring(1);
        let producer = thread::spawn(move || {
            for v in 1..=2u64 {
                loop {
                    assert!(p.free().expect("free") <= 1);
                    match p.push(&slot(v)) {
                        Ok(()) => break,
                        Err(RingError::Full) => thread::yield_now(),
                        Err(e) => panic!("push: {e}"),
                    }
                }
            }
        });
        let mut out = [0u8; SLOT];
        for v in 1..=2u64 {
            loop {
                assert!(c.len().expect("len") <= 1);
                if c.pop(&mut out).expect("pop") {
                    break;
                }
                thread::yield_now();
            }
            assert_eq!(out, slot(v));
        }
        producer.join().unwrap();
    });
}

/// A malicious consumer publishes a consumer index ahead of the producer and one far
/// behind while the producer pushes: the producer gets `Ok`, `Full` or `Corrupt`, and
/// never reports more free slots than the capacity.
#[test]
fn malicious_consumer_cannot_break_the_producer() {
    loom::model(|| {
        let (mut p, _c, region) = ring(2);
        let evil = region.clone();
        let attacker = thread::spawn(move || {
            assert!(evil.store_u64(CONSUMER_INDEX, 3));
            assert!(evil.store_u64(CONSUMER_INDEX, u64::MAX));
        });
        for v in 0..3u64 {
            match p.push(&slot(v)) {
                Ok(()) | Err(RingError::Full) | Err(RingError::Corrupt { .. }) => {}
                Err(e) => panic!("unexpected {e}"),
            }
            if let Ok(n) = p.free() {
                assert!(n <= 2);
            }
        }
        attacker.join().unwrap();
    });
}

/// Byte offset of the consumer index in the header.
const CONSUMER_INDEX: usize = 128;
/// Byte offset of the producer index in the header.
const PRODUCER_INDEX: usize = 64;
/// Byte offset of slot 0.
const SLOT0: usize = 192;
