#!/usr/bin/env python3
"""Counts what a lab link's multicast loss drops (tests/lab-loss.sh).

    mcount.py send N [ADDR]   # N numbered datagrams to ADDR:5990, paced
    mcount.py recv N [ADDR]   # prints: lost FRACTION bursts COUNT mean-burst LEN

ADDR is the group 239.77.9.9 unless given (a unicast address: the
receiver's own, to check that unicast passes untouched).

The receiver stops at the sender's end mark (sent 50 times) or after 3 s
of silence, then counts the numbers it never saw and their runs.
"""
import socket
import struct
import sys
import time

GROUP, PORT, END = "239.77.9.9", 5990, 0xFFFFFFFF


def send(n, addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    for i in range(n):
        s.sendto(struct.pack("!I", i) + bytes(60), (addr, PORT))
        if i % 100 == 99:
            time.sleep(0.001)  # well under what the receiver can take
    for _ in range(50):
        s.sendto(struct.pack("!I", END), (addr, PORT))
        time.sleep(0.01)


def recv(n, addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    s.bind(("", PORT))
    if 224 <= int(addr.split(".")[0]) <= 239:
        mreq = struct.pack("4s4s", socket.inet_aton(addr), socket.inet_aton("0.0.0.0"))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    s.settimeout(3)
    seen = bytearray(n)
    try:
        while True:
            (k,) = struct.unpack("!I", s.recv(64)[:4])
            if k == END:
                break
            if k < n:
                seen[k] = 1
    except socket.timeout:
        pass
    lost = n - sum(seen)
    bursts = sum(1 for i in range(n) if not seen[i] and (i == 0 or seen[i - 1]))
    print(f"lost {lost / n:.4f} bursts {bursts} mean-burst {lost / max(1, bursts):.2f}")


if __name__ == "__main__":
    {"send": send, "recv": recv}[sys.argv[1]](int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else GROUP)
