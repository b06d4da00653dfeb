"""List the BPF programs on an interface's tc ingress hook, one per line:
``tcx NAME`` for each TCX link (Linux >= 6.6, in run order), then ``tc
NAME`` for each clsact filter (from ``tc filter show``).

``tc filter show`` does not list TCX programs and this machine's bpftool
predates TCX, so the TCX part asks the kernel directly: BPF_PROG_QUERY
with BPF_TCX_INGRESS for the program ids, then BPF_PROG_GET_FD_BY_ID and
BPF_OBJ_GET_INFO_BY_FD for each name.

Run as ``ip netns exec NS python3 tests/tools/ingress_progs.py DEV``.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import subprocess
import sys

SYS_BPF = 321  # x86_64
BPF_PROG_GET_FD_BY_ID = 13
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_PROG_QUERY = 16
BPF_TCX_INGRESS = 46
ATTR_SIZE = 128

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _bpf(cmd: int, attr: ctypes.Array) -> int:
    r = _libc.syscall(SYS_BPF, cmd, attr, ctypes.c_uint(ATTR_SIZE))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def tcx_prog_ids(ifindex: int) -> list[int]:
    """The ids of the programs on ``ifindex``'s TCX ingress ([] on a kernel
    without TCX)."""
    ids = (ctypes.c_uint32 * 64)()
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    # union bpf_attr, query: target_ifindex, attach_type, query_flags,
    # attach_flags, prog_ids (u64), prog_cnt (u32).
    struct.pack_into(
        "=IIIIQI", attr, 0, ifindex, BPF_TCX_INGRESS, 0, 0, ctypes.addressof(ids), 64
    )
    try:
        _bpf(BPF_PROG_QUERY, attr)
    except OSError as e:
        if e.errno == 22:  # EINVAL: no TCX in this kernel
            return []
        raise
    (count,) = struct.unpack_from("=I", attr, 24)
    return list(ids[: min(count, 64)])


def prog_name(prog_id: int) -> str:
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("=I", attr, 0, prog_id)
    fd = _bpf(BPF_PROG_GET_FD_BY_ID, attr)
    try:
        info = ctypes.create_string_buffer(256)
        attr = ctypes.create_string_buffer(ATTR_SIZE)
        struct.pack_into("=IIQ", attr, 0, fd, len(info), ctypes.addressof(info))
        _bpf(BPF_OBJ_GET_INFO_BY_FD, attr)
        # struct bpf_prog_info: char name[16] at offset 64.
        return info.raw[64:80].split(b"\0")[0].decode()
    finally:
        os.close(fd)


def main() -> int:
    dev = sys.argv[1]
    for pid in tcx_prog_ids(socket.if_nametoindex(dev)):
        print("tcx", prog_name(pid))
    tc = subprocess.run(
        ["tc", "filter", "show", "dev", dev, "ingress"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for line in tc.splitlines():
        # "filter protocol all pref 30828 bpf chain 0 handle 0x786c1234 xlat.bpf.o:[tc] direct-action ... name xlat_ingress tag ..."
        words = line.split()
        if "name" in words and "handle" in words:
            print("tc", words[words.index("name") + 1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
