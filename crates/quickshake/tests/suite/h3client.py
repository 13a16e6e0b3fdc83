"""HTTP/3 test client on aioquic (a QUIC stack quickshake did not write), for the gateway_http3
tests; run with the project's .venv python (scripts/setup-envoy installs aioquic there).

  h3client.py requests HOST PORT SNI JSON   one connection, the requests of JSON (a list of
      {"method", "path", "body", "headers": [[k, v]]}) sent at once on their own streams;
      prints one JSON line: {"results": [{"status", "headers", "body", "len", "sha256",
      "t_half", "t_done"}], "alpn", "peer_serial" (the server certificate's serial, hex)};
      t_half and t_done are when (Unix time, seconds) half of the body and all of it had
      arrived. A request's "timeout" (seconds, default 10) bounds its wait.
      --progress N prints {"progress": STREAM, "bytes": B} as soon as a response's body has
      reached N bytes (once per stream), before the final line. --stall S: after that line,
      block for S seconds (no reads, no acknowledgements, no window updates), then exit.
      --connections N repeats that on N new connections one after another (the JSON line
      reports the last); --idle leaves without closing (no CONNECTION_CLOSE: the server's idle
      timeout must end it); --wait-close waits for the server to close the connection and
      reports its error code ("close_error_code"); --cert FILE --key FILE present a client
      certificate; --ticket FILE offers the session ticket saved there (the JSON line says
      whether the session was "resumed") and saves the newest ticket the server sends there;
      --may-fail reports a failed handshake as {"failed": reason, "close_error_code"}
      instead of exiting non-zero.
  h3client.py junk HOST PORT N              N hostile datagrams from one socket: well-formed
      Initial headers with undecryptable payloads, Initials in datagrams under 1200 bytes, and
      truncated long headers, in turn.
  h3client.py halfopen HOST PORT N          N valid client Initials (new connections) from one
      socket, never continued: N handshakes left in progress on the server.
  h3client.py foreign HOST PORT N           N short-header packets, each from a new socket (so
      spread over the workers' sockets), for connection IDs naming worker 0 or 1 in turn.
  h3client.py gso HOST PORT N               N truncated long headers (9 bytes each) in one
      GSO send (UDP_SEGMENT): the kernel delivers them to a GRO socket as one buffer; prints
      {"sent": N, "gso": whether this kernel took UDP_SEGMENT (else sent one by one)}.
"""

