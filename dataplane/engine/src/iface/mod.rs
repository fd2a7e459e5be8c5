//! The network interface of one engine: Ethernet dispatch, ARP, IPv4 and ICMP echo.
//!
//! Inbound frames for our MAC (or broadcast) are checked layer by layer; TCP segments are
//! handed back to the engine as [`Ingress::Tcp`], ARP and ICMP are answered here through a
//! bounded queue of control frames. Outbound IP frames name a next hop (the destination
//! when on-link, else the gateway) whose MAC comes from the bounded [`ArpCache`]; frames for
//! a next hop being resolved are held in the cache's bounded pool.

mod arp;
mod frame_queue;
pub mod icmp;
mod ipv4;

use core::net::Ipv4Addr;

use iwarp_types::{Duration, Instant};
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, IpProtocol,
};

pub use arp::{ArpAction, ArpCache};
pub use frame_queue::FrameQueue;
pub use ipv4::same_subnet;

use crate::config::{EngineConfig, ETH_HEADER_LEN, IPV4_HEADER_LEN};
use crate::counters::{Counters, DropReason};

/// Ethernet broadcast address.
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];
/// Length of an Ethernet/IPv4 ARP packet.
const ARP_LEN: usize = 28;
/// Offset of the upper-layer payload in the frames we emit.
pub const L4_OFFSET: usize = ETH_HEADER_LEN + IPV4_HEADER_LEN;

/// A TCP segment for us, found in an inbound frame.
#[derive(Clone, Copy, Debug)]
pub struct TcpIn<'a> {
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address (ours).
    pub dst_ip: Ipv4Addr,
    /// Source MAC (used to answer stray segments with an RST without ARP).
    pub src_mac: [u8; 6],
    /// The TCP header and payload.
    pub segment: &'a [u8],
}

/// What the interface found in an inbound frame.
#[derive(Clone, Copy, Debug)]
pub enum Ingress<'a> {
    /// A TCP segment for the connection layer.
    Tcp(TcpIn<'a>),
    /// An ICMP "fragmentation needed" about one of our TCP segments.
    FragNeeded(icmp::FragNeeded),
    /// Consumed here (ARP, ICMP) or dropped and counted.
    Done,
}

/// Ethernet + ARP + IPv4 + ICMP state of one engine.
#[derive(Debug)]
pub struct Iface {
    /// Our MAC.
    pub mac: [u8; 6],
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    prefix_len: u8,
    gateway: Option<Ipv4Addr>,
    ttl: u8,
    verify_checksum: bool,
    frame_len_max: usize,
    /// Neighbour cache and frames waiting for resolution.
    pub arp: ArpCache,
    /// Control frames waiting for `poll_transmit`.
    pub ctrl: FrameQueue,
}

/// True if `frame` is an Ethernet/IPv4/TCP frame with the RST flag (checked views: a short
/// or foreign frame is just not an RST).
pub fn is_tcp_rst(frame: &[u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return false;
    };
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return false;
    }
    let Ok(ip) = smoltcp::wire::Ipv4Packet::new_checked(eth.payload()) else {
        return false;
    };
    if ip.next_header() != IpProtocol::Tcp {
        return false;
    }
    smoltcp::wire::TcpPacket::new_checked(ip.payload()).is_ok_and(|t| t.rst())
}

/// Writes an Ethernet header into `buf[..14]`.
pub fn emit_eth(buf: &mut [u8], dst: [u8; 6], src: [u8; 6], ethertype: EthernetProtocol) {
    let mut f = EthernetFrame::new_unchecked(&mut buf[..ETH_HEADER_LEN]);
    f.set_dst_addr(EthernetAddress(dst));
    f.set_src_addr(EthernetAddress(src));
    f.set_ethertype(ethertype);
}

/// Queues an ARP request (broadcast) or reply (to `tha`).
fn queue_arp(
    ctrl: &mut FrameQueue,
    mac: [u8; 6],
    ip: Ipv4Addr,
    op: ArpOperation,
    tha: [u8; 6],
    tpa: Ipv4Addr,
    c: &mut Counters,
) {
    let eth_dst = if op == ArpOperation::Request {
        BROADCAST_MAC
    } else {
        tha
    };
    let queued = ctrl.push_with(|buf| {
        let end = ETH_HEADER_LEN + ARP_LEN;
        let frame = buf.get_mut(..end)?;
        emit_eth(frame, eth_dst, mac, EthernetProtocol::Arp);
        let repr = ArpRepr::EthernetIpv4 {
            operation: op,
            source_hardware_addr: EthernetAddress(mac),
            source_protocol_addr: ip,
            target_hardware_addr: EthernetAddress(tha),
            target_protocol_addr: tpa,
        };
        repr.emit(&mut ArpPacket::new_unchecked(&mut frame[ETH_HEADER_LEN..]));
        Some(end)
    });
    if !queued {
        c.drop(DropReason::TxQueueFull);
    } else if op == ArpOperation::Request {
        c.arp_requests_out += 1;
    }
}

