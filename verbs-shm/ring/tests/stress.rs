//! Stress tests over a real shared mapping: a `memfd_create` file mapped twice
//! (`MAP_SHARED`, two virtual addresses for the same pages), first by two threads, then
//! by two processes (`fork`). Millions of slots cross the ring; the consumer checks the
//! sequence and a checksum of every word.
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use iwarp_shm_ring::{
    decode_send_wr, encode_send_wr, Consumer, Producer, Region, RingError, RingLayout,
    SEND_SLOT_SIZE,
};
use iwarp_types::{SendFlags, SendOp, SendWr, SgList, Sge, Stag};

/// A memfd of `len` bytes, mapped twice.
struct SharedFile {
    fd: libc::c_int,
    maps: [*mut libc::c_void; 2],
    len: usize,
}

impl SharedFile {
    fn new(len: usize) -> SharedFile {
        // SAFETY: plain system calls with valid arguments; every result is checked.
        unsafe {
            let fd = libc::memfd_create(c"iwarp-shm-ring-test".as_ptr(), libc::MFD_CLOEXEC);
            assert!(fd >= 0, "memfd_create");
            assert_eq!(libc::ftruncate(fd, len as libc::off_t), 0, "ftruncate");
            let map = || {
                let p = libc::mmap(
                    core::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                );
                assert_ne!(p, libc::MAP_FAILED, "mmap");
                p
            };
            SharedFile {
                fd,
                maps: [map(), map()],
                len,
            }
        }
    }

    /// A region over mapping `i`.
    fn region(&self, i: usize) -> Region {
        // SAFETY: the mapping is `len` bytes, readable and writable, and stays mapped
        // until `self` drops, after every region of the test is gone.
        unsafe { Region::from_raw(self.maps[i].cast::<u8>(), self.len) }.expect("region")
    }
}

impl Drop for SharedFile {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mappings and closing our own fd.
        unsafe {
            for m in self.maps {
                libc::munmap(m, self.len);
            }
            libc::close(self.fd);
        }
    }
}

/// splitmix64: the value of word `w` of slot `seq`.
fn word(seq: u64, w: u64) -> u64 {
    let mut z = seq
        .wrapping_mul(8)
        .wrapping_add(w)
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const SLOT: usize = 64;
const WORDS: usize = SLOT / 8;

fn fill(seq: u64, out: &mut [u8]) {
    out[..8].copy_from_slice(&seq.to_ne_bytes());
    for w in 1..WORDS {
        out[w * 8..w * 8 + 8].copy_from_slice(&word(seq, w as u64).to_ne_bytes());
    }
}

/// Checks slot `seq` and returns its checksum contribution.
fn check(seq: u64, slot: &[u8]) -> u64 {
    let mut sum = 0u64;
    for w in 0..WORDS {
        let mut b = [0u8; 8];
        b.copy_from_slice(&slot[w * 8..w * 8 + 8]);
        let v = u64::from_ne_bytes(b);
        let want = if w == 0 { seq } else { word(seq, w as u64) };
        assert_eq!(v, want, "slot {seq} word {w}");
        sum = sum.wrapping_add(v.rotate_left(w as u32));
    }
    sum
}

fn expected_sum(count: u64) -> u64 {
    let mut buf = [0u8; SLOT];
    (0..count).fold(0u64, |s, seq| {
        fill(seq, &mut buf);
        s.wrapping_add(check(seq, &buf))
    })
}

fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins % 64 == 0 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// Produces `count` slots, in bursts of 1..=8.
fn produce(mut p: Producer, count: u64) {
    let mut burst = [0u8; 8 * SLOT];
    let mut seq = 0u64;
    let mut spins = 0;
    while seq < count {
        let n = (1 + seq % 8).min(count - seq) as usize;
        for i in 0..n {
            fill(seq + i as u64, &mut burst[i * SLOT..(i + 1) * SLOT]);
        }
        let pushed = if n == 1 {
            match p.push(&burst[..SLOT]) {
                Ok(()) => 1,
                Err(RingError::Full) => 0,
                Err(e) => panic!("push: {e}"),
            }
        } else {
            p.push_burst(&burst[..n * SLOT]).expect("push_burst")
        };
        if pushed == 0 {
            backoff(&mut spins);
        }
        seq += pushed as u64;
    }
}

/// Consumes `count` slots (alternating single pops and bursts); returns the checksum.
fn consume(mut c: Consumer, count: u64, deadline: Instant) -> u64 {
    let mut buf = [0u8; 16 * SLOT];
    let mut seq = 0u64;
    let mut sum = 0u64;
    let mut spins = 0;
    while seq < count {
        let n = if seq % 3 == 0 {
            usize::from(c.pop(&mut buf[..SLOT]).expect("pop"))
        } else {
            c.pop_burst(&mut buf).expect("pop_burst")
        };
        if n == 0 {
            assert!(Instant::now() < deadline, "stalled at {seq}");
            backoff(&mut spins);
        }
        for s in buf.chunks_exact(SLOT).take(n) {
            sum = sum.wrapping_add(check(seq, s));
            seq += 1;
        }
    }
    assert_eq!(c.len(), Ok(0));
    sum
}

/// Two threads, each on its own mapping of one memfd: 4 million slots through a ring of
/// 256.
#[test]
fn threads_over_two_mappings_of_one_memfd() {
    const COUNT: u64 = 4_000_000;
    let layout = RingLayout::new(256, SLOT as u32).unwrap();
    let file = SharedFile::new(layout.total_bytes());
    let p = Producer::init(file.region(0), layout).unwrap();
    let c = Consumer::attach(file.region(1), layout).unwrap();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(300);
    let sum = std::thread::scope(|s| {
        s.spawn(|| produce(p, COUNT));
        consume(c, COUNT, deadline)
    });
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{COUNT} slots of {SLOT} B in {secs:.3} s: {:.1} M slots/s",
        COUNT as f64 / secs / 1e6
    );
    assert_eq!(sum, expected_sum(COUNT));
}

