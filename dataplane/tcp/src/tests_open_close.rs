//! Opening and closing: every state transition of RFC 9293, with scripted segments.

use iwarp_types::{Duration, Instant};

use crate::config::TcpConfig;
use crate::conn::{TcpConn, TcpEvent, TcpState};
use crate::segment::{TcpHeader, TcpOptions, TcpSegment};
use crate::seq::SeqNumber;
use crate::test_harness::*;
use crate::test_util::*;

// ---- Opening ----

#[test]
fn active_open_sends_syn_with_options_and_completes() {
    let mut h = H::connect(TcpConfig {
        timestamps: true,
        ..TcpConfig::default()
    });
    assert_eq!(h.c.state(), TcpState::SynSent);
    let syn = h.out().unwrap();
    assert!(syn.flags.syn && !syn.flags.ack);
    assert_eq!(syn.seq, OUR_ISS);
    assert_eq!(syn.options.mss, Some(1460));
    assert_eq!(syn.options.wscale, Some(7));
    assert!(syn.options.sack_permitted);
    assert_eq!(syn.options.timestamp.map(|t| t.1), Some(0));
    assert!(h.out().is_none());
    assert!(h.c.poll_timeout().is_some());
    let opts = TcpOptions {
        mss: Some(9000),
        wscale: Some(3),
        sack_permitted: true,
        timestamp: Some((77, syn.options.timestamp.unwrap().0)),
        ..Default::default()
    };
    h.now = us(30);
    h.recv_opts(flags("SA"), PEER_ISS, OUR_ISS + 1, &[], opts);
    assert_eq!(h.c.state(), TcpState::Established);
    assert_eq!(h.events(), vec![TcpEvent::Connected]);
    assert_eq!(h.c.irs(), PEER_ISS);
    // Our MSS (1460) limits, less the timestamp option.
    assert_eq!(h.c.eff_mss(), 1448);
    let ack = h.out().unwrap();
    assert_eq!(ack.ack, PEER_ISS + 1);
    assert_eq!(ack.seq, OUR_ISS + 1);
    assert_eq!(ack.options.timestamp.map(|t| t.1), Some(77));
    // The peer's window is scaled by 2^3 from now on.
    h.window = 1000;
    h.options.timestamp = Some((78, 0));
    h.ack(OUR_ISS + 1);
    assert_eq!(h.c.snd_wnd, 8000);
}