impl Iface {
    /// Interface state with every buffer preallocated.
    pub fn new(cfg: &EngineConfig) -> Iface {
        let frame_len_max = cfg.frame_len_max();
        Iface {
            mac: cfg.mac,
            ip: cfg.ipv4,
            prefix_len: cfg.prefix_len,
            gateway: cfg.gateway,
            ttl: cfg.ip_ttl,
            verify_checksum: !cfg.checksum_offload,
            frame_len_max,
            arp: ArpCache::new(
                cfg.arp_cache_entries,
                Duration::from_millis(cfg.arp_entry_timeout_ms),
                Duration::from_millis(cfg.arp_retry_ms),
                cfg.arp_retries_max,
                cfg.arp_pending_frames,
                cfg.arp_pending_per_hop,
                frame_len_max,
            ),
            ctrl: FrameQueue::new(cfg.ctrl_tx_frames, frame_len_max),
        }
    }

    /// Largest frame we emit.
    pub fn frame_len_max(&self) -> usize {
        self.frame_len_max
    }

    /// Checks an inbound frame. ARP and ICMP are handled here; TCP is returned.
    pub fn handle_frame<'a>(
        &mut self,
        now: Instant,
        frame: &'a [u8],
        counters: &mut Counters,
    ) -> Ingress<'a> {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            counters.drop(DropReason::EthMalformed);
            return Ingress::Done;
        };
        let dst = eth.dst_addr().0;
        if dst != self.mac && dst != BROADCAST_MAC {
            counters.drop(DropReason::EthNotForUs);
            return Ingress::Done;
        }
        let src_mac = eth.src_addr().0;
        match eth.ethertype() {
            EthernetProtocol::Arp => {
                self.handle_arp(now, eth.payload(), counters);
                Ingress::Done
            }
            EthernetProtocol::Ipv4 => self.handle_ipv4(eth.payload(), src_mac, counters),
            _ => {
                counters.drop(DropReason::EthUnknownType);
                Ingress::Done
            }
        }
    }

    fn handle_ipv4<'a>(
        &mut self,
        bytes: &'a [u8],
        src_mac: [u8; 6],
        counters: &mut Counters,
    ) -> Ingress<'a> {
        let Some(ip) = ipv4::parse(bytes, self.ip, self.verify_checksum, counters) else {
            return Ingress::Done;
        };
        match ip.protocol {
            IpProtocol::Tcp => Ingress::Tcp(TcpIn {
                src_ip: ip.src,
                dst_ip: ip.dst,
                src_mac,
                segment: ip.payload,
            }),
            IpProtocol::Icmp => {
                if let Some(f) = icmp::frag_needed(ip.payload, self.ip.octets()) {
                    return Ingress::FragNeeded(f);
                }
                self.answer_icmp(ip.src, src_mac, ip.payload, counters);
                Ingress::Done
            }
            _ => {
                counters.drop(DropReason::Ipv4UnknownProtocol);
                Ingress::Done
            }
        }
    }

    fn answer_icmp(&mut self, src: Ipv4Addr, src_mac: [u8; 6], req: &[u8], c: &mut Counters) {
        let (us, mac, ttl) = (self.ip, self.mac, self.ttl);
        let mut answered = false;
        let queued = self.ctrl.push_with(|buf| {
            let n = icmp::echo_reply(req, buf.get_mut(L4_OFFSET..)?, c)?;
            emit_eth(buf, src_mac, mac, EthernetProtocol::Ipv4);
            ipv4::emit(
                &mut buf[ETH_HEADER_LEN..],
                us,
                src,
                IpProtocol::Icmp,
                n,
                ttl,
            );
            answered = true;
            Some(L4_OFFSET + n)
        });
        if !queued {
            c.drop(DropReason::TxQueueFull);
        } else if answered {
            c.icmp_echo_replies += 1;
        }
    }

    fn handle_arp(&mut self, now: Instant, bytes: &[u8], counters: &mut Counters) {
        let repr = ArpPacket::new_checked(bytes).and_then(|p| ArpRepr::parse(&p));
        let Ok(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_protocol_addr: tpa,
            ..
        }) = repr
        else {
            counters.drop(DropReason::ArpMalformed);
            return;
        };
        let sane =
            sha.is_unicast() && !spa.is_unspecified() && !spa.is_broadcast() && spa != self.ip;
        if !sane {
            counters.drop(DropReason::ArpMalformed);
            return;
        }
        let for_us = tpa == self.ip;
        self.arp.learn(now, spa, sha.0, for_us);
        if !for_us {
            counters.drop(DropReason::ArpNotForUs);
            return;
        }
        match operation {
            ArpOperation::Request => {
                counters.arp_requests_in += 1;
                self.queue_arp(ArpOperation::Reply, sha.0, spa, counters);
            }
            ArpOperation::Reply => counters.arp_replies_in += 1,
            _ => counters.drop(DropReason::ArpMalformed),
        }
    }

    fn queue_arp(&mut self, op: ArpOperation, tha: [u8; 6], tpa: Ipv4Addr, c: &mut Counters) {
        queue_arp(&mut self.ctrl, self.mac, self.ip, op, tha, tpa, c);
    }

    /// The next hop for `dst`: itself when on-link, else the gateway (`None`: no route).
    pub fn next_hop(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if same_subnet(self.ip, dst, self.prefix_len) {
            Some(dst)
        } else {
            self.gateway
        }
    }

    /// The MAC of `hop` if resolved (`hint`: the ARP slot where it was found last; updated).
    /// If unknown, starts resolving it (an ARP request is queued).
    pub fn resolve(
        &mut self,
        now: Instant,
        hop: Ipv4Addr,
        hint: &mut usize,
        c: &mut Counters,
    ) -> Option<[u8; 6]> {
        if let Some((mac, slot)) = self.arp.lookup(hop, *hint) {
            *hint = slot;
            return Some(mac);
        }
        if self.arp.start_resolve(now, hop) {
            self.queue_arp(ArpOperation::Request, [0; 6], hop, c);
        }
        None
    }

    /// Writes the Ethernet and IPv4 headers in front of an upper-layer payload of
    /// `payload_len` bytes already at `buf[L4_OFFSET..]`.
    pub fn emit_headers(
        &self,
        buf: &mut [u8],
        dst_mac: [u8; 6],
        dst_ip: Ipv4Addr,
        protocol: IpProtocol,
        payload_len: usize,
    ) {
        emit_eth(buf, dst_mac, self.mac, EthernetProtocol::Ipv4);
        ipv4::emit(
            &mut buf[ETH_HEADER_LEN..],
            self.ip,
            dst_ip,
            protocol,
            payload_len,
            self.ttl,
        );
    }

    /// Queues a control IP frame to `dst_mac`/`dst_ip`: `build` writes the payload into the
    /// buffer it is given and returns its length. Counted as a drop if the queue is full.
    pub fn queue_ip(
        &mut self,
        dst_mac: [u8; 6],
        dst_ip: Ipv4Addr,
        protocol: IpProtocol,
        c: &mut Counters,
        build: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        let (mac, ip, ttl) = (self.mac, self.ip, self.ttl);
        let queued = self.ctrl.push_with(|buf| {
            let n = build(buf.get_mut(L4_OFFSET..)?)?;
            emit_eth(buf, dst_mac, mac, EthernetProtocol::Ipv4);
            ipv4::emit(&mut buf[ETH_HEADER_LEN..], ip, dst_ip, protocol, n, ttl);
            Some(L4_OFFSET + n)
        });
        if !queued {
            c.drop(DropReason::TxQueueFull);
        }
        queued
    }

    /// ARP retries and expiry.
    pub fn handle_timeout(&mut self, now: Instant, c: &mut Counters) {
        let (ctrl, mac, ip) = (&mut self.ctrl, self.mac, self.ip);
        self.arp.handle_timeout(now, |a| match a {
            ArpAction::Request(target) => {
                queue_arp(ctrl, mac, ip, ArpOperation::Request, [0; 6], target, c);
            }
            ArpAction::Failed(_, dropped) => {
                for _ in 0..dropped {
                    c.drop(DropReason::ArpPendingDropped);
                }
            }
        });
    }

    /// A connection through next hop `hop` hit a retransmission timeout: re-confirm its
    /// ARP entry (a stale or forged entry would otherwise stall the connection until it
    /// expires).
    pub fn suspect_neighbour(&mut self, now: Instant, hop: Ipv4Addr, c: &mut Counters) {
        if self.arp.suspect(now, hop) {
            let (mac, ip) = (self.mac, self.ip);
            queue_arp(
                &mut self.ctrl,
                mac,
                ip,
                ArpOperation::Request,
                [0; 6],
                hop,
                c,
            );
        }
    }

    /// Earliest ARP deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.arp.poll_timeout()
    }

    /// The next control frame or released held frame, copied into `buf`.
    ///
    /// Asked before every frame a transmit pass hands out: the usual answer (nothing
    /// queued, nothing held) is inlined.
    #[inline]
    pub fn poll_transmit(&mut self, buf: &mut [u8], c: &mut Counters) -> Option<usize> {
        if self.ctrl.is_empty() && !self.arp.holds_frames() {
            return None;
        }
        self.poll_transmit_queued(buf, c)
    }

    fn poll_transmit_queued(&mut self, buf: &mut [u8], c: &mut Counters) -> Option<usize> {
        loop {
            let n = match self.ctrl.pop_into(buf) {
                Some(n) => n,
                None => self.arp.release_into(buf)?,
            };
            if n > 0 {
                return Some(n);
            }
            c.drop(DropReason::TxQueueFull);
        }
    }
}

#[cfg(test)]
mod tests;