fn send_wr(seq: u64) -> SendWr {
    send_wr_no_alloc(seq)
}

/// Two processes: a forked child produces encoded send work requests on its mapping,
/// the parent consumes and decodes them on the other mapping: 1 million WRs through an
/// SQ ring of 64.
#[test]
fn two_processes_send_queue() {
    const COUNT: u64 = 1_000_000;
    let layout = RingLayout::send_queue(64).unwrap();
    let file = SharedFile::new(layout.total_bytes());
    let mut p = Producer::init(file.region(0), layout).unwrap();
    let mut c = Consumer::attach(file.region(1), layout).unwrap();
    // SAFETY: the child only encodes on the stack, pushes into the shared mapping and
    // calls `_exit`: no allocation, no lock, nothing that another thread of the test
    // harness could hold at fork time.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let mut seq = 0u64;
        let mut code = 0;
        while seq < COUNT {
            let mut slot = [0u8; SEND_SLOT_SIZE];
            let wr = send_wr_no_alloc(seq);
            slot.copy_from_slice(&encode_send_wr(&wr));
            match p.push(&slot) {
                Ok(()) => seq += 1,
                Err(RingError::Full) => {
                    // SAFETY: plain system call.
                    unsafe { libc::sched_yield() };
                }
                Err(_) => {
                    code = 1;
                    break;
                }
            }
        }
        // SAFETY: terminate the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let start = Instant::now();
    let deadline = start + Duration::from_secs(300);
    let mut slot = [0u8; SEND_SLOT_SIZE];
    let mut seq = 0u64;
    while seq < COUNT {
        if c.pop(&mut slot).expect("pop") {
            let wr = decode_send_wr(&slot).expect("decode");
            assert_eq!(wr, send_wr(seq), "wr {seq}");
            seq += 1;
        } else {
            assert!(Instant::now() < deadline, "stalled at {seq}");
            std::thread::yield_now();
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{COUNT} send WRs encoded, pushed, popped, decoded across processes in {secs:.3} s: {:.2} M WR/s",
        COUNT as f64 / secs / 1e6
    );
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}"
    );
    assert_eq!(c.len(), Ok(0));
}

/// [`send_wr`] without the `Vec` (the forked child must not allocate).
fn send_wr_no_alloc(seq: u64) -> SendWr {
    let mut sgl = SgList::new();
    for i in 0..(seq % 7) as usize {
        let _ = sgl.push(Sge {
            addr: word(seq, i as u64),
            length: word(seq, 10 + i as u64) as u32,
            lkey: Stag(seq as u32 ^ i as u32),
        });
    }
    SendWr {
        sgl,
        ..send_wr_ops_only(seq)
    }
}

fn send_wr_ops_only(seq: u64) -> SendWr {
    let op = match seq % 3 {
        0 => SendOp::Send,
        1 => SendOp::Write {
            remote_to: word(seq, 20),
            rkey: Stag(seq as u32),
        },
        _ => SendOp::Read {
            remote_to: word(seq, 21),
            rkey: Stag(!(seq as u32)),
            invalidate_local: seq % 2 == 0,
        },
    };
    SendWr {
        wr_id: seq,
        op,
        sgl: SgList::new(),
        flags: SendFlags(seq as u32 & 7),
    }
}
