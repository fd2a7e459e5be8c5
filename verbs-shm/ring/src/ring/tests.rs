use super::*;
use crate::{
    decode_cqe, decode_send_wr, encode_cqe, encode_send_wr, RingKind, CQE_SLOT_SIZE, SEND_SLOT_SIZE,
};
use iwarp_types::{Cqe, QpId, SendFlags, SendOp, SendWr, SgList, WcOpcode, WcStatus};

fn slot(v: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&v.to_ne_bytes());
    b[8..].copy_from_slice(&(!v).to_ne_bytes());
    b
}

fn pair(entries: u32) -> (Producer, Consumer, Region) {
    let layout = RingLayout::new(entries, 16).unwrap();
    let region = Region::alloc(layout.total_bytes());
    let p = Producer::init(region.clone(), layout).unwrap();
    let c = Consumer::attach(region.clone(), layout).unwrap();
    (p, c, region)
}

fn set_index(region: &Region, offset: usize, v: u64) {
    region.word(offset).unwrap().store(v, Ordering::SeqCst);
}

#[test]
fn fifo_full_empty_and_wrap() {
    let (mut p, mut c, _r) = pair(4);
    let mut out = [0u8; 16];
    assert_eq!(c.pop(&mut out), Ok(false));
    assert_eq!(p.free(), Ok(4));
    let mut next_out = 0u64;
    let mut next_in = 0u64;
    for round in 0..100 {
        let burst = 1 + round % 4;
        for _ in 0..burst {
            p.push(&slot(next_in)).unwrap();
            next_in += 1;
        }
        assert_eq!(p.len(), Ok(burst as u32));
        assert_eq!(c.len(), Ok(burst as u32));
        assert_eq!(c.free(), Ok(4 - burst as u32));
        if burst == 4 {
            assert_eq!(p.push(&slot(0)), Err(RingError::Full));
        }
        while c.pop(&mut out).unwrap() {
            assert_eq!(out, slot(next_out));
            next_out += 1;
        }
        assert_eq!(next_out, next_in);
        assert_eq!(c.is_empty(), Ok(true));
        assert_eq!(p.is_empty(), Ok(true));
    }
}

#[test]
fn push_keeping_leaves_room_for_the_producers_own_slot() {
    let (mut p, mut c, region) = pair(4);
    for i in 0..3 {
        p.push_keeping(&slot(i), 1).unwrap();
    }
    assert_eq!(p.push_keeping(&slot(3), 1), Err(RingError::Full));
    // The kept slot is there for a plain push.
    p.push(&slot(99)).unwrap();
    assert_eq!(p.push(&slot(100)), Err(RingError::Full));
    let mut out = [0u8; 16];
    assert_eq!(c.pop(&mut out), Ok(true));
    assert_eq!(out, slot(0));
    // One slot read: room for one kept push only if a slot stays free after it.
    assert_eq!(p.push_keeping(&slot(3), 1), Err(RingError::Full));
    assert_eq!(c.pop(&mut out), Ok(true));
    p.push_keeping(&slot(3), 1).unwrap();
    assert_eq!(p.push_keeping(&slot(4), 4), Err(RingError::Full));
    // A broken consumer index is found by the re-read, not trusted.
    set_index(&region, CONSUMER_INDEX_OFFSET, 1000);
    assert!(matches!(
        p.push_keeping(&slot(5), 1),
        Err(RingError::Corrupt { .. })
    ));
}

#[test]
fn bursts_are_partial_when_space_is_short() {
    let (mut p, mut c, _r) = pair(8);
    let mut slots = Vec::new();
    for i in 0..12u64 {
        slots.extend_from_slice(&slot(i));
    }
    assert_eq!(p.push_burst(&slots), Ok(8));
    assert_eq!(p.push_burst(&slots[8 * 16..]), Ok(0));
    let mut out = [0u8; 3 * 16];
    assert_eq!(c.pop_burst(&mut out), Ok(3));
    for i in 0..3 {
        assert_eq!(out[i * 16..(i + 1) * 16], slot(i as u64));
    }
    assert_eq!(p.push_burst(&slots[8 * 16..]), Ok(3));
    let mut out = [0u8; 16 * 16];
    assert_eq!(c.pop_burst(&mut out), Ok(8));
    for i in 0..8 {
        assert_eq!(out[i * 16..(i + 1) * 16], slot(i as u64 + 3));
    }
    assert_eq!(c.pop_burst(&mut out), Ok(0));
    assert_eq!(p.push_burst(&[]), Ok(0));
    assert_eq!(c.pop_burst(&mut []), Ok(0));
}

#[test]
fn wrong_slot_sizes_rejected() {
    let (mut p, mut c, _r) = pair(4);
    assert_eq!(
        p.push(&[0u8; 8]),
        Err(RingError::WrongSlotSize {
            expected: 16,
            got: 8
        })
    );
    assert!(p.push_burst(&[0u8; 24]).is_err());
    assert!(c.pop(&mut [0u8; 32]).is_err());
    assert!(c.pop_burst(&mut [0u8; 40]).is_err());
    assert_eq!(p.len(), Ok(0));
}