#[test]
fn passive_open_answers_only_offered_options() {
    let now = us(0);
    let syn_hdr = TcpHeader {
        seq: PEER_ISS,
        flags: flags("S"),
        window: 4096,
        options: TcpOptions {
            mss: Some(1200),
            sack_permitted: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let bytes = peer_bytes(&LOCAL, &syn_hdr, &[]);
    let syn = TcpSegment::parse(LOCAL.remote_ip, LOCAL.local_ip, &bytes, true).unwrap();
    let mut h = H::connect(cfg());
    h.c = TcpConn::accept(TcpConfig::default(), LOCAL, &syn, OUR_ISS, now).unwrap();
    assert_eq!(h.c.state(), TcpState::SynReceived);
    let sa = h.out().unwrap();
    assert!(sa.flags.syn && sa.flags.ack);
    assert_eq!(sa.ack, PEER_ISS + 1);
    assert_eq!(sa.options.wscale, None);
    assert_eq!(sa.options.timestamp, None);
    assert!(sa.options.sack_permitted);
    // A retransmitted SYN gets the SYN-ACK again.
    h.recv("S", PEER_ISS, SeqNumber(0), &[]);
    assert!(h.out().unwrap().flags.syn);
    h.ack(OUR_ISS + 1);
    assert_eq!(h.c.state(), TcpState::Established);
    assert_eq!(h.events(), vec![TcpEvent::Connected]);
    assert_eq!(h.c.eff_mss(), 1200);
    // A non-SYN cannot be accepted.
    let bytes = peer_bytes(
        &LOCAL,
        &TcpHeader {
            flags: flags("A"),
            ..syn_hdr
        },
        &[],
    );
    let not_syn = TcpSegment::parse(LOCAL.remote_ip, LOCAL.local_ip, &bytes, true).unwrap();
    assert!(TcpConn::accept(cfg(), LOCAL, &not_syn, OUR_ISS, now).is_none());
}

#[test]
fn syn_received_with_bad_ack_sends_reset() {
    let mut h = H::connect(cfg());
    h.out();
    h.recv("S", PEER_ISS, SeqNumber(0), &[]);
    assert_eq!(h.c.state(), TcpState::SynReceived);
    h.out();
    h.recv("A", PEER_ISS + 1, OUR_ISS + 7, &[]);
    let rst = h.out().unwrap();
    assert!(rst.flags.rst);
    assert_eq!(rst.seq, OUR_ISS + 7);
    assert_eq!(h.c.state(), TcpState::SynReceived);
}

#[test]
fn simultaneous_open() {
    let mut h = H::connect(cfg());
    h.out().unwrap();
    h.recv_opts(
        flags("S"),
        PEER_ISS,
        SeqNumber(0),
        &[],
        TcpOptions {
            mss: Some(1000),
            ..Default::default()
        },
    );
    assert_eq!(h.c.state(), TcpState::SynReceived);
    let sa = h.out().unwrap();
    assert!(sa.flags.syn && sa.flags.ack);
    assert_eq!(sa.seq, OUR_ISS);
    assert_eq!(sa.ack, PEER_ISS + 1);
    // The peer's SYN-ACK acknowledges our SYN: established, and we ACK it.
    h.recv("SA", PEER_ISS, OUR_ISS + 1, &[]);
    assert_eq!(h.c.state(), TcpState::Established);
    let a = h.out().unwrap();
    assert!(a.flags.ack && !a.flags.syn && a.ack == PEER_ISS + 1);
    assert_eq!(h.events(), vec![TcpEvent::Connected]);
    // A later SYN is answered with a challenge ACK only.
    h.recv("S", PEER_ISS, SeqNumber(0), &[]);
    assert_eq!(h.c.state(), TcpState::Established);
    assert_eq!(h.c.counters().challenge_acks, 1);
}

#[test]
fn syn_sent_checks_ack_and_rst() {
    let mut h = H::connect(cfg());
    h.out();
    // Unacceptable ACK: RST with seq = SEG.ACK, state unchanged.
    h.recv("SA", PEER_ISS, OUR_ISS + 50, &[]);
    let rst = h.out().unwrap();
    assert!(rst.flags.rst && rst.seq == OUR_ISS + 50);
    assert_eq!(h.c.state(), TcpState::SynSent);
    // RST without ACK is ignored (RFC 5961 3.2).
    h.recv("R", PEER_ISS, SeqNumber(0), &[]);
    assert_eq!(h.c.state(), TcpState::SynSent);
    // RST with a bad ACK is dropped silently.
    h.recv("RA", PEER_ISS, OUR_ISS + 9, &[]);
    assert!(h.out().is_none());
    assert_eq!(h.c.state(), TcpState::SynSent);
    // RST acknowledging our SYN: connection refused.
    h.recv("RA", SeqNumber(0), OUR_ISS + 1, &[]);
    assert_eq!(h.c.state(), TcpState::Closed);
    assert_eq!(h.events(), vec![TcpEvent::Reset]);
}

#[test]
fn syn_retries_back_off_then_time_out() {
    let mut h = H::connect(TcpConfig {
        syn_retries: 2,
        rto_ms_initial: 100,
        ..cfg()
    });
    assert!(h.out().unwrap().flags.syn);
    let t0 = h.c.poll_timeout().unwrap();
    assert_eq!(t0, Instant::ZERO + Duration::from_millis(100));
    h.fire();
    assert!(h.out().unwrap().flags.syn);
    assert_eq!(h.c.poll_timeout().unwrap(), t0 + Duration::from_millis(200));
    h.fire();
    assert!(h.out().unwrap().flags.syn);
    h.fire();
    assert_eq!(h.c.state(), TcpState::Closed);
    assert_eq!(h.events(), vec![TcpEvent::TimedOut]);
    assert_eq!(h.c.poll_timeout(), None);
}

// ---- Closing ----

#[test]
fn active_close_fin_wait_time_wait_closed() {
    let mut h = H::established(TcpConfig {
        msl_ms: 10,
        ..cfg()
    });
    h.src.push(300);
    h.c.close(h.now);
    assert_eq!(h.c.state(), TcpState::FinWait1);
    let segs = h.outs();
    assert_eq!(segs.len(), 1);
    assert!(segs[0].flags.fin && segs[0].payload.len() == 300);
    h.ack(h.seq(301));
    assert_eq!(h.c.state(), TcpState::FinWait2);
    assert_eq!(h.c.acked_offset(), 300);
    h.data(b"last");
    let s = h.pseq;
    h.recv("AF", s, h.seq(301), &[]);
    assert_eq!(h.c.state(), TcpState::TimeWait);
    assert_eq!(h.events(), vec![TcpEvent::PeerClosed]);
    assert_eq!(h.out().unwrap().ack, s + 1);
    // A retransmitted FIN is acknowledged again.
    h.recv("AF", s, h.seq(301), &[]);
    assert_eq!(h.out().unwrap().ack, s + 1);
    // An RST does not cut TIME_WAIT short (RFC 1337).
    h.recv("R", s + 1, SeqNumber(0), &[]);
    assert_eq!(h.c.state(), TcpState::TimeWait);
    assert_eq!(h.c.poll_timeout(), Some(h.now + Duration::from_millis(20)));
    h.fire();
    assert_eq!(h.c.state(), TcpState::Closed);
    assert_eq!(h.events(), vec![TcpEvent::Closed]);
}

#[test]
fn passive_close_close_wait_last_ack() {
    let mut h = H::established(cfg());
    let s = h.pseq;
    h.recv("AF", s, h.seq(0), &[]);
    assert_eq!(h.c.state(), TcpState::CloseWait);
    assert_eq!(h.events(), vec![TcpEvent::PeerClosed]);
    assert_eq!(h.out().unwrap().ack, s + 1);
    h.src.push(10);
    let d = h.out().unwrap();
    assert_eq!(d.payload.len(), 10);
    h.c.close(h.now);
    assert_eq!(h.c.state(), TcpState::LastAck);
    let fin = h.out().unwrap();
    assert!(fin.flags.fin && fin.seq == h.seq(10));
    h.recv("A", s + 1, h.seq(11), &[]);
    assert_eq!(h.c.state(), TcpState::Closed);
    assert_eq!(h.events(), vec![TcpEvent::Closed]);
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let mut h = H::established(TcpConfig { msl_ms: 1, ..cfg() });
    h.c.close(h.now);
    let fin = h.out().unwrap();
    assert!(fin.flags.fin);
    let s = h.pseq;
    // The peer's FIN crosses ours (it has not seen our FIN yet).
    h.recv("AF", s, h.seq(0), &[]);
    assert_eq!(h.c.state(), TcpState::Closing);
    h.outs();
    h.recv("A", s + 1, h.seq(1), &[]);
    assert_eq!(h.c.state(), TcpState::TimeWait);
    h.fire();
    assert_eq!(h.c.state(), TcpState::Closed);
    assert_eq!(h.events(), vec![TcpEvent::PeerClosed, TcpEvent::Closed]);
}

#[test]
fn fin_ack_together_in_fin_wait_1_goes_to_time_wait() {
    let mut h = H::established(cfg());
    h.c.close(h.now);
    h.out().unwrap();
    let s = h.pseq;
    h.recv("AF", s, h.seq(1), &[]);
    assert_eq!(h.c.state(), TcpState::TimeWait);
}

#[test]
fn lost_fin_is_retransmitted() {
    let mut h = H::established(cfg());
    h.src.push(50);
    h.c.close(h.now);
    assert_eq!(h.outs().len(), 1);
    h.ack(h.seq(50));
    assert_eq!(h.c.state(), TcpState::FinWait1);
    h.fire();
    let fin = h.out().unwrap();
    assert!(fin.flags.fin && fin.payload.is_empty() && fin.seq == h.seq(50));
    h.ack(h.seq(51));
    assert_eq!(h.c.state(), TcpState::FinWait2);
}

#[test]
fn close_before_handshake_and_abort() {
    let mut h = H::connect(cfg());
    h.c.close(h.now);
    assert_eq!(h.c.state(), TcpState::Closed);
    assert_eq!(h.events(), vec![TcpEvent::Closed]);

    let mut h = H::established(cfg());
    h.src.push(10);
    h.outs();
    h.c.abort(h.now);
    let rst = h.out().unwrap();
    assert!(rst.flags.rst && rst.seq == h.seq(10));
    assert!(h.out().is_none());
    assert_eq!(h.events(), vec![TcpEvent::Closed]);
    assert_eq!(h.c.poll_timeout(), None);
}

#[test]
fn keepalive_probes_then_times_out() {
    let mut c = cfg();
    c.keepalive.enabled = true;
    c.keepalive.idle_ms = 10;
    c.keepalive.interval_ms = 2;
    c.keepalive.count = 2;
    let mut h = H::established(c);
    assert_eq!(h.c.poll_timeout(), Some(h.now + Duration::from_millis(10)));
    h.fire();
    let p = h.out().unwrap();
    assert_eq!(p.seq, h.seq(0) - 1);
    // An answer resets the idle timer.
    h.ack(h.seq(0));
    assert_eq!(h.c.poll_timeout(), Some(h.now + Duration::from_millis(10)));
    h.fire();
    h.out().unwrap();
    h.fire();
    h.out().unwrap();
    h.fire();
    assert_eq!(h.c.state(), TcpState::Closed);
    assert_eq!(h.events(), vec![TcpEvent::TimedOut]);
    assert_eq!(h.c.counters().keepalive_probes, 3);
}

#[test]
fn window_scale_applies_to_advertised_window() {
    let mut h = H::connect(TcpConfig {
        rcv_wnd_bytes: 1 << 20,
        wscale: 7,
        ..cfg()
    });
    h.out();
    h.recv_opts(
        flags("SA"),
        PEER_ISS,
        OUR_ISS + 1,
        &[],
        TcpOptions {
            wscale: Some(2),
            ..Default::default()
        },
    );
    let a = h.out().unwrap();
    assert_eq!(a.window, ((1u32 << 20) >> 7) as u16);
    h.window = 100;
    h.ack(h.seq(0));
    assert_eq!(h.c.snd_wnd, 400);
}

#[test]
fn short_buffer_yields_nothing_instead_of_panicking() {
    let mut h = H::established(cfg());
    h.src.push(100);
    let mut tiny = [0u8; 10];
    assert_eq!(h.c.poll_transmit(h.now, &mut h.src, &mut tiny), None);
    let mut small = [0u8; 70];
    // Room for 50 bytes of payload: the 100-byte record is split (correctness first).
    let n = h.c.poll_transmit(h.now, &mut h.src, &mut small).unwrap();
    assert_eq!(n, 70);
}

#[test]
fn karn_no_rtt_sample_from_retransmission() {
    let mut h = H::established(cfg());
    let srtt = h.c.srtt();
    h.src.push(100);
    h.out().unwrap();
    h.fire();
    h.out().unwrap();
    // A late ACK (after the retransmission) must not be timed.
    h.now += Duration::from_millis(500);
    h.ack(h.seq(100));
    assert_eq!(h.c.srtt(), srtt);
    // A fresh segment is timed.
    h.src.push(100);
    h.out().unwrap();
    h.now += Duration::from_millis(3);
    h.ack(h.seq(200));
    assert_ne!(h.c.srtt(), srtt);
}

#[test]
fn fin_after_a_hole_is_kept_and_taken_when_the_hole_fills() {
    let mut h = H::established(cfg());
    let base = h.pseq;
    h.recv("AF", base + 3, h.seq(0), b"def");
    assert_eq!(h.c.state(), TcpState::Established);
    assert!(h.events().is_empty());
    assert_eq!(h.c.counters().ooo_fins, 1);
    // The duplicate ACK still acknowledges only up to the hole (the FIN is not counted).
    let dup = h.outs().pop().unwrap();
    assert_eq!(dup.ack, base);
    h.recv("A", base, h.seq(0), b"abc");
    assert_eq!(h.sink.data, b"abcdef");
    // The FIN was remembered: taken as soon as the data before it arrived.
    assert_eq!(h.c.state(), TcpState::CloseWait);
    assert_eq!(h.events(), vec![TcpEvent::PeerClosed]);
    assert_eq!(h.outs().pop().unwrap().ack, base + 7);
    // A retransmission of the FIN is only re-acknowledged.
    h.recv("AF", base + 6, h.seq(0), &[]);
    assert_eq!(h.c.state(), TcpState::CloseWait);
    assert!(h.events().is_empty());
    assert_eq!(h.outs().pop().unwrap().ack, base + 7);
}

#[test]
fn bare_fin_ahead_of_data_waits_across_several_holes() {
    let mut h = H::established(cfg());
    let base = h.pseq;
    // A FIN alone at offset 9, then data 6..9, then 0..3, then 3..6.
    h.recv("AF", base + 9, h.seq(0), &[]);
    h.recv("A", base + 6, h.seq(0), b"ghi");
    h.recv("A", base, h.seq(0), b"abc");
    assert_eq!(h.sink.data, b"abc");
    assert_eq!(h.c.state(), TcpState::Established);
    assert!(h.events().is_empty());
    h.recv("A", base + 3, h.seq(0), b"def");
    assert_eq!(h.sink.data, b"abcdefghi");
    assert_eq!(h.c.state(), TcpState::CloseWait);
    assert_eq!(h.events(), vec![TcpEvent::PeerClosed]);
    assert_eq!(h.outs().pop().unwrap().ack, base + 10);
    // Out-of-order storage is given back once the FIN is in.
    h.advance(Duration::from_secs(2));
    assert_eq!(h.c.heap_bytes(), 0);
}

#[test]
fn fin_ahead_in_fin_wait_2_goes_to_time_wait_when_the_hole_fills() {
    let mut h = H::established(cfg());
    h.c.close(h.now);
    let fin = h.outs().pop().unwrap();
    assert!(fin.flags.fin);
    h.ack(h.seq(0) + 1);
    assert_eq!(h.c.state(), TcpState::FinWait2);
    let base = h.pseq;
    h.recv("AF", base + 2, h.seq(0) + 1, b"yz");
    assert_eq!(h.c.state(), TcpState::FinWait2);
    h.recv("A", base, h.seq(0) + 1, b"wx");
    assert_eq!(h.sink.data, b"wxyz");
    assert_eq!(h.c.state(), TcpState::TimeWait);
    assert_eq!(h.outs().pop().unwrap().ack, base + 5);
}

#[test]
fn fin_held_on_a_dropped_segment_is_not_kept() {
    let mut h = H::established(TcpConfig {
        ooo_max_bytes: 4,
        ..cfg()
    });
    let base = h.pseq;
    // Does not fit in the out-of-order buffer: neither the data nor its FIN is kept.
    h.recv("AF", base + 2, h.seq(0), b"cdefgh");
    assert_eq!(h.c.counters().ooo_drops, 1);
    assert_eq!(h.c.counters().ooo_fins, 0);
    h.recv("A", base, h.seq(0), b"ab");
    assert_eq!(h.c.state(), TcpState::Established);
    // The retransmission brings both.
    h.recv("AF", base + 2, h.seq(0), b"cdefgh");
    assert_eq!(h.sink.data, b"abcdefgh");
    assert_eq!(h.c.state(), TcpState::CloseWait);
}
