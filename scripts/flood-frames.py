#!/usr/bin/env python3
"""Floods one side of a link with hostile frames, as fast as one Python process sends them
(scripts/soak.sh --flood KIND; issue 15 item 2).

    flood-frames.py IFACE KIND [--subnet 198.18.4] [--seconds S]
    flood-frames.py IFACE KIND --pcap FILE [--pool N]   (syn, junk: write, do not send)

IFACE is the wire's end facing the victim: frames sent on it reach the victim's port, and
the frames the victim sends are read from it (to learn its MAC, IP and live connections).
KIND:
  syn      TCP SYNs from random on-link addresses and ports to random ports 20000-27999
           of the victim (its listeners live there): half-open connections, SYN-ACKs to
           addresses nobody answers ARP for, RSTs from closed ports.
  junk     frames of random length and bytes, a random EtherType and half of them IPv4
           with a valid header and garbage after it.
  guess    segments on the victim's live connections (learnt from its own frames): RSTs
           with random sequence numbers, and ACK segments carrying random "FPDUs" (random
           MPA length; WRITEs with random STags and offsets, Sends, and Terminates with a
           random control field) at random sequence numbers: RFC 5961's blind attacks and
           STag guessing without knowing the stream.
Frames are built in pools of 4096 and sent round robin (the pool of `guess` is rebuilt
every second from the connections seen). With --pcap, the pool (N frames, default 65536)
is written to a pcap file once the victim is learnt, for a faster sender to replay
(scripts/soak.sh --flood-generator testpmd: dpdk-testpmd loops it into IFACE); `guess`
cannot be written ahead: its frames follow the connections of the moment. Prints "flood-frames: KIND sent N frames in S s
(R per second)" at the end (SIGTERM/SIGINT, or --seconds). Runs as root; standard library
only.
"""
import argparse
import os
import random
import select
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
POOL = 4096


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4(src, dst, proto, payload, ident=0):
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, 0x4000, 64, proto, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    return hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:] + payload


def tcp(src, dst, sport, dport, seq, ack, flags, payload=b"", window=65535):
    hdr = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, window, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(hdr) + len(payload))
    c = csum(pseudo + hdr + payload)
    return hdr[:16] + struct.pack("!H", c) + hdr[18:] + payload


def eth(dst_mac, src_mac, ethertype, payload):
    return dst_mac + src_mac + struct.pack("!H", ethertype) + payload


def rand_mac(rng):
    return bytes([0x02] + [rng.randrange(256) for _ in range(5)])


class Victim:
    """What the victim's own frames tell: its MAC and IP, and its live TCP connections."""

    def __init__(self):
        self.mac = None
        self.ip = None
        self.peer_mac = None
        self.conns = {}  # (peer_ip, peer_port, my_port) -> (next seq it expects, last seen)

    def learn(self, f):
        if len(f) < 54 or f[12:14] != b"\x08\x00" or f[23] != 6:
            return
        self.mac, self.peer_mac = f[6:12], f[0:6]
        self.ip = socket.inet_ntoa(f[26:30])
        ihl = (f[14] & 0x0F) * 4
        l4 = 14 + ihl
        sport, dport, _seq, ack = struct.unpack("!HHII", f[l4:l4 + 12])
        flags = f[l4 + 13]
        key = (socket.inet_ntoa(f[30:34]), dport, sport)
        if flags & 0x04 or flags & 0x01:
            self.conns.pop(key, None)
        elif flags & 0x10:
            self.conns[key] = (ack, time.monotonic())
        if len(self.conns) > 4096:
            self.conns.pop(next(iter(self.conns)))


def syn_pool(rng, v, subnet, n=POOL):
    out = []
    for _ in range(n):
        src = f"{subnet}.{rng.randrange(100, 250)}"
        seg = tcp(src, v.ip, rng.randrange(1024, 65536), rng.randrange(20000, 28000),
                  rng.getrandbits(32), 0, 0x02)
        out.append(eth(v.mac, rand_mac(rng), 0x0800, ipv4(src, v.ip, 6, seg, rng.getrandbits(16))))
    return out


def junk_pool(rng, v, subnet, n=POOL):
    out = []
    for i in range(n):
        n = rng.randrange(14, 1514)
        body = os.urandom(n - 14)
        if i % 2:
            src = f"{subnet}.{rng.randrange(100, 250)}"
            proto = rng.choice([6, 6, 6, 1, 17, rng.randrange(256)])
            f = eth(v.mac, rand_mac(rng), 0x0800, ipv4(src, v.ip, proto, body[:max(0, n - 34)]))
        else:
            f = eth(v.mac if rng.random() < 0.5 else b"\xff" * 6, rand_mac(rng),
                    rng.randrange(0x600, 0x10000), body)
        out.append(f)
    return out


