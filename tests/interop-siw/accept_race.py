#!/usr/bin/env python3
"""accept_race.py HOST PORT [--tries N] [--delay-ms D] [--rev 1|2]: siw's accept race,
reproduced with the host kernel's TCP (no iwarpd involved).

Against `siw_peer lgen-server` in a siw-vm guest (a siw responder that accepts with
iwarpd's load-generator private data), each try: TCP connect, MPA Request (no CRC, no
markers; revision 2 with IRD/ORD 1/1), read the Reply and its AcceptInfo (STag, address),
wait --delay-ms, send one RDMA Read Request FPDU for 64 bytes of the accepted buffer, and
wait up to 3 s for the Read Response. siw 6.1 associates the accepted socket with its QP
only after it sent the Reply; a Read Request that arrives in between is never read
(docs/INTEROP.md, difference 2). Prints one line per try and `N answered, N stalled`.

Run inside the harness's namespace: ip netns exec iwsiw python3 accept_race.py 198.18.0.11 7600
(the server must be restarted for every try: see scripts/interop-siw.sh or run it in a loop).
Standard library only; formats from RFC 5044/5040/6581 and dataplane/loadgen/src/proto.rs.
"""
import argparse
import socket
import struct
import sys
import time

LGEN = 0x4C47454E


def mpa_request(rev):
    hello = struct.pack("!IHBBIII", LGEN, 1, 2, 0, 64, 1, 0)  # op read, 64 B, depth 1
    pd = (struct.pack("!HH", 1, 1) + hello) if rev == 2 else hello
    flags = 0x10 if rev == 2 else 0x00  # enhanced connection setup (RFC 6581)
    return b"MPA ID Req Frame" + struct.pack("!BBH", flags, rev, len(pd)) + pd


def read_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("peer closed")
        out += chunk
    return out


def read_request(sink_stag, src_stag, src_to, length):
    # untagged DDP (L, DV 1), RDMAP v1 opcode 1, QN 1, MSN 1, MO 0, then the Read Request
    ulpdu = struct.pack("!BBIIII", 0x41, 0x41, 0, 1, 1, 0)
    ulpdu += struct.pack("!IQIIQ", sink_stag, 0, length, src_stag, src_to)
    fpdu = struct.pack("!H", len(ulpdu)) + ulpdu
    fpdu += b"\0" * ((-len(fpdu)) % 4)
    return fpdu + b"\0\0\0\0"  # CRC field (CRC not negotiated)


def one_try(host, port, rev, delay_ms):
    s = socket.create_connection((host, port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        s.sendall(mpa_request(rev))
        hdr = read_exact(s, 20)
        pd = read_exact(s, struct.unpack("!H", hdr[18:20])[0])
        if hdr[16] & 0x20:
            return "rejected"
        info = pd[4:] if rev == 2 else pd
        _, _, _, stag, base, _length, _credits = struct.unpack("!IHHIQQI", info[:32])
        if delay_ms:
            time.sleep(delay_ms / 1000)
        s.sendall(read_request(0x1234, stag, base, 64))
        s.settimeout(3)
        try:
            resp = s.recv(4096)
        except socket.timeout:
            return "stalled"
        return "answered" if resp else "closed"
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--rev", type=int, default=2, choices=(1, 2))
    ap.add_argument("--delay-ms", type=float, default=0)
    a = ap.parse_args()
    try:
        r = one_try(a.host, a.port, a.rev, a.delay_ms)
    except (OSError, ConnectionError, struct.error) as e:
        print("error %s" % e)
        return 2
    print(r)
    return 0 if r == "answered" else 1


if __name__ == "__main__":
    sys.exit(main())
