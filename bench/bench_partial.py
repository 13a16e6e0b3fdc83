#!/usr/bin/env python3
"""Partial-load benchmark (called by `bench/run --partial`; see docs/benchmarks.md, "Partial load").

Gateways spend most of their life below saturation, where the CPU a batching key provider saves
depends on how full its batches get and what it waits for them (issue 32). RSA-2048, TLS 1.3,
every request a new connection (a full handshake), X25519 unless stated:

1. Open loop, one server core: Envoy 1.40.0 (inline key), quickshake with the seed `cryptomb`
   config (10 ms `poll_delay`), with `quickshake.batching` in budget mode (its default budget,
   and `max_batch_delay: 10ms`), in adaptive mode, and with the inline key (zero budget), each
   pinned to CPU 0 with one worker; quickshake-bench `--rate R` pinned to CPU 1. R: 300, 600,
   1,000/s and 20/40/60% of Envoy 1.40.0's saturated rate (64 clients, closed loop), measured
   first in the same run. Interleaved rounds: every server at every rate, then again.
   X25519MLKEM768 at 600/s beside it for Envoy, the default budget and the inline key.
2. One closed-loop client: the default budget's handshake latency against the inline key's.
3. Two workers (`--concurrency 2`, server and client both on CPUs 0-1, process CPU accounting),
   600/s in total: budget mode with `queues: shared` (its default) against `queues: per_worker`.

Each point also records the provider's stats (`listener.*.cryptomb.*`: batch-size histograms,
`batch_delay_ms`, `budget_exceeded`, counters) read from the admin `/stats/prometheus` before and
after it (warm-up + window) and the difference kept, and CPU 0's steal share (`/proc/stat`),
which nothing else reads. Servers, process groups, pid files, the quickshake-bench call and the
machine's description are bench.py's; this file says what runs, in which order, and reads those
two things. A server that fails to start (a config the binary does not know yet) is recorded
(`partial-start`) and skipped.
"""
import http.client
import json
import os
import re
import time
import urllib.request

from bench import (CLIENT_CPU, SERVER_CPU, Runner, Server, arguments, background, finish, log,
                   median, meta)
from report_partial import summary

CERT = "rsa2048"
TLS = "1.3"
ENVOY = "envoy-1.40"
BUDGET = "quickshake-budget"
INLINE = "quickshake-inline"
# One core, one worker each: name -> (kind, provider); the order is the order within a round.
ONE_CORE = {
    ENVOY: ("envoy", None),
    "quickshake-cryptomb-10ms": ("quickshake", "cryptomb-10ms"),
    BUDGET: ("quickshake", "budget"),
    "quickshake-budget-10ms": ("quickshake", "budget-10ms"),
    "quickshake-adaptive": ("quickshake", "adaptive"),
    INLINE: ("quickshake", "inline"),
}
# Two workers on CPUs 0-1 with the client: queues shared across workers (budget mode's default)
# against one queue per worker.
TWO_WORKERS = {
    "quickshake-budget-w2-shared": ("quickshake", "budget"),
    "quickshake-budget-w2-per-worker": ("quickshake", "budget-per-worker"),
}
MLKEM = "X25519MLKEM768"
PROFILES = {
    "default": dict(duration=4, warmup=1, rounds=3, rates=[300, 600, 1000],
                    fractions=[0.2, 0.4, 0.6], saturation_clients=64, mlkem_rate=600,
                    mlkem_servers=[ENVOY, BUDGET, INLINE], one_client=[BUDGET, INLINE],
                    two_workers_rate=600),
    # Development: 1 round, 2 rates, 3 s points.
    "quick": dict(duration=3, warmup=1, rounds=1, rates=[600], fractions=[0.4],
                  saturation_clients=64, mlkem_rate=600, mlkem_servers=[ENVOY, BUDGET],
                  one_client=[BUDGET, INLINE], two_workers_rate=600),
}
METRIC = re.compile(r'^envoy_listener_cryptomb_(\w+)\{([^}]*)\} (\S+)$')


def provider_stats(admin_port):
    """The provider's counters and histograms (cumulative buckets) on the Prometheus page:
    {name: value} and {name: {"buckets": {le: n}, "sum": x, "count": n}}; None when unreadable."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/stats/prometheus", timeout=5) as r:
            text = r.read().decode()
    except (OSError, http.client.HTTPException):
        return None
    hist_names = {line.split()[2][len("envoy_listener_cryptomb_"):] for line in text.splitlines()
                  if line.startswith("# TYPE envoy_listener_cryptomb_") and line.endswith(" histogram")}
    counters, hists = {}, {}
    for line in text.splitlines():
        m = METRIC.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2), float(m.group(3))
        base = next((h for h in hist_names if name in (f"{h}_bucket", f"{h}_sum", f"{h}_count")), None)
        if base is None:
            counters[name] = counters.get(name, 0) + value
            continue
        h = hists.setdefault(base, {"buckets": {}, "sum": 0.0, "count": 0})
        if name.endswith("_bucket"):
            le = re.search(r'le="([^"]+)"', labels).group(1)
            le = "+Inf" if le == "+Inf" else f"{float(le):g}"
            h["buckets"][le] = h["buckets"].get(le, 0) + value
        else:
            h[name[len(base) + 1:]] += value
    return {"counters": counters, "histograms": hists}


def stats_diff(a, b):
    """b - a: counters, and per histogram its disjoint bucket counts (batches or operations
    that fell in each bucket during the point), count, sum and mean."""
    counters = {k: v - a["counters"].get(k, 0) for k, v in b["counters"].items()}
    hists = {}
    for name, h in b["histograms"].items():
        h0 = a["histograms"].get(name, {"buckets": {}, "sum": 0.0, "count": 0})
        cum = [(le, n - h0["buckets"].get(le, 0)) for le, n in h["buckets"].items()]
        cum.sort(key=lambda x: float("inf") if x[0] == "+Inf" else float(x[0]))
        disjoint, prev = {}, 0
        for le, n in cum:
            if n - prev:
                disjoint[le] = round(n - prev)
            prev = n
        count = round(h["count"] - h0["count"])
        total = h["sum"] - h0["sum"]
        hists[name] = {"buckets": disjoint, "count": count, "sum": round(total, 3),
                       "mean": round(total / count, 3) if count else None}
    return {"counters": {k: round(v) for k, v in counters.items()}, "histograms": hists}


def steal_ticks(cpu):
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                return v[7] if len(v) > 7 else 0, sum(v)
    return 0, 0


def probe(srv):
    """Runner.bench's probe: the provider's stats and CPU 0's steal around one point."""
    def start():
        s0 = provider_stats(srv.admin_port) if srv.admin_port else None
        st0 = steal_ticks(SERVER_CPU)

        def done():
            st1 = steal_ticks(SERVER_CPU)
            out = {"steal_cpu0": round((st1[0] - st0[0]) / (st1[1] - st0[1]), 4) if st1[1] > st0[1] else None}
            s1 = provider_stats(srv.admin_port) if srv.alive() and srv.admin_port else None
            if s0 and s1:
                out["provider_stats"] = stats_diff(s0, s1)
            return out
        return done
    return start


