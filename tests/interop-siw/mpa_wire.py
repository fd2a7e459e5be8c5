#!/usr/bin/env python3
"""mpa_wire.py PCAP [--peer IP] [--json]: what an iWARP exchange looked like on the wire.

Reads a pcap (Ethernet, IPv4, TCP; classic pcap with micro- or nanosecond stamps),
reassembles both directions of every TCP connection (retransmissions and overlaps
removed, holes reported), parses the MPA Request/Reply (RFC 5044, RFC 6581), then the
FPDU stream of each direction: length, DDP/RDMAP header, padding, CRC32c (checked when
negotiated, must be zero otherwise is *not* assumed: the value is reported). Markers are
not parsed (a connection that negotiates them is reported as such and not walked).

Prints one summary line per connection (or JSON with --json) for scripts/interop-siw.sh:

  conn 198.18.0.2:49152>198.18.0.11:7174 req=rev2,crc=0,mk=0,enh=1,p2p=0,ird=1,ord=1,pd=24
       rep=rev2,crc=0,rej=0,... a>b: fpdus=12 Send=2 ReadReq=1 ... crc_bad=0 term=none fin=1 rst=0

Standard library only. Read for facts from RFC 5040/5041/5044/6581; no code copied.
"""
import argparse
import json
import struct
import sys

RDMAP_OPS = {0: "Write", 1: "ReadReq", 2: "ReadResp", 3: "Send", 4: "SendInv",
             5: "SendSE", 6: "SendSEInv", 7: "Terminate"}
TERM_LAYER = {0: "RDMAP", 1: "DDP", 2: "MPA"}


