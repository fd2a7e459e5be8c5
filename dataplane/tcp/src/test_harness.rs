//! Scripted-peer harness for the connection tests: one `TcpConn` driven segment by
//! segment with explicit `Instant`s.

use iwarp_types::{Duration, Instant};

use crate::config::TcpConfig;
use crate::conn::{TcpConn, TcpEvent, TcpState};
use crate::segment::{TcpFlags, TcpHeader, TcpOptions, TcpSegment};
use crate::seq::SeqNumber;
use crate::test_util::*;

pub const OUR_ISS: SeqNumber = SeqNumber(100);
pub const PEER_ISS: SeqNumber = SeqNumber(5000);

pub fn flags(s: &str) -> TcpFlags {
    TcpFlags {
        syn: s.contains('S'),
        ack: s.contains('A'),
        fin: s.contains('F'),
        rst: s.contains('R'),
        psh: s.contains('P'),
        urg: false,
    }
}

pub fn cfg() -> TcpConfig {
    TcpConfig {
        timestamps: false,
        rto_ms_initial: 100,
        rto_ms_min: 10,
        ..TcpConfig::default()
    }
}

pub struct H {
    pub c: TcpConn,
    pub src: RecordSource,
    pub sink: Collect,
    pub now: Instant,
    /// Peer's next sequence number.
    pub pseq: SeqNumber,
    pub window: u16,
    pub options: TcpOptions,
}

impl H {
    pub fn connect(cfg: TcpConfig) -> H {
        let now = us(0);
        H {
            c: TcpConn::connect(cfg, LOCAL, OUR_ISS, now),
            src: RecordSource::default(),
            sink: Collect::default(),
            now,
            pseq: PEER_ISS + 1,
            window: 65_535,
            options: TcpOptions::default(),
        }
    }

    /// An established connection: peer MSS 1000, SACK, no window scaling, no timestamps.
    pub fn established(cfg: TcpConfig) -> H {
        let mut h = H::connect(cfg);
        let syn = h.out().unwrap();
        assert!(syn.flags.syn);
        let opts = TcpOptions {
            mss: Some(1000),
            sack_permitted: true,
            ..Default::default()
        };
        h.recv_opts(flags("SA"), PEER_ISS, OUR_ISS + 1, &[], opts);
        assert_eq!(h.c.state(), TcpState::Established);
        let ack = h.out().unwrap();
        assert!(ack.flags.ack && !ack.flags.syn);
        assert_eq!(h.events(), vec![TcpEvent::Connected]);
        h
    }

    pub fn recv_opts(
        &mut self,
        f: TcpFlags,
        seq: SeqNumber,
        ack: SeqNumber,
        payload: &[u8],
        options: TcpOptions,
    ) {
        let hdr = TcpHeader {
            seq,
            ack,
            flags: f,
            window: self.window,
            options,
        };
        let bytes = peer_bytes(&LOCAL, &hdr, payload);
        let seg = TcpSegment::parse(LOCAL.remote_ip, LOCAL.local_ip, &bytes, true).unwrap();
        assert_eq!(seg.tuple, LOCAL);
        self.c.handle_segment(self.now, &seg, &mut self.sink);
    }

    pub fn recv(&mut self, f: &str, seq: SeqNumber, ack: SeqNumber, payload: &[u8]) {
        let o = self.options;
        self.recv_opts(flags(f), seq, ack, payload, o);
    }

    /// The peer acknowledges `ack` with its current sequence number.
    pub fn ack(&mut self, ack: SeqNumber) {
        let s = self.pseq;
        self.recv("A", s, ack, &[]);
    }

    /// The peer sends data in order.
    pub fn data(&mut self, payload: &[u8]) {
        let s = self.pseq;
        self.recv("AP", s, self.c.snd_max_seq(), payload);
        self.pseq = self.pseq + payload.len() as u32;
    }

    pub fn out(&mut self) -> Option<Seg> {
        let mut buf = [0u8; 2048];
        let n = self.c.poll_transmit(self.now, &mut self.src, &mut buf)?;
        Some(parse_out(&LOCAL, &buf[..n]))
    }

    pub fn outs(&mut self) -> Vec<Seg> {
        let mut v = Vec::new();
        while let Some(s) = self.out() {
            v.push(s);
            assert!(v.len() < 1000, "poll_transmit does not stop");
        }
        v
    }

    pub fn events(&mut self) -> Vec<TcpEvent> {
        let mut v = Vec::new();
        while let Some(e) = self.c.poll_event() {
            v.push(e);
        }
        v
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.c.handle_timeout(self.now);
    }

    /// Runs the earliest timer.
    pub fn fire(&mut self) {
        let t = self.c.poll_timeout().expect("a timer is armed");
        self.now = self.now.max(t);
        self.c.handle_timeout(self.now);
    }

    pub fn seq(&self, off: u64) -> SeqNumber {
        OUR_ISS + 1 + off as u32
    }

    /// Options with SACK blocks over our stream offsets `blocks` (start, end).
    pub fn sack(&self, blocks: &[(u64, u64)]) -> TcpOptions {
        let mut o = TcpOptions::default();
        for (i, b) in blocks.iter().enumerate() {
            o.sack_blocks[i] = Some((self.seq(b.0), self.seq(b.1)));
        }
        o
    }
}

/// An established connection with timestamps; the peer's clock is at `1_000`.
pub fn established_with_timestamps(cfg: TcpConfig) -> H {
    let mut h = H::connect(TcpConfig {
        timestamps: true,
        ..cfg
    });
    let syn = h.out().unwrap();
    let opts = TcpOptions {
        mss: Some(1000),
        sack_permitted: true,
        timestamp: Some((1_000, syn.options.timestamp.unwrap().0)),
        ..Default::default()
    };
    h.recv_opts(flags("SA"), PEER_ISS, OUR_ISS + 1, &[], opts);
    assert_eq!(h.c.state(), TcpState::Established);
    h.outs();
    h
}