def fpdu(rng):
    """An MPA FPDU with a DDP/RDMAP header of random STag and offset (Tagged, RDMA Write),
    an untagged Send, or a Terminate (RDMAP opcode 0x7 on queue 2, RFC 5040 section 7.2.6,
    with a random Terminate control field), random payload, no valid CRC."""
    payload = os.urandom(rng.randrange(0, 64))
    kind = rng.random()
    if kind < 0.4:
        ddp = struct.pack("!BBIQ", 0x80 | 0x40 | 0x01, 0x40, rng.getrandbits(32), rng.getrandbits(64))
    elif kind < 0.8:
        ddp = struct.pack("!BBIIII", 0x40 | 0x01, 0x43, 0, 0, rng.getrandbits(32), 0)
    else:
        # Untagged, Last; RDMAP version 1, opcode Terminate; QN 2, MSN random, MO 0; then
        # the Terminate control field (layer, type, code, flags) at random.
        ddp = struct.pack("!BBIIIII", 0x40 | 0x01, 0x47, 0, 2, rng.getrandbits(32), 0, rng.getrandbits(32))
    ulpdu = ddp + payload
    pad = (-(2 + len(ulpdu))) % 4
    return struct.pack("!H", len(ulpdu)) + ulpdu + b"\0" * pad + os.urandom(4)


def guess_pool(rng, v, subnet):
    # Connections the victim sent on within the last second (the others may be gone).
    now = time.monotonic()
    conns = [(k, c) for k, c in v.conns.items() if now - c[1] < 1.0]
    if not conns:
        return []
    out = []
    for _ in range(POOL):
        (peer_ip, peer_port, my_port), (expect, _) = rng.choice(conns)
        if rng.random() < 0.5:
            seg = tcp(peer_ip, v.ip, peer_port, my_port, rng.getrandbits(32), 0, 0x04)
        else:
            # Near the window (within 1 MiB) half the time: the blind in-window guess.
            seq = (expect + rng.randrange(-(1 << 20), 1 << 20)) & 0xFFFFFFFF if rng.random() < 0.5 \
                else rng.getrandbits(32)
            seg = tcp(peer_ip, v.ip, peer_port, my_port, seq, rng.getrandbits(32), 0x18, fpdu(rng))
        out.append(eth(v.mac, v.peer_mac, 0x0800, ipv4(peer_ip, v.ip, 6, seg, rng.getrandbits(16))))
    return out


def write_pcap(path, frames):
    """A classic pcap file (microsecond timestamps, Ethernet)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i // 1000000, i % 1000000, len(fr), len(fr)))
            f.write(fr)


def learn_from(s, v, most):
    """Reads up to `most` frames the victim sent (not those sent toward it)."""
    for _ in range(most):
        try:
            f, addr = s.recvfrom(65535)
        except BlockingIOError:
            return
        if addr[2] != socket.PACKET_OUTGOING:
            v.learn(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("iface")
    ap.add_argument("kind", choices=["syn", "junk", "guess"])
    ap.add_argument("--subnet", default="198.18.4")
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--pcap", help="write the pool to this pcap file instead of sending it")
    ap.add_argument("--pool", type=int, default=65536, help="frames in the --pcap pool")
    a = ap.parse_args()
    if a.pcap and a.kind == "guess":
        ap.error("--pcap: guess frames follow the live connections and cannot be written ahead")
    if not 1 <= a.pool <= 1 << 20:
        ap.error("--pool: 1 .. 1048576 frames")
    rng = random.Random(a.seed)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((a.iface, ETH_P_ALL))
    s.setblocking(False)
    stop = [False]

    def on_signal(_sig, _frm):
        stop[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    v = Victim()
    # Learn the victim from its own frames first (at most 30 s).
    t_end = time.monotonic() + 30
    while v.mac is None and time.monotonic() < t_end and not stop[0]:
        r, _, _ = select.select([s], [], [], 0.1)
        if r:
            learn_from(s, v, 1)
    if v.mac is None:
        print("flood-frames: the victim sent nothing to learn from", file=sys.stderr, flush=True)
        sys.exit(1)
    make = {"syn": syn_pool, "junk": junk_pool, "guess": guess_pool}[a.kind]
    if a.pcap:
        frames = make(rng, v, a.subnet, a.pool)
        write_pcap(a.pcap, frames)
        print(f"flood-frames: {a.kind}: {len(frames)} frames written to {a.pcap}", file=sys.stderr, flush=True)
        return
    pool, i, sent, errors = [], 0, 0, 0
    t0 = time.monotonic()
    rebuilt = 0.0
    deadline = t0 + a.seconds if a.seconds else None
    while not stop[0]:
        now = time.monotonic()
        if deadline and now >= deadline:
            break
        if not pool or (a.kind == "guess" and now - rebuilt > 1.0) or (a.kind != "guess" and now - rebuilt > 10.0):
            # Read what the victim sent meanwhile (its connections), then rebuild.
            learn_from(s, v, 10000)
            pool = make(rng, v, a.subnet) or pool
            rebuilt = now
            if not pool:
                time.sleep(0.01)
                continue
        for _ in range(256):
            try:
                s.send(pool[i])
                sent += 1
            except (BlockingIOError, OSError):
                errors += 1
            i = (i + 1) % len(pool)
    secs = max(time.monotonic() - t0, 1e-9)
    print(f"flood-frames: {a.kind} sent {sent} frames in {secs:.1f} s ({sent / secs:.0f} per second), "
          f"{errors} send errors", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
