"""Small traffic tools run *inside* a namespace by the tests (``ip netns exec NS python nsio.py``).

Subcommands (every loop is bounded in count and time):

* ``udp-echo --bind ADDR --port P [--lifetime S] [--udplite]``: UDP echo server.
* ``udp-ping --dst ADDR --port P --size N [--count C] [--timeout S] [--udplite]``: send C
  datagrams of N bytes, wait for each echo, print JSON {"sent", "received", "sizes"}.
  ``--udplite``: UDP-Lite (RFC 3828, IP protocol 136) instead of UDP, both ends.
* ``udp-recv --bind ADDR --port P [--count C] [--timeout S]``: print JSON of datagrams received
  (after printing "listening" on stderr).
* ``send-l2 --dev DEV --mac MAC --ethertype 0x0800 HEX [HEX...]``: send raw L3 packets in
  Ethernet frames to MAC on DEV (AF_PACKET: nothing is fixed up by the kernel).
* ``dns64 --bind ADDR [--port 53] --aaaa ADDR6 [...] [--lifetime S]``: tiny DNS server
  answering AAAA queries for ipv4only.arpa (RFC 7050 section 3) with the given addresses and
  NXDOMAIN/empty for everything else.
* ``tcp-sink --bind ADDR --port P [--timeout S]`` / ``tcp-send --dst ADDR --port P
  --bytes N``: one TCP transfer; the sink prints the byte count it received.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import socket
import struct
import sys
import time


def _family(addr: str) -> int:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


UDPLITE = 136


def udp_echo(a) -> None:
    s = socket.socket(_family(a.bind), socket.SOCK_DGRAM, UDPLITE if a.udplite else 0)
    s.bind((a.bind, a.port))
    s.settimeout(0.5)
    print("listening", file=sys.stderr, flush=True)
    deadline = time.monotonic() + a.lifetime
    while time.monotonic() < deadline:
        try:
            data, peer = s.recvfrom(70000)
        except TimeoutError:
            continue
        s.sendto(data, peer)


def udp_ping(a) -> None:
    s = socket.socket(_family(a.dst), socket.SOCK_DGRAM, UDPLITE if a.udplite else 0)
    if a.sport:
        s.bind(("", a.sport))
    s.settimeout(a.timeout)
    sizes = []
    for i in range(a.count):
        if i and a.interval:
            time.sleep(a.interval)
        payload = bytes([(i + j) & 0xFF for j in range(a.size)])
        s.sendto(payload, (a.dst, a.port))
        try:
            data, _ = s.recvfrom(70000)
        except TimeoutError:
            continue
        if data == payload:
            sizes.append(len(data))
    print(json.dumps({"sent": a.count, "received": len(sizes), "sizes": sizes}))


def udp_recv(a) -> None:
    s = socket.socket(_family(a.bind), socket.SOCK_DGRAM)
    s.bind((a.bind, a.port))
    print("listening", file=sys.stderr, flush=True)
    got = []
    deadline = time.monotonic() + a.timeout
    while len(got) < a.count:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            data, peer = s.recvfrom(70000)
        except TimeoutError:
            break
        got.append({"src": peer[0], "len": len(data), "data": data.hex()})
    print(json.dumps(got))


def send_l2(a) -> None:
    mac = bytes.fromhex(a.mac.replace(":", ""))
    ethertype = int(a.ethertype, 0)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ethertype))
    for h in a.packets:
        s.sendto(bytes.fromhex(h), (a.dev, ethertype, 0, 0, mac))
        time.sleep(a.gap)
    print(json.dumps({"sent": len(a.packets)}))


def _dns_name(buf: bytes, off: int) -> tuple[str, int]:
    labels = []
    for _ in range(64):
        n = buf[off]
        off += 1
        if n == 0:
            break
        labels.append(buf[off : off + n].decode("ascii", "replace").lower())
        off += n
    return ".".join(labels), off


def dns64(a) -> None:
    s = socket.socket(_family(a.bind), socket.SOCK_DGRAM)
    s.bind((a.bind, a.port))
    s.settimeout(0.5)
    answers = [ipaddress.IPv6Address(x).packed for x in a.aaaa]
    print("listening", file=sys.stderr, flush=True)
    deadline = time.monotonic() + a.lifetime
    while time.monotonic() < deadline:
        try:
            q, peer = s.recvfrom(4096)
        except TimeoutError:
            continue
        if len(q) < 12:
            continue
        qid, flags, _qd = struct.unpack("!HHH", q[:6])
        try:
            name, off = _dns_name(q, 12)
            qtype, _qclass = struct.unpack("!HH", q[off : off + 4])
        except (IndexError, struct.error):
            continue
        question = q[12 : off + 4]
        rd = flags & 0x0100
        sys.stderr.write(f"query {name} type {qtype} from {peer[0]}\n")
        sys.stderr.flush()
        if name == "ipv4only.arpa" and qtype == 28:
            rrs = b"".join(
                b"\xc0\x0c" + struct.pack("!HHIH", 28, 1, 60, 16) + ans
                for ans in answers
            )
            hdr = struct.pack("!HHHHHH", qid, 0x8400 | rd, 1, len(answers), 0, 0)
        elif name == "ipv4only.arpa":
            rrs = b""
            hdr = struct.pack("!HHHHHH", qid, 0x8400 | rd, 1, 0, 0, 0)
        else:
            rrs = b""
            hdr = struct.pack("!HHHHHH", qid, 0x8403 | rd, 1, 0, 0, 0)
        s.sendto(hdr + question + rrs, peer)


def tcp_sink(a) -> None:
    ls = socket.socket(_family(a.bind), socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.bind, a.port))
    ls.listen(1)
    ls.settimeout(a.timeout)
    print("listening", file=sys.stderr, flush=True)
    total = 0
    deadline = time.monotonic() + a.timeout
    with contextlib.suppress(TimeoutError):
        c, _ = ls.accept()
        c.settimeout(a.timeout)
        while time.monotonic() < deadline:
            d = c.recv(65536)
            if not d:
                break
            total += len(d)
    print(json.dumps({"received": total}))


def tcp_send(a) -> None:
    s = socket.create_connection((a.dst, a.port), timeout=a.timeout)
    chunk = b"x" * 16384
    left = a.bytes
    while left > 0:
        n = s.send(chunk[: min(left, len(chunk))])
        left -= n
    s.shutdown(socket.SHUT_WR)
    s.settimeout(a.timeout)
    with contextlib.suppress(TimeoutError):
        while s.recv(4096):
            pass
    mss = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    s.close()
    print(json.dumps({"sent": a.bytes, "mss": mss}))


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    x = sub.add_parser("udp-echo")
    x.add_argument("--bind", required=True)
    x.add_argument("--port", type=int, required=True)
    x.add_argument("--lifetime", type=float, default=120)
    x.add_argument("--udplite", action="store_true")
    x.set_defaults(fn=udp_echo)
    x = sub.add_parser("udp-ping")
    x.add_argument("--dst", required=True)
    x.add_argument("--port", type=int, required=True)
    x.add_argument("--size", type=int, default=64)
    x.add_argument("--count", type=int, default=3)
    x.add_argument("--timeout", type=float, default=2)
    x.add_argument("--sport", type=int, default=0)
    x.add_argument("--interval", type=float, default=0)
    x.add_argument("--udplite", action="store_true")
    x.set_defaults(fn=udp_ping)
    x = sub.add_parser("udp-recv")
    x.add_argument("--bind", required=True)
    x.add_argument("--port", type=int, required=True)
    x.add_argument("--count", type=int, default=1)
    x.add_argument("--timeout", type=float, default=5)
    x.set_defaults(fn=udp_recv)
    x = sub.add_parser("send-l2")
    x.add_argument("--dev", required=True)
    x.add_argument("--mac", required=True)
    x.add_argument("--ethertype", default="0x0800")
    x.add_argument("--gap", type=float, default=0.01)
    x.add_argument("packets", nargs="+")
    x.set_defaults(fn=send_l2)
    x = sub.add_parser("dns64")
    x.add_argument("--bind", required=True)
    x.add_argument("--port", type=int, default=53)
    x.add_argument("--aaaa", action="append", required=True)
    x.add_argument("--lifetime", type=float, default=120)
    x.set_defaults(fn=dns64)
    x = sub.add_parser("tcp-sink")
    x.add_argument("--bind", required=True)
    x.add_argument("--port", type=int, required=True)
    x.add_argument("--timeout", type=float, default=20)
    x.set_defaults(fn=tcp_sink)
    x = sub.add_parser("tcp-send")
    x.add_argument("--dst", required=True)
    x.add_argument("--port", type=int, required=True)
    x.add_argument("--bytes", type=int, default=200_000)
    x.add_argument("--timeout", type=float, default=20)
    x.set_defaults(fn=tcp_send)
    a = p.parse_args(argv)
    a.fn(a)


if __name__ == "__main__":
    main()
