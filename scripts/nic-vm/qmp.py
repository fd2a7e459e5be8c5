#!/usr/bin/env python3
"""qmp.py SOCKET JSON... : sends each JSON command to QEMU's QMP monitor (after the
capabilities handshake) and prints each reply (events skipped) on one line; exit 1 if a
reply is an error."""
import json
import socket
import sys


def main():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sys.argv[1])
    f = s.makefile("rw")
    json.loads(f.readline())  # greeting
    rc = 0
    for cmd in ["{\"execute\":\"qmp_capabilities\"}"] + sys.argv[2:]:
        f.write(cmd + "\n")
        f.flush()
        while True:
            line = f.readline()
            if not line:
                return rc
            msg = json.loads(line)
            if "event" in msg:
                continue
            break
        if cmd is not sys.argv[1] and "qmp_capabilities" not in cmd:
            print(json.dumps(msg))
        if "error" in msg:
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
