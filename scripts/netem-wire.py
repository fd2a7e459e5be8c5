#!/usr/bin/env python3
"""A userspace Ethernet wire between two interfaces, with netem-like impairments.

scripts/linux-peer.sh uses it when the kernel has no `sch_netem` (tc answers "Specified
qdisc kind is unknown"): a middle network namespace holds one end of each of two veth pairs,
and this process forwards every frame from one to the other through AF_PACKET sockets, in
both directions, applying what `tc qdisc add ... netem loss L% delay D jitter J reorder R% C%`
would apply on each direction:

* loss: each frame is dropped with probability L (independent draws);
* reorder: with gap 1 (tc's default once reorder is given), a frame is sent at once with
  probability R (correlated with the previous draw by C, as netem's get_crandom does),
  and otherwise queued for delay +- jitter (uniform), the queue ordered by release time
  (netem's tfifo), so jitter reorders too and the frames sent at once overtake the queue.

Frames are forwarded byte for byte (no checksum is touched). SIGUSR1 prints the counters
on stderr; SIGTERM/SIGINT print them and exit 0. Runs as root; needs only the Python standard library.
"""
import argparse
import heapq
import random
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
FRAME_MAX = 65535


class Correlated:
    """netem's correlated uniform generator: next = corr * last + (1 - corr) * uniform."""

    def __init__(self, rng, corr):
        self.rng, self.corr, self.last = rng, corr, rng.random()

    def draw(self):
        u = self.rng.random()
        if self.corr:
            u = self.corr * self.last + (1.0 - self.corr) * u
        self.last = u
        return u


class Direction:
    """One direction of the wire (frames read from `src`, written to `dst`)."""

    def __init__(self, name, src, dst, args, rng):
        self.name, self.src, self.dst, self.args, self.rng = name, src, dst, args, rng
        self.reorder = Correlated(rng, args.reorder_corr / 100.0)
        self.counts = {"in": 0, "dropped": 0, "immediate": 0, "delayed": 0, "out": 0,
                       "send_errors": 0}

    def on_frame(self, frame, now, queue, seq):
        a = self.args
        self.counts["in"] += 1
        if a.loss and self.rng.random() < a.loss / 100.0:
            self.counts["dropped"] += 1
            if a.log_drops:
                print(f"netem-wire: drop {self.name}: {describe(frame)}", file=sys.stderr,
                      flush=True)
            return
        if a.reorder and self.reorder.draw() < a.reorder / 100.0:
            self.counts["immediate"] += 1
            self.send(frame)
            return
        if a.delay_ms or a.jitter_ms:
            d = a.delay_ms + (self.rng.uniform(-a.jitter_ms, a.jitter_ms) if a.jitter_ms else 0)
            self.counts["delayed"] += 1
            heapq.heappush(queue, (now + max(d, 0.0) / 1000.0, seq, self, frame))
            return
        self.send(frame)

    def send(self, frame):
        try:
            self.dst.send(frame)
            self.counts["out"] += 1
        except OSError:
            self.counts["send_errors"] += 1


def describe(frame):
    """One line about a frame (for --log-drops): ARP, ICMP or TCP with flags, seq and length."""
    if len(frame) < 14:
        return f"runt of {len(frame)} bytes"
    ethertype = int.from_bytes(frame[12:14], "big")
    if ethertype == 0x0806:
        return "ARP " + ("request" if frame[21:22] == b"\x01" else "reply")
    if ethertype != 0x0800 or len(frame) < 34:
        return f"ethertype {ethertype:#06x}, {len(frame)} bytes"
    ihl = (frame[14] & 0x0F) * 4
    total = int.from_bytes(frame[16:18], "big")
    proto = frame[23]
    src, dst = ".".join(map(str, frame[26:30])), ".".join(map(str, frame[30:34]))
    l4 = 14 + ihl
    if proto == 1 and len(frame) >= l4 + 8:
        return f"ICMP type {frame[l4]} {src} -> {dst}"
    if proto != 6 or len(frame) < l4 + 20:
        return f"IPv4 proto {proto} {src} -> {dst}"
    sport, dport = int.from_bytes(frame[l4:l4 + 2], "big"), int.from_bytes(frame[l4 + 2:l4 + 4], "big")
    seq, ack = int.from_bytes(frame[l4 + 4:l4 + 8], "big"), int.from_bytes(frame[l4 + 8:l4 + 12], "big")
    doff = (frame[l4 + 12] >> 4) * 4
    flags = "".join(n for bit, n in ((0x02, "S"), (0x01, "F"), (0x04, "R"), (0x08, "P"), (0x10, "."))
                    if frame[l4 + 13] & bit)
    payload = total - ihl - doff
    return f"TCP {src}:{sport} -> {dst}:{dport} [{flags}] seq {seq} ack {ack} len {payload}"


def open_port(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((ifname, ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.setblocking(False)
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("if_a")
    ap.add_argument("if_b")
    ap.add_argument("--loss", type=float, default=0.0, help="percent of frames dropped")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--reorder", type=float, default=0.0,
                    help="percent of frames sent at once (ahead of the delayed ones)")
    ap.add_argument("--reorder-corr", type=float, default=0.0, help="percent correlation")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--log-drops", action="store_true", help="print every dropped frame")
    a = ap.parse_args()
    for name in ("loss", "reorder", "reorder_corr"):
        if not 0.0 <= getattr(a, name) <= 100.0:
            ap.error(f"--{name.replace('_', '-')} must be within 0..100")
    if a.delay_ms < 0 or a.jitter_ms < 0:
        ap.error("--delay-ms and --jitter-ms must not be negative")
    rng = random.Random(a.seed)
    pa, pb = open_port(a.if_a), open_port(a.if_b)
    dirs = {pa.fileno(): Direction(f"{a.if_a}->{a.if_b}", pa, pb, a, rng),
            pb.fileno(): Direction(f"{a.if_b}->{a.if_a}", pb, pa, a, rng)}
    queue, seq = [], 0
    stop, dump = [], []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    signal.signal(signal.SIGUSR1, lambda *_: dump.append(1))
    print(f"netem-wire: {a.if_a} <-> {a.if_b} loss {a.loss}% delay {a.delay_ms} ms "
          f"+- {a.jitter_ms} ms reorder {a.reorder}% {a.reorder_corr}%", file=sys.stderr,
          flush=True)
    while not stop:
        now = time.monotonic()
        timeout = 0.5 if not queue else max(0.0, min(0.5, queue[0][0] - now))
        try:
            ready, _, _ = select.select([pa, pb], [], [], timeout)
        except InterruptedError:
            continue
        now = time.monotonic()
        for s in ready:
            d = dirs[s.fileno()]
            while True:
                try:
                    frame, addr = s.recvfrom(FRAME_MAX)
                except (BlockingIOError, InterruptedError):
                    break
                if addr[2] == socket.PACKET_OUTGOING:
                    continue  # what this wire itself (or the kernel here) sent
                seq += 1
                d.on_frame(frame, now, queue, seq)
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, d, frame = heapq.heappop(queue)
            d.send(frame)
        if dump:
            dump.clear()
            print_counts(dirs, queue)
    print_counts(dirs, queue)


def print_counts(dirs, queue):
    for d in dirs.values():
        c = " ".join(f"{k} {v}" for k, v in d.counts.items())
        print(f"netem-wire: {d.name}: {c}", file=sys.stderr)
    print(f"netem-wire: {len(queue)} frame(s) queued", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
