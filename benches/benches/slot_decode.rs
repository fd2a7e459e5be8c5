//! Decoding one work request from its shared-memory ring slot, as the service does for
//! every WR a client posts (`iwarp_shm_ring::decode_send_wr`, `decode_recv_wr`): the
//! slot is untrusted, so every field an opcode does not use, the reserved words and the
//! unused SGEs are checked to be zero.
//!
//! Run: `cargo bench -p iwarp-benches --bench slot_decode -- --warm-up-time 1
//! --measurement-time 2`.

use criterion::Criterion;
use iwarp_shm_ring::{decode_recv_wr, decode_send_wr, encode_recv_wr, encode_send_wr};
use iwarp_types::{RecvWr, SendFlags, SendOp, SendWr, SgList, Sge, Stag};
use std::hint::black_box;

fn sgl() -> SgList {
    SgList::single(Sge {
        addr: 0x1000,
        length: 64,
        lkey: Stag(0x1234_5600),
    })
}

fn slot_decode(c: &mut Criterion) {
    let write = encode_send_wr(&SendWr {
        wr_id: 7,
        op: SendOp::Write {
            remote_to: 0x9000,
            rkey: Stag(0x4321_0000),
        },
        sgl: sgl(),
        flags: SendFlags::SIGNALED,
    });
    let send = encode_send_wr(&SendWr {
        wr_id: 8,
        op: SendOp::Send,
        sgl: sgl(),
        flags: SendFlags::SIGNALED,
    });
    let recv = encode_recv_wr(&RecvWr {
        wr_id: 9,
        sgl: sgl(),
    });
    let mut g = c.benchmark_group("slot_decode");
    g.bench_function("write_1_sge", |b| {
        b.iter(|| decode_send_wr(black_box(&write)))
    });
    g.bench_function("send_1_sge", |b| {
        b.iter(|| decode_send_wr(black_box(&send)))
    });
    g.bench_function("recv_1_sge", |b| {
        b.iter(|| decode_recv_wr(black_box(&recv)))
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    slot_decode(&mut c);
    c.final_summary();
}
