//! Seeds of the stateful targets: `mpa_stream`, `rdma_rx`, `engine_rx`.

use iwarp_wire::mpa::{self, Fpdu};
use iwarp_wire::rdmap::Opcode;

use super::{conn_streams, mpa_records, push_kind, tcp_segments, Seed};

/// Seeds of `mpa_stream` from one capture: the responder fed the initiator's stream and
/// accepting, the initiator fed the responder's stream (single mode, configurations that
/// match the capture's CRC setting), in 1448-octet chunks.
pub fn mpa_stream_seeds(frames: &[Vec<u8>]) -> Vec<Seed> {
    let segs = tcp_segments(frames);
    let mut out = Vec::new();
    let mut resp = Vec::new();
    let mut init = Vec::new();
    for cs in conn_streams(&segs, 8 * 1024).iter().take(2) {
        let crc = cs.initiator.get(16).is_some_and(|f| f & mpa::FLAG_CRC != 0);
        // Config: revision 2, CRC Request (crc) or Off; markers Off; IRD 135, 65535 max.
        let k = if crc { 0x01 } else { 0x03 };
        let l = 0xf0;
        // Responder (mode 0): first chunk is the Request, then accept, then the FPDUs.
        let frame_len = 20
            + usize::from(u16::from_be_bytes([
                cs.initiator.get(18).copied().unwrap_or(0),
                cs.initiator.get(19).copied().unwrap_or(0),
            ]));
        let mut v = vec![0x00, k, l];
        let (req, rest) = cs.initiator.split_at(frame_len.min(cs.initiator.len()));
        push_chunk(&mut v, req);
        v.extend_from_slice(&[7, 0, 0, 1, 16, 16]);
        for ch in rest.chunks(1448) {
            push_chunk(&mut v, ch);
        }
        resp.push(v);
        // Initiator (mode 2): no private data, then the Reply and FPDUs.
        let mut v = vec![0x02, k, l, 0, 0];
        for ch in cs.responder.chunks(1448) {
            push_chunk(&mut v, ch);
        }
        init.push(v);
    }
    push_kind(&mut out, "responder", resp);
    push_kind(&mut out, "initiator", init);
    out
}

/// A deliver operation of single mode: op 0, 16-bit length, the octets.
fn push_chunk(v: &mut Vec<u8>, ch: &[u8]) {
    v.push(0);
    v.extend_from_slice(&(ch.len() as u16).to_be_bytes());
    v.extend_from_slice(ch);
}

/// Seeds of `mpa_stream` in pair mode: configurations across CRC, markers, revisions and
/// peer-to-peer, with pushes and pumps in both directions.
pub fn mpa_pair_literals() -> Vec<Seed> {
    let mut out = Vec::new();
    // [mode, ki, li, kr, lr, pd len (2), mss (2)] then handshake pumps and ops.
    let ops: &[u8] = &[
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 16, // handshake pumps and accept (zeros)
        0, 0x00, 0x40, 7, // push i 64+14
        2, 0x01, 0x00, 9, // push r
        4, 0, 0, 0, 1, 0, 10, // pump i -> r
        5, 1, 0, 3, 0, 0, 0, // pump r -> i
        0, 0x05, 0xdc, 1, 4, 0, 0, 8, 0, 0, 0, // push big, pump
    ];
    let configs: [(u8, u8, u8, u8); 6] = [
        (0x01, 0xf0, 0x01, 0xf0),               // rev 2, CRC
        (0x03, 0xf0, 0x03, 0xf0),               // rev 2, no CRC
        (0x09, 0xf0, 0x09, 0xf0),               // markers requested both ways
        (0x21 | 0x40, 0xf4, 0x01 | 0x40, 0xf4), // p2p, Write RTR
        (0x00, 0x00, 0x01, 0x00),               // rev 1 initiator
        (0x05, 0xf0, 0x01, 0xf0),               // CRC forbidden vs requested
    ];
    let mut all = Vec::new();
    for (ki, li, kr, lr) in configs {
        let mut v = vec![1, ki, li, kr, lr, 0, 0, 0x05, 0x00];
        v.extend_from_slice(ops);
        all.push(v.clone());
        // Same with a corruption of the i -> r stream at octet 100 and a tiny MSS.
        let mut w = v.clone();
        w[7] = 0;
        w[8] = 8;
        w.extend_from_slice(&[6, 0, 100, 0x20, 1, 4, 0, 0, 4, 0, 0, 0]);
        all.push(w);
    }
    push_kind(&mut out, "pair", all);
    out
}

/// Fix-up bits and table index for a captured ULPDU fed to `rdma_rx`: tagged segments go
/// to the writable region (Read Responses to the outstanding Read's sink), Sends get the
/// next MSN, Read Requests read the read-only region.
fn rdma_fixes(ulpdu: &[u8]) -> (u8, u8, u16) {
    const STAG: u8 = 1;
    const TO: u8 = 2;
    const MSN: u8 = 4;
    const READ: u8 = 8;
    match ulpdu.get(1).map(|c| c & 0x0f) {
        Some(0) => (STAG | TO, 0, 64),
        Some(2) => (STAG | TO, 2, 7168),
        Some(1) => (MSN | READ, 0x10, 0),
        _ => (MSN, 0, 0),
    }
}

