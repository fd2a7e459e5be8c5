#!/usr/bin/env python3
"""A Linux TCP client that performs MPA handshakes with iwarpd (RFC 5044 + RFC 6581).

It plays the MPA Initiator over the kernel's TCP: connects, sends an MPA Request (revision 2,
CRC requested, the RFC 6581 enhanced-setup flag and IRD/ORD) whose private data is a load
generator hello, reads the MPA Reply and checks it, then closes with a FIN. With --bad-hello
it sends private data the daemon must reject and checks that the Reply carries the Reject
flag. With --split N the Request goes out in N-byte pieces, one TCP segment each (TCP_NODELAY,
a short pause between them), so that loss and reordering on the path exercise the daemon's
TCP reassembly and its MPA parser on a Request that arrives in pieces. Exit status 0 only if
every handshake of --count succeeded.
"""
import argparse
import socket
import struct
import sys
import time

KEY_REQ = b"MPA ID Req Frame"
KEY_REP = b"MPA ID Rep Frame"
FLAG_MARKERS, FLAG_CRC, FLAG_REJECT, FLAG_ENHANCED = 0x80, 0x40, 0x20, 0x10
LGEN_MAGIC, LGEN_VERSION, OP_CONNECT = 0x4C47454E, 1, 4


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"peer closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def request(index, bad):
    ird_ord = struct.pack(">HH", 16, 16)
    if bad:
        hello = b"NOT-A-LOADGEN-HELLO!"
    else:
        # magic u32, version u16, op u8, flags u8, size u32, depth u32, qp index u32
        hello = struct.pack(">IHBBIII", LGEN_MAGIC, LGEN_VERSION, OP_CONNECT, 0, 0, 1, index)
    pd = ird_ord + hello
    return KEY_REQ + bytes([FLAG_CRC | FLAG_ENHANCED, 2]) + struct.pack(">H", len(pd)) + pd


def send_request(s, req, split):
    if split <= 0:
        s.sendall(req)
        return
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for at in range(0, len(req), split):
        s.sendall(req[at:at + split])
        time.sleep(0.002)


def handshake(host, port, index, bad, timeout, split):
    t0 = time.monotonic()
    s = socket.create_connection((host, port), timeout=timeout)
    s.settimeout(timeout)
    send_request(s, request(index, bad), split)
    hdr = recv_exact(s, 20)
    key, flags, rev, pd_len = hdr[:16], hdr[16], hdr[17], struct.unpack(">H", hdr[18:20])[0]
    pd = recv_exact(s, pd_len) if pd_len else b""
    if key != KEY_REP:
        raise ValueError(f"reply key {key!r}")
    if rev != 2:
        raise ValueError(f"reply revision {rev}")
    rejected = bool(flags & FLAG_REJECT)
    if rejected != bad:
        raise ValueError(f"reply reject flag {rejected}, expected {bad}; private data {pd!r}")
    if not bad:
        if not flags & FLAG_CRC:
            raise ValueError("reply without the CRC flag although we asked for CRC")
        if len(pd) < 4 + 32:
            raise ValueError(f"accept private data too short: {len(pd)}")
        magic = struct.unpack(">I", pd[4:8])[0]
        if magic != LGEN_MAGIC:
            raise ValueError(f"accept private data magic {magic:#x}")
    s.shutdown(socket.SHUT_WR)
    # The daemon answers our FIN with its own (graceful close); wait for it.
    while s.recv(4096):
        pass
    s.close()
    return time.monotonic() - t0, flags, pd_len


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--count", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--bad-hello", action="store_true")
    ap.add_argument("--split", type=int, default=0, metavar="BYTES",
                    help="send the Request in pieces of this many bytes (0: one write)")
    a = ap.parse_args()
    if a.count < 1 or a.timeout <= 0 or a.split < 0:
        ap.error("--count must be >= 1, --timeout > 0 and --split >= 0")
    ok = 0
    for i in range(a.count):
        try:
            dt, flags, pd_len = handshake(a.host, a.port, i, a.bad_hello, a.timeout, a.split)
            ok += 1
            print(f"mpa handshake {i}: ok in {dt * 1000:.1f} ms (reply flags {flags:#04x}, "
                  f"private data {pd_len} B{', rejected as expected' if a.bad_hello else ''})")
        except Exception as e:  # noqa: BLE001 - report every failure and go on
            print(f"mpa handshake {i}: FAILED: {e}")
    print(f"mpa-client: {ok} of {a.count} handshakes succeeded")
    sys.exit(0 if ok == a.count else 1)


if __name__ == "__main__":
    main()
