"""Flush the connection tracking table of the current network namespace.

Used between RFC 9693 trials (``xlat-perf cer --between-cmd``): the tests'
stateful DUT is nftables masquerade + conntrack in a namespace, and this
machine has no ``conntrack`` tool. Sends ctnetlink IPCTNL_MSG_CT_DELETE
without a tuple (= flush) for IPv4 and IPv6 and checks the kernel's ack.

Run as ``ip netns exec NS python3 tests/tools/ct_flush.py``.
"""

from __future__ import annotations

import socket
import struct
import sys

NETLINK_NETFILTER = 12
NFNL_SUBSYS_CTNETLINK = 1
IPCTNL_MSG_CT_DELETE = 2
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NLMSG_ERROR = 2


def flush(family: int) -> None:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    try:
        s.bind((0, 0))
        nfgen = struct.pack("=BBH", family, 0, 0)
        msg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE
        hdr = struct.pack(
            "=LHHLL", 16 + len(nfgen), msg_type, NLM_F_REQUEST | NLM_F_ACK, 1, 0
        )
        s.sendto(hdr + nfgen, (0, 0))
        data = s.recv(65536)
        _len, typ, _flags, _seq, _pid = struct.unpack("=LHHLL", data[:16])
        if typ != NLMSG_ERROR:
            raise SystemExit(f"ct_flush: unexpected netlink reply type {typ}")
        (err,) = struct.unpack("=i", data[16:20])
        if err != 0:
            raise SystemExit(f"ct_flush: kernel error {-err} for family {family}")
    finally:
        s.close()


def main() -> int:
    flush(socket.AF_INET)
    flush(socket.AF_INET6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