/// A feed operation of `rdma_rx`.
fn rdma_feed(v: &mut Vec<u8>, ulpdu: &[u8]) {
    let u = &ulpdu[..ulpdu.len().min(256)];
    let (fixes, pick, to) = rdma_fixes(u);
    v.extend_from_slice(&[0, fixes, pick]);
    v.extend_from_slice(&to.to_be_bytes());
    v.extend_from_slice(&(u.len() as u16).to_be_bytes());
    v.extend_from_slice(u);
}

/// Seeds of `rdma_rx` from one capture: each DDP segment kind alone, and a session of the
/// first segments of the capture, after a drain that sends the outstanding Read Request.
pub fn rdma_rx_seeds(frames: &[Vec<u8>]) -> Vec<Seed> {
    let segs = tcp_segments(frames);
    let (_, fpdus) = mpa_records(&segs);
    let ulpdus: Vec<Vec<u8>> = fpdus
        .iter()
        .filter_map(|f| Fpdu::new_checked(&f[..]).ok().map(|f| f.ulpdu().to_vec()))
        .collect();
    let head = |k: u8| vec![k, 200, 5, 0, 0];
    let mut singles = Vec::new();
    for op in Opcode::ALL {
        for u in ulpdus
            .iter()
            .filter(|u| u.get(1).is_some_and(|c| c & 0x0f == op as u8))
            .take(2)
        {
            let mut v = head(0);
            rdma_feed(&mut v, u);
            v.extend_from_slice(&[5, 0, 4]);
            singles.push(v);
        }
    }
    let mut session = head(0x06);
    for u in ulpdus.iter().take(10) {
        rdma_feed(&mut session, u);
        session.extend_from_slice(&[6, 0, 1]);
    }
    let mut out = Vec::new();
    push_kind(&mut out, "seg", singles);
    push_kind(&mut out, "session", [session]);
    out
}

/// Seeds of `engine_rx` from one capture: frames re-addressed from node A (10.0.0.1) to
/// node B (10.0.0.2) and injected with checksums fixed (they match no connection: RSTs and
/// drops), plus header mutations of the legitimate traffic.
pub fn engine_rx_seeds(frames: &[Vec<u8>]) -> Vec<Seed> {
    let mut picked = Vec::new();
    for f in frames
        .iter()
        .filter(|f| f.len() >= 54 && f.len() <= 400)
        .take(40)
    {
        let mut g = f.clone();
        g[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
        g[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        g[26..30].copy_from_slice(&[10, 0, 0, 1]);
        g[30..34].copy_from_slice(&[10, 0, 0, 2]);
        let mut v = vec![0x00];
        v.extend_from_slice(&(g.len() as u16).to_be_bytes());
        v.extend_from_slice(&g);
        picked.push(v);
    }
    let mut out = Vec::new();
    push_kind(&mut out, "inject", picked);
    out
}

/// Seeds of `engine_rx` that need no capture: legitimate traffic with header mutations at
/// each layer (TCP sequence, flags, window; MPA length; DDP control, STag, MSN), with and
/// without fixed checksums, the original kept or lost, and time passing.
pub fn engine_rx_literals() -> Vec<Seed> {
    // Offsets of interesting header bytes in a data frame: IPv4 total length and TTL,
    // TCP seq, ack, flags, window; MPA ULPDU_Length; DDP control, RDMAP control, STag/QN,
    // TO/MSN.
    let offsets: [u16; 6] = [16, 38, 47, 54, 56, 62];
    let mut out = Vec::new();
    // Template k counts back from the most recent frame on the wire.
    for k in 0..4u8 {
        let mut all = Vec::new();
        for &at in &offsets {
            for flags in [0x00u8, 0x40] {
                all.push(vec![
                    5,
                    0x02,
                    0x00,
                    0,
                    0, // legit Send of 512 bytes
                    6,
                    0x04,
                    0x00,
                    0,
                    128, // legit Write of 1024 bytes
                    2 | flags,
                    0,
                    k,
                    (at >> 8) as u8,
                    at as u8,
                    0,
                    2,
                    0xff,
                    k | 1,
                    5,
                    0x00,
                    0x40,
                    0,
                    0, // another Send
                    7,
                    20, // one second
                ]);
            }
        }
        push_kind(&mut out, &format!("mutate{k}"), all);
    }
    // RSTs and FINs forged from templates (flags byte of TCP, checksums fixed, original lost).
    let forged: Vec<Vec<u8>> = [0x04u8, 0x01, 0x02, 0x14, 0x11]
        .iter()
        .map(|&fl| vec![5, 0x01, 0, 0, 0, 0x02, 0, 0, 0, 47, 0, 1, fl, 7, 40])
        .collect();
    push_kind(&mut out, "forge", forged);
    out
}