#[test]
fn attach_checks_the_header_once() {
    let layout = RingLayout::with_kind(RingKind::Send, 8, 16).unwrap();
    let region = Region::alloc(layout.total_bytes());
    assert!(matches!(
        Consumer::attach(region.clone(), layout),
        Err(LayoutError::BadMagic(0))
    ));
    let small = region.sub(0, layout.total_bytes() - 64).unwrap();
    assert!(matches!(
        Producer::init(small, layout),
        Err(LayoutError::TooSmall { .. })
    ));
    Producer::init(region.clone(), layout).unwrap();
    let cq = RingLayout::with_kind(RingKind::Completion, 8, 16).unwrap();
    assert!(matches!(
        Consumer::attach(region.clone(), cq),
        Err(LayoutError::Mismatch { field: "kind", .. })
    ));
    set_index(&region, PRODUCER_INDEX_OFFSET, 9);
    assert_eq!(
        Consumer::attach(region.clone(), layout).unwrap_err(),
        LayoutError::BadIndices {
            produced: 9,
            consumed: 0
        }
    );
    set_index(&region, PRODUCER_INDEX_OFFSET, 8);
    let mut c = Consumer::attach(region.clone(), layout).unwrap();
    assert_eq!(c.len(), Ok(8));
}

#[test]
fn malicious_consumer_index_is_detected_not_trusted() {
    let (mut p, mut c, region) = pair(4);
    p.push(&slot(1)).unwrap();
    // Consumer index ahead of the producer: "more than free".
    set_index(&region, CONSUMER_INDEX_OFFSET, 5);
    // The cached view still has room, so the push goes in without re-reading.
    p.push(&slot(2)).unwrap();
    p.push(&slot(3)).unwrap();
    p.push(&slot(4)).unwrap();
    // Now full by the cache: the producer re-reads and finds nonsense.
    assert_eq!(
        p.push(&slot(5)),
        Err(RingError::Corrupt {
            produced: 4,
            consumed: 5
        })
    );
    assert!(p.len().is_err());
    // Consumer index far behind (more than `entries` outstanding).
    set_index(&region, CONSUMER_INDEX_OFFSET, u64::MAX - 10);
    assert!(matches!(p.free(), Err(RingError::Corrupt { .. })));
    // Restored: the ring works again and nothing was lost.
    set_index(&region, CONSUMER_INDEX_OFFSET, 0);
    assert_eq!(p.free(), Ok(0));
    let mut out = [0u8; 16];
    for i in 1..=4 {
        assert_eq!(c.pop(&mut out), Ok(true));
        assert_eq!(out, slot(i));
    }
}

#[test]
fn malicious_producer_index_is_detected_not_trusted() {
    let (mut p, mut c, region) = pair(4);
    p.push(&slot(1)).unwrap();
    let mut out = [0u8; 16];
    for bad in [5, 1 << 40, u64::MAX] {
        set_index(&region, PRODUCER_INDEX_OFFSET, bad);
        assert_eq!(
            c.pop(&mut out),
            Err(RingError::Corrupt {
                produced: bad,
                consumed: 0
            })
        );
        assert!(c.pop_burst(&mut [0u8; 64]).is_err());
        assert!(c.len().is_err());
    }
    // Exactly `entries` ahead is legal: four slots (three of them never written) are
    // handed out as bytes, which the slot decoders then validate.
    set_index(&region, PRODUCER_INDEX_OFFSET, 4);
    let mut all = [0u8; 64];
    assert_eq!(c.pop_burst(&mut all), Ok(4));
    assert_eq!(all[..16], slot(1));
    // Going backwards below the consumer is detected too.
    set_index(&region, PRODUCER_INDEX_OFFSET, 2);
    assert!(matches!(c.pop(&mut out), Err(RingError::Corrupt { .. })));
}

#[test]
fn geometry_rewritten_after_attach_is_ignored() {
    let (mut p, mut c, region) = pair(4);
    // A malicious peer rewrites entries and slot size in the header.
    let mut line = [0u8; CACHE_LINE];
    assert!(region.load_bytes(0, &mut line));
    line[16..20].copy_from_slice(&u32::MAX.to_ne_bytes());
    line[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
    assert!(region.store_bytes(0, &line));
    let mut out = [0u8; 16];
    for i in 0..20 {
        p.push(&slot(i)).unwrap();
        assert_eq!(c.pop(&mut out), Ok(true));
        assert_eq!(out, slot(i));
    }
}

#[test]
fn typed_rings_packed_in_one_region() {
    let sq = RingLayout::send_queue(16).unwrap();
    let cq = RingLayout::completion_queue(32).unwrap();
    let region = Region::alloc(sq.total_bytes() + cq.total_bytes());
    let sq_region = region.sub(0, sq.total_bytes()).unwrap();
    let cq_region = region.sub(sq.total_bytes(), cq.total_bytes()).unwrap();
    let mut sq_client = Producer::init(sq_region.clone(), sq).unwrap();
    let mut sq_core = Consumer::attach(sq_region, sq).unwrap();
    let mut cq_core = Producer::init(cq_region.clone(), cq).unwrap();
    let mut cq_client = Consumer::attach(cq_region, cq).unwrap();
    for i in 0..40u64 {
        let wr = SendWr {
            wr_id: i,
            op: SendOp::Write {
                remote_to: i * 64,
                rkey: iwarp_types::Stag(i as u32),
            },
            sgl: SgList::new(),
            flags: SendFlags::SIGNALED,
        };
        sq_client.push(&encode_send_wr(&wr)).unwrap();
        let mut b = [0u8; SEND_SLOT_SIZE];
        assert_eq!(sq_core.pop(&mut b), Ok(true));
        let got = decode_send_wr(&b).unwrap();
        assert_eq!(got, wr);
        let cqe = Cqe {
            wr_id: got.wr_id,
            status: WcStatus::Success,
            opcode: WcOpcode::Write,
            byte_len: 0,
            qp: QpId(3),
            invalidated: None,
            solicited: false,
        };
        cq_core.push(&encode_cqe(&cqe)).unwrap();
        let mut b = [0u8; CQE_SLOT_SIZE];
        assert_eq!(cq_client.pop(&mut b), Ok(true));
        assert_eq!(decode_cqe(&b), Ok(cqe));
    }
}
