"""A small HTTP/1.1 load client that records the round-trip time of every request.

Run in the client's namespace (``python -m lab.workloads.httpclient ...``).
``--concurrency`` workers (asyncio tasks) each repeat transactions until
``--duration`` seconds have passed (or ``--requests`` per worker are done). A
transaction is: open a TCP connection (new one each time unless
``--keepalive``), send the request (``GET``, or ``POST`` with ``--body`` bytes),
read the status line, the headers and exactly ``Content-Length`` bytes of body.
Its RTT is the time from before ``connect`` (or the request, with keep-alive)
to the last byte of the response. Prints one JSON object: per-request RTTs
(ms, in completion order), errors by kind, bytes, wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time


async def _transaction(reader, writer, req: bytes, body: bytes) -> tuple[int, int]:
    writer.write(req + body)
    await writer.drain()
    status_line = await reader.readline()
    parts = status_line.split()
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
        raise ConnectionError(f"bad status line {status_line[:60]!r}")
    status = int(parts[1])
    length = None
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    if length is None:
        raise ConnectionError("no Content-Length")
    await reader.readexactly(length)
    return status, length


async def worker(args, deadline: float, out: dict) -> None:
    host_hdr = f"[{args.host}]" if ":" in args.host else args.host
    body = b"x" * args.body
    method = "POST" if args.body else "GET"
    conn = "keep-alive" if args.keepalive else "close"
    req = (
        f"{method} {args.path} HTTP/1.1\r\nHost: {host_hdr}\r\nUser-Agent: xlat-lab\r\n"
        f"Connection: {conn}\r\n"
        + (
            f"Content-Length: {len(body)}\r\nContent-Type: application/octet-stream\r\n"
            if body
            else ""
        )
        + "\r\n"
    ).encode()
    local = (args.local, 0) if args.local else None
    reader = writer = None
    done = 0
    while time.monotonic() < deadline and (not args.requests or done < args.requests):
        t0 = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(args.host, args.port, local_addr=local),
                    args.timeout,
                )
            status, n = await asyncio.wait_for(
                _transaction(reader, writer, req, body), args.timeout
            )
            rtt = (time.perf_counter() - t0) * 1000
            out["rtt_ms"].append(round(rtt, 3))
            out["bytes"] += n
            out["status"][str(status)] = out["status"].get(str(status), 0) + 1
        except (
            TimeoutError,
            OSError,
            asyncio.IncompleteReadError,
            ConnectionError,
            ValueError,
        ) as e:
            kind = type(e).__name__
            out["errors"][kind] = out["errors"].get(kind, 0) + 1
            if writer is not None:
                writer.close()
            writer = None
            await asyncio.sleep(0.01)
            done += 1
            continue
        done += 1
        if not args.keepalive:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
            writer = None
    if writer is not None:
        writer.close()


async def main_async(args) -> dict:
    out = {"rtt_ms": [], "errors": {}, "status": {}, "bytes": 0}
    t0 = time.monotonic()
    deadline = t0 + args.duration
    await asyncio.gather(
        *(worker(args, deadline, out) for _ in range(args.concurrency))
    )
    out["wall_s"] = round(time.monotonic() - t0, 3)
    out["concurrency"] = args.concurrency
    out["path"] = args.path
    out["request_body"] = args.body
    out["keepalive"] = args.keepalive
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--path", default="/")
    ap.add_argument("--body", type=int, default=0, help="POST this many bytes (0: GET)")
    ap.add_argument("--local", default="", help="source address to bind")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument(
        "--requests", type=int, default=0, help="per worker (0: until --duration)"
    )
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--keepalive", action="store_true")
    args = ap.parse_args(argv)
    if args.concurrency < 1:
        ap.error("--concurrency: must be >= 1")
    print(json.dumps(asyncio.run(main_async(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