def _crc32c_table():
    poly = 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    t = CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def read_pcap(path):
    """Yields (ts_seconds, frame bytes) of an Ethernet pcap."""
    with open(path, "rb") as f:
        hdr = f.read(24)
        if len(hdr) < 24:
            return
        magic = struct.unpack("<I", hdr[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            endian = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            endian = ">"
        else:
            raise ValueError("not a classic pcap file")
        nano = magic in (0xA1B23C4D, 0x4D3CB2A1)
        linktype = struct.unpack(endian + "I", hdr[20:24])[0]
        if linktype != 1:
            raise ValueError("link type %d is not Ethernet" % linktype)
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, frac, incl, _orig = struct.unpack(endian + "IIII", rec)
            data = f.read(incl)
            if len(data) < incl:
                return
            yield sec + frac / (1e9 if nano else 1e6), data


def tcp_segments(path):
    """Yields (ts, src, sport, dst, dport, seq, flags, payload) of IPv4/TCP frames."""
    for ts, fr in read_pcap(path):
        if len(fr) < 14:
            continue
        eth_type = struct.unpack("!H", fr[12:14])[0]
        off = 14
        if eth_type == 0x8100:
            eth_type = struct.unpack("!H", fr[16:18])[0]
            off = 18
        if eth_type != 0x0800 or len(fr) < off + 20:
            continue
        ihl = (fr[off] & 0x0F) * 4
        total = struct.unpack("!H", fr[off + 2:off + 4])[0]
        if fr[off + 9] != 6:
            continue
        src = ".".join(str(b) for b in fr[off + 12:off + 16])
        dst = ".".join(str(b) for b in fr[off + 16:off + 20])
        t = off + ihl
        if len(fr) < t + 20:
            continue
        sport, dport, seq = struct.unpack("!HHI", fr[t:t + 8])
        doff = (fr[t + 12] >> 4) * 4
        flags = fr[t + 13]
        end = min(len(fr), off + total)
        yield ts, src, sport, dst, dport, seq, flags, bytes(fr[t + doff:end])


class Direction:
    def __init__(self):
        self.isn = None
        self.chunks = {}      # relative seq -> bytes (longest kept)
        self.fin = False
        self.rst = False
        self.syn = False
        self.fin_ts = None

    def add(self, seq, flags, payload, ts=0.0):
        if flags & 0x02:       # SYN
            self.syn = True
            self.isn = seq
            return
        if flags & 0x04:
            self.rst = True
        if flags & 0x01:
            self.fin = True
            if self.fin_ts is None:
                self.fin_ts = ts
        if self.isn is None or not payload:
            return
        rel = (seq - self.isn - 1) & 0xFFFFFFFF
        if rel > 0x7FFFFFFF:   # before the ISN: ignore
            return
        old = self.chunks.get(rel)
        if old is None or len(payload) > len(old):
            self.chunks[rel] = payload

    def stream(self):
        """(bytes, holes): the in-order byte stream, cut at the first hole."""
        out = bytearray()
        holes = 0
        for rel in sorted(self.chunks):
            data = self.chunks[rel]
            if rel > len(out):
                holes += 1
                break
            if rel + len(data) > len(out):
                out += data[len(out) - rel:]
        return bytes(out), holes


def parse_mpa_hello(buf, key):
    """Parses an MPA Request/Reply at buf[0:]; returns (dict, consumed) or (None, 0)."""
    if len(buf) < 20 or not buf.startswith(key):
        return None, 0
    bits, rev, pdlen = buf[16], buf[17], struct.unpack("!H", buf[18:20])[0]
    if len(buf) < 20 + pdlen:
        return None, 0
    pd = buf[20:20 + pdlen]
    h = {"rev": rev, "crc": int(bool(bits & 0x40)), "mk": int(bool(bits & 0x80)),
         "rej": int(bool(bits & 0x20)), "enh": int(bool(bits & 0x10)),
         "gso": int(bool(bits & 0x08)), "pd": pdlen}
    if rev == 2 and bits & 0x10 and pdlen >= 4:
        ird, ord_ = struct.unpack("!HH", pd[:4])
        h.update(p2p=int(bool(ird & 0x8000)), zlrtr=int(bool(ird & 0x4000)),
                 ird=ird & 0x3FFF, wrtr=int(bool(ord_ & 0x8000)),
                 rrtr=int(bool(ord_ & 0x4000)), ord=ord_ & 0x3FFF)
        pd = pd[4:]
    h["ulp_pd"] = pd.hex()
    return h, 20 + pdlen


def walk_fpdus(buf, crc_on):
    """Walks FPDUs; returns counters and the first Terminate."""
    r = {"fpdus": 0, "crc_bad": 0, "crc_nonzero_off": 0, "trailing": 0, "bytes": 0,
         "zero_len_write": 0, "zero_len_read": 0, "term": None, "ops": {}}
    i = 0
    while i + 2 <= len(buf):
        ulpdu_len = struct.unpack("!H", buf[i:i + 2])[0]
        pad = (-(2 + ulpdu_len)) % 4
        total = 2 + ulpdu_len + pad + 4
        if i + total > len(buf) or ulpdu_len < 2:
            r["trailing"] = len(buf) - i
            break
        fpdu = buf[i:i + total]
        want = struct.unpack("!I", fpdu[-4:])[0]
        if crc_on:
            # The CRC is sent in network byte order of the little-endian register value.
            got = crc32c(fpdu[:-4])
            got_wire = struct.unpack("<I", struct.pack(">I", got))[0]
            if want not in (got, got_wire):
                r["crc_bad"] += 1
        elif want != 0:
            r["crc_nonzero_off"] += 1
        ctrl, rdmap = fpdu[2], fpdu[3]
        tagged = bool(ctrl & 0x80)
        op = RDMAP_OPS.get(rdmap & 0x0F, "op%d" % (rdmap & 0x0F))
        hdr = 14 if tagged else 18
        payload = max(0, ulpdu_len - hdr)
        if op == "ReadReq":
            payload = 0
            if ulpdu_len >= 18 + 28:
                rd_len = struct.unpack("!I", fpdu[2 + 18 + 16:2 + 18 + 20])[0]
                if rd_len == 0:
                    r["zero_len_read"] += 1
        if op == "Write" and payload == 0:
            r["zero_len_write"] += 1
        # count messages by their last FPDU (L bit)
        if ctrl & 0x40 or op == "Terminate":
            r["ops"][op] = r["ops"].get(op, 0) + 1
        if r["fpdus"] == 0:
            r["first"] = op if payload or op in ("Terminate", "ReadReq") else "zl" + op
        r["bytes"] += payload
        if op == "Terminate" and r["term"] is None and ulpdu_len >= 18 + 4:
            raw = fpdu[2 + 18:2 + 22]
            tc = struct.unpack("!I", raw)[0]
            layer, etype, ecode = tc >> 28, (tc >> 24) & 0xF, (tc >> 16) & 0xFF
            r["term"] = "%s/%d/0x%02x" % (TERM_LAYER.get(layer, "L%d" % layer), etype, ecode)
            r["term_raw"] = raw.hex()
            # Linux siw fills the Terminate Control with C bitfields: on little-endian
            # hosts Layer and EType trade nibbles and M/D/R sit in the low bits of byte 2.
            r["term_siw"] = "%s/%d/0x%02x" % (TERM_LAYER.get(raw[0] & 0xF, "L%d" % (raw[0] & 0xF)),
                                              raw[0] >> 4, raw[1])
        r["fpdus"] += 1
        i += total
    return r


def analyse(path, peer=None):
    conns = {}
    order = []
    for _ts, src, sport, dst, dport, seq, flags, payload in tcp_segments(path):
        a, b = (src, sport), (dst, dport)
        key = (a, b) if (a, b) in conns else (b, a) if (b, a) in conns else None
        if key is None:
            if not flags & 0x02 or flags & 0x10:   # only a SYN opens a connection
                continue
            key = (a, b)
            conns[key] = {a: Direction(), b: Direction()}
            order.append(key)
        conns[key][a].add(seq, flags, payload, _ts)
    out = []
    for key in order:
        init, resp = key
        if peer and peer not in (init[0], resp[0]):
            continue
        d = conns[key]
        c = {"init": "%s:%d" % init, "resp": "%s:%d" % resp}
        s_i, holes_i = d[init].stream()
        s_r, holes_r = d[resp].stream()
        req, n_i = parse_mpa_hello(s_i, b"MPA ID Req Frame")
        rep, n_r = parse_mpa_hello(s_r, b"MPA ID Rep Frame")
        c["req"], c["rep"] = req, rep
        crc_on = bool(req and rep and (req["crc"] or rep["crc"]))
        markers = bool(req and rep and (req["mk"] and rep["mk"]))
        c["crc"], c["markers"] = int(crc_on), int(markers)
        for name, dirn, s, n, holes in (("i2r", d[init], s_i, n_i, holes_i),
                                        ("r2i", d[resp], s_r, n_r, holes_r)):
            w = walk_fpdus(s[n:], crc_on) if n and rep and not rep["rej"] and not markers else {}
            w.update(fin=int(dirn.fin), rst=int(dirn.rst), holes=holes, stream=len(s),
                     fin_ts=dirn.fin_ts)
            c[name] = w
        out.append(c)
    return out


def check(conns, exp):
    """Checks the expectations (KEY=VALUE strings) against the first connection of the
    capture; returns None when all hold, else the first failure as text."""
    if not conns:
        return "no TCP connection in the capture"
    c = conns[0]
    req, rep = c["req"] or {}, c["rep"] or {}
    for e in exp:
        k, _, v = e.partition("=")
        if k == "rev":
            if req.get("rev") != int(v) or (rep and rep.get("rev") != int(v)):
                return "MPA revision req %s rep %s, expected %s" % (req.get("rev"), rep.get("rev"), v)
        elif k == "crc":
            if c["crc"] != int(v):
                return "CRC in use %d, expected %s (req C=%s rep C=%s)" % (
                    c["crc"], v, req.get("crc"), rep.get("crc"))
        elif k == "rej":
            if rep.get("rej") != int(v):
                return "reply reject flag %s, expected %s" % (rep.get("rej"), v)
        elif k in ("reqpd", "reppd"):
            h = req if k == "reqpd" else rep
            if not h.get("ulp_pd", "").startswith(v.lower()):
                return "%s private data %s, expected it to start with %s" % (
                    "request" if k == "reqpd" else "reply", h.get("ulp_pd"), v)
        elif k == "p2p":
            neg = int(bool(req.get("p2p") and rep.get("p2p")))
            if neg != int(v):
                return "P2P negotiated %d (req %s rep %s), expected %s" % (
                    neg, req.get("p2p"), rep.get("p2p"), v)
            if neg:
                first = c["i2r"].get("first")
                want = "zlWrite" if rep.get("wrtr") else "ReadReq" if rep.get("rrtr") else "zlSend"
                if first != want:
                    return "P2P: initiator's first FPDU %s, reply chose %s" % (first, want)
        elif k in ("i2r", "r2i"):
            # i2r=Op:N (at least N messages), i2r=term:LAYER/T/0xCC, i2r=noterm, i2r=fin, i2r=rst
            w = c[k]
            if v.startswith("term:"):
                if w.get("term") != v[5:]:
                    return "%s Terminate %s (raw %s), expected %s" % (
                        k, w.get("term"), w.get("term_raw"), v[5:])
            elif v.startswith("termsiw:"):
                if w.get("term_siw") != v[8:]:
                    return "%s Terminate in siw's layout %s (raw %s), expected %s" % (
                        k, w.get("term_siw"), w.get("term_raw"), v[8:])
            elif v == "noterm":
                if w.get("term"):
                    return "%s sent a Terminate %s" % (k, w.get("term"))
            elif v in ("fin", "rst"):
                if not w.get(v):
                    return "%s sent no %s" % (k, v.upper())
            elif v == "norst":
                if w.get("rst"):
                    return "%s sent a RST" % k
            else:
                op, _, n = v.partition(":")
                if w.get("ops", {}).get(op, 0) < int(n or 1):
                    return "%s carried %d %s, expected at least %s" % (
                        k, w.get("ops", {}).get(op, 0), op, n or 1)
        elif k == "firstfin":
            ti, tr = c["i2r"].get("fin_ts"), c["r2i"].get("fin_ts")
            first = None
            if ti is not None and (tr is None or ti <= tr):
                first = "i2r"
            elif tr is not None:
                first = "r2i"
            if first != v:
                return "first FIN from %s, expected %s" % (first, v)
        elif k == "clean":
            for d in ("i2r", "r2i"):
                w = c[d]
                if w.get("crc_bad") or w.get("holes") or w.get("trailing") or w.get("crc_nonzero_off"):
                    return "%s: crc_bad %s, crc_nonzero_off %s, holes %s, trailing %s" % (
                        d, w.get("crc_bad"), w.get("crc_nonzero_off"), w.get("holes"), w.get("trailing"))
        else:
            return "unknown expectation %s" % e
    return None


def hello_str(h):
    if h is None:
        return "none"
    keys = ["rev", "crc", "mk", "rej", "enh", "gso", "p2p", "zlrtr", "wrtr", "rrtr", "ird",
            "ord", "pd"]
    return ",".join("%s=%s" % (k, h[k]) for k in keys if k in h)


def dir_str(w):
    ops = " ".join("%s=%d" % kv for kv in sorted(w.get("ops", {}).items()))
    keys = ["fpdus", "bytes", "crc_bad", "crc_nonzero_off", "zero_len_write",
            "zero_len_read", "trailing", "holes", "fin", "rst"]
    t = w.get("term")
    if t:
        t = "%s(raw %s, siw layout %s)" % (t, w.get("term_raw"), w.get("term_siw"))
    return "%s %s term=%s" % (ops, " ".join("%s=%s" % (k, w[k]) for k in keys if k in w), t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pcap")
    ap.add_argument("--peer", help="only connections with this IPv4 address")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--expect", nargs="*", default=None,
                    help="check the first connection: rev=N crc=0|1 p2p=0|1 rej=0|1 clean reqpd|reppd=HEX "
                         "i2r|r2i=Op[:N]|term:L/T/0xCC|termsiw:L/T/0xCC|noterm|fin|rst|norst")
    a = ap.parse_args()
    try:
        res = analyse(a.pcap, a.peer)
    except (OSError, ValueError) as e:
        print("mpa_wire: %s" % e, file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(res))
        return 0
    if a.expect is not None:
        why = check(res, a.expect)
        print("ok" if why is None else why)
        return 0 if why is None else 1
    for c in res:
        print("conn %s>%s crc=%d req=[%s] rep=[%s]" % (c["init"], c["resp"], c["crc"],
                                                   hello_str(c["req"]), hello_str(c["rep"])))
        print("  i2r: %s" % dir_str(c["i2r"]))
        print("  r2i: %s" % dir_str(c["r2i"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