import asyncio
import hashlib
import json
import os
import pickle
import socket
import ssl
import sys
import time

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.waiters = {}
        self.results = {}
        self.terminated = None
        self.progress_at = None
        self.stall = None

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.terminated = event.error_code
            # Requests waiting on a connection the server closed fail now, with its code.
            for fut in self.waiters.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"closed with error code {event.error_code:#x}"))
            self.waiters.clear()
        for e in self.h3.handle_event(event):
            if not isinstance(e, (HeadersReceived, DataReceived)):
                continue
            r = self.results.setdefault(
                e.stream_id, {"status": None, "headers": {}, "body": b"", "progress": []}
            )
            if isinstance(e, HeadersReceived):
                for k, v in e.headers:
                    k, v = k.decode(), v.decode()
                    if k == ":status":
                        r["status"] = int(v)
                    else:
                        r["headers"][k] = v
            else:
                r["body"] += e.data
                r["progress"].append((time.time(), len(r["body"])))
                if self.progress_at is not None and not r.get("reported") and len(r["body"]) >= self.progress_at:
                    r["reported"] = True
                    print(json.dumps({"progress": e.stream_id, "bytes": len(r["body"])}), flush=True)
                    if self.stall is not None:
                        time.sleep(self.stall)
                        os._exit(0)
            if e.stream_ended and e.stream_id in self.waiters:
                self.waiters.pop(e.stream_id).set_result(r)

    async def request(self, authority, req):
        sid = self._quic.get_next_available_stream_id()
        body = req.get("body", "").encode()
        headers = [
            (b":method", req.get("method", "GET").encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", req.get("path", "/").encode()),
        ] + [(k.encode(), v.encode()) for k, v in req.get("headers", [])]
        self.h3.send_headers(sid, headers, end_stream=not body)
        if body:
            self.h3.send_data(sid, body, end_stream=True)
        fut = asyncio.get_running_loop().create_future()
        self.waiters[sid] = fut
        self.transmit()
        try:
            r = await asyncio.wait_for(fut, req.get("timeout", 10))
        except asyncio.TimeoutError:
            r = self.results.get(sid, {})
            got = len(r.get("body", b""))
            raise RuntimeError(f"stream {sid}: no end in time, {got} body bytes, status {r.get('status')}")
        total = len(r["body"])
        t_half = next((t for t, n in r["progress"] if 2 * n >= total), None)
        return {
            "sha256": hashlib.sha256(r["body"]).hexdigest(),
            "t_half": t_half,
            "t_done": r["progress"][-1][0] if r["progress"] else None,
            "status": r["status"],
            "headers": r["headers"],
            "len": len(r["body"]),
            "body": r["body"][:4096].decode("utf-8", "replace"),
        }


async def requests(host, port, sni, reqs, connections, idle, wait_close, opts):
    out = None
    for _ in range(connections):
        cfg = QuicConfiguration(
            is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE, server_name=sni
        )
        cfg.idle_timeout = 30.0
        if opts.get("cert"):
            cfg.load_cert_chain(opts["cert"], opts["key"])
        ticket_file = opts.get("ticket")
        if ticket_file and os.path.exists(ticket_file):
            with open(ticket_file, "rb") as f:
                cfg.session_ticket = pickle.load(f)

        def save_ticket(ticket):
            if ticket_file:
                with open(ticket_file, "wb") as f:
                    pickle.dump(ticket, f)

        if opts.get("may_fail"):
            try:
                out = await asyncio.wait_for(attempt(host, port, sni, reqs, cfg, save_ticket), 4)
            except Exception as e:  # noqa: BLE001: any failure is the answer here
                out = {"failed": repr(e)}
            print(json.dumps(out), flush=True)
            return
        async with connect(
            host, port, configuration=cfg, create_protocol=Client, session_ticket_handler=save_ticket
        ) as c:
            c.progress_at, c.stall = opts.get("progress"), opts.get("stall")
            authority = f"{sni}:{port}"
            results = await asyncio.gather(*(c.request(authority, r) for r in reqs))
            cert = getattr(c._quic.tls, "_peer_certificate", None)
            out = {
                "results": results,
                "alpn": c._quic.tls.alpn_negotiated,
                "peer_serial": format(cert.serial_number, "x") if cert is not None else None,
                "resumed": bool(c._quic.tls.session_resumed),
            }
            if idle:
                print(json.dumps(out), flush=True)
                os._exit(0)
            if wait_close:
                await asyncio.wait_for(c.wait_closed(), 10)
                out["close_error_code"] = c.terminated
    print(json.dumps(out), flush=True)


async def attempt(host, port, sni, reqs, cfg, save_ticket):
    """One connection and its requests; raises when the handshake or a request fails."""
    async with connect(
        host, port, configuration=cfg, create_protocol=Client, session_ticket_handler=save_ticket,
        wait_connected=True,
    ) as c:
        results = await asyncio.wait_for(
            asyncio.gather(*(c.request(f"{sni}:{port}", r) for r in reqs)), 5
        )
        return {"results": results, "resumed": bool(c._quic.tls.session_resumed)}


def junk(host, port, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(n):
        dcid, scid = os.urandom(8), os.urandom(8)
        # Long header, Initial, version 1, DCID, SCID, empty token, length 1232.
        head = bytes([0xC3]) + b"\x00\x00\x00\x01" + bytes([8]) + dcid + bytes([8]) + scid + b"\x00\x44\xd0"
        kind = i % 3
        if kind == 0:
            data = head + os.urandom(1232)
        elif kind == 1:
            data = head + os.urandom(200)
        else:
            data = head[:9]
        s.sendto(data, (host, port))
    print(json.dumps({"sent": n}), flush=True)


def foreign(host, port, n):
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        dcid = bytes([i % 2]) + os.urandom(15)
        s.sendto(bytes([0x40]) + dcid + os.urandom(40), (host, port))
        s.close()
    print(json.dumps({"sent": n}), flush=True)


def gso(host, port, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Long header, Initial, version 1, DCID length 8, then cut: not a QUIC packet.
    data = bytes([0xC3]) + b"\x00\x00\x00\x01" + bytes([8]) + b"\x01\x02\x03"
    try:
        s.setsockopt(socket.SOL_UDP, 103, len(data))  # UDP_SEGMENT
        s.sendto(data * n, (host, port))
        took = True
    except OSError:
        for _ in range(n):
            s.sendto(data, (host, port))
        took = False
    print(json.dumps({"sent": n, "gso": took}), flush=True)


def halfopen(host, port, n):
    import time

    from aioquic.quic.connection import QuicConnection

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(n):
        cfg = QuicConfiguration(
            is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE, server_name="localhost"
        )
        conn = QuicConnection(configuration=cfg)
        now = time.time()
        conn.connect((host, port), now=now)
        for data, addr in conn.datagrams_to_send(now=now):
            s.sendto(data, addr)
    print(json.dumps({"sent": n}), flush=True)


def main():
    mode = sys.argv[1]
    modes = {"junk": junk, "foreign": foreign, "halfopen": halfopen, "gso": gso}
    if mode in modes:
        modes[mode](sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    args = sys.argv[2:]
    connections = 1
    if "--connections" in args:
        i = args.index("--connections")
        connections = int(args[i + 1])
        del args[i : i + 2]
    opts = {}
    for flag in ("--cert", "--key", "--ticket"):
        if flag in args:
            i = args.index(flag)
            opts[flag[2:]] = args[i + 1]
            del args[i : i + 2]
    for flag, kind in (("--progress", int), ("--stall", float)):
        if flag in args:
            i = args.index(flag)
            opts[flag[2:]] = kind(args[i + 1])
            del args[i : i + 2]
    idle, wait_close = "--idle" in args, "--wait-close" in args
    opts["may_fail"] = "--may-fail" in args
    args = [a for a in args if a not in ("--idle", "--wait-close", "--may-fail")]
    host, port, sni, reqs = args[0], int(args[1]), args[2], json.loads(args[3])
    asyncio.run(requests(host, port, sni, reqs, connections, idle, wait_close, opts))


if __name__ == "__main__":
    main()