def start_all(specs, run_dir, bins, run, phase, **kw):
    """Starts every server of `specs`; one that fails is recorded (`partial-start`) and left out."""
    servers = {}
    for i, name in enumerate(specs):
        s = Server(name, CERT, i, run_dir, bins, phase=phase, spec=specs[name], **kw)
        try:
            s.start()
            servers[name] = s
        except RuntimeError as e:
            log(f"SKIP {e}")
            run.record(dict(section="partial-start", server=name, kind=specs[name][0],
                            provider=specs[name][1], cert=CERT, tls=None, clients=None, rate=None,
                            mode=None, rep=0, workers=kw.get("workers", 1), ok=False,
                            failures=[str(e)]))
    time.sleep(1.0)
    return servers


def stop_all(servers):
    for s in servers.values():
        s.stop()
    servers.clear()


def main():
    ap = arguments(("quickshake", "bench", "envoy"))
    ap.add_argument("--quick", action="store_true", help="1 round, 2 rates, 3 s points")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 3)")
    ap.add_argument("--duration", type=int, help="seconds per point (default 4, after 1 s warm-up)")
    args = ap.parse_args()
    args.profile = "partial-quick" if args.quick else "partial"
    prof = dict(PROFILES["quick" if args.quick else "default"])
    prof.update({k: v for k, v in (("rounds", args.rounds), ("duration", args.duration)) if v})
    # meta() describes every peer of the main run; only these three run here.
    bins = {b: getattr(args, b) for b in ("quickshake", "bench", "envoy")}
    bins.update(nginx="true", haproxy="true", fortio="true", floor="true")
    os.makedirs(args.run_dir, exist_ok=True)
    m = meta(args, bins)
    for k in ("nginx", "haproxy", "fortio", "floor"):
        m["versions"].pop(k, None)
    m["settings"].update(prof, groups="X25519", servers=list(ONE_CORE), two_workers=list(TWO_WORKERS))
    with open(args.out, "w") as f:
        f.write(json.dumps(m, sort_keys=True) + "\n")
    run = Runner(args, prof, bins, args.out)
    rounds = prof["rounds"]
    servers = {}
    try:
        servers = start_all(ONE_CORE, args.run_dir, bins, run, phase=0)
        log(f"background CPU busy (idle servers): {background(bins['bench'])}")

        def point(name, section, rep, **kw):
            s = servers[name]
            return run.bench(s, section, TLS, rep=rep, probe=probe(s), **kw)

        # Envoy 1.40.0 saturated: the rates below are fractions of it.
        peak = None
        if ENVOY in servers:
            sat = [point(ENVOY, "partial-saturated", rep, clients=prof["saturation_clients"])
                   for rep in range(1, rounds + 1)]
            peak = median(r.get("handshakes_per_sec") for r in sat if r.get("ok"))
        fractions = [max(20, round(peak * f / 10) * 10) for f in prof["fractions"]] if peak else []
        if not peak:
            log("Envoy 1.40.0 gave no saturated rate: fixed rates only")
        rates = sorted(set(prof["rates"]) | set(fractions))
        log(f"Envoy 1.40.0 saturated: {peak and round(peak)} hs/s; offered rates {rates}")
        for rep in range(1, rounds + 1):
            for rate in rates:
                for name in servers:
                    point(name, "partial", rep, rate=rate)
            for name in prof["mlkem_servers"]:
                if name in servers:
                    point(name, "partial-mlkem", rep, rate=prof["mlkem_rate"], group=MLKEM)
            for name in prof["one_client"]:
                if name in servers:
                    point(name, "partial-one-client", rep, clients=1)
        stop_all(servers)

        # Two workers, server and client sharing CPUs 0-1: process CPU only.
        both = f"{SERVER_CPU},{CLIENT_CPU}"
        servers = start_all(TWO_WORKERS, args.run_dir, bins, run, phase=1,
                            cpus=both, workers=2)
        for rep in range(1, rounds + 1):
            for name in servers:
                point(name, "partial-two-workers", rep, rate=prof["two_workers_rate"],
                      client_cpus=both, server_cpu=None)
    finally:
        stop_all(servers)
    finish(run, bins["bench"], args.out, summary, expected=("partial-start",))


if __name__ == "__main__":
    main()
