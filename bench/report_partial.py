"""The "Partial load" section of docs/benchmarks.md, from bench/results/partial.jsonl (written by
`bench/run --partial`, bench/bench_partial.py): server CPU per handshake and handshake latency at
open-loop rates below saturation, Envoy 1.40.0 against quickshake's key paths, the provider's
batch sizes and waits, one closed-loop client, and two workers with shared or per-worker queues.
Ranked by the server's process CPU (at low rates CPU 0's idle background is spread over few
handshakes); CPU 0's busy time per handshake beside it. A server that did not start gets a row
saying why, so the table says what is missing instead of leaving it out."""
import os
import re

from report_data import Results, background_note, cpu_name, fmt

PROCESS = "server_process_cpu_us_per_handshake"
CPU0 = "server_cpu_us_per_handshake"
ENVOY = "envoy-1.40"
ROWS = [
    (ENVOY, "Envoy 1.40.0, inline key"),
    ("quickshake-cryptomb-10ms", "quickshake, seed `cryptomb` config (10 ms `poll_delay`)"),
    ("quickshake-budget", "quickshake, `quickshake.batching` default budget"),
    ("quickshake-budget-10ms", "quickshake, `quickshake.batching` `max_batch_delay: 10ms`"),
    ("quickshake-adaptive", "quickshake, `quickshake.batching` `batching: adaptive`"),
    ("quickshake-inline", "quickshake, inline key (zero budget)"),
]
TWO = [
    ("quickshake-budget-w2-shared", "`quickshake.batching` budget, `queues: shared` (default)"),
    ("quickshake-budget-w2-per-worker", "`quickshake.batching` budget, `queues: per_worker`"),
]
LABEL = dict(ROWS + TWO)
SIZES = [str(i) for i in range(1, 9)]
DEFAULT_BUDGET_MS = 2.0  # the provider's default max_batch_delay (keyprovider config.rs DEFAULT_MAX_BATCH_DELAY)


def pts(R, section, server, **kw):
    return [r for r in R.points if r.get("section") == section and r.get("server") == server
            and all(r.get(k) == v for k, v in kw.items())]


def hist(rows, name):
    """A provider histogram summed over runs: ({bucket: n}, count, sum), or None."""
    buckets, count, total, seen = {}, 0, 0.0, False
    for r in rows:
        h = ((r.get("provider_stats") or {}).get("histograms") or {}).get(name)
        if not h:
            continue
        seen = True
        for le, n in h["buckets"].items():
            buckets[le] = buckets.get(le, 0) + n
        count += h["count"]
        total += h["sum"]
    return (buckets, count, total) if seen else None


def counter(rows, name):
    vals = [((r.get("provider_stats") or {}).get("counters") or {}).get(name) for r in rows]
    vals = [v for v in vals if v is not None]
    return sum(vals) if vals else None


def bound(buckets, q):
    """Upper bound of the bucket holding quantile q (`+Inf` past the last bound)."""
    total = sum(buckets.values())
    if not total:
        return None
    acc = 0
    for le in sorted(buckets, key=lambda x: float("inf") if x == "+Inf" else float(x)):
        acc += buckets[le]
        if acc >= q * total:
            return le
    return "+Inf"


def batch_cells(rows):
    """(mean RSA batch size, batch_delay_ms mean / p99 bound, budget_exceeded)."""
    b = hist(rows, "rsa_queue_sizes")
    size = fmt(b[2] / b[1], 2) if b and b[1] else "–"
    d = hist(rows, "batch_delay_ms")
    delay = (f"{fmt(d[2] / d[1], 2)} / ≤{bound(d[0], 0.99)}" if d and d[1] else "–")
    ex = counter(rows, "budget_exceeded")
    return size, delay, fmt(ex)


def sizes_cell(rows, name="rsa_queue_sizes"):
    """Share of batches of each size, e.g. `1: 62% · 2: 25% · 3: 13%`."""
    b = hist(rows, name)
    if not b or not b[1]:
        return "–"
    n = sum(b[0].values())
    def share(k):
        x = b[0][k] / n
        return "<1%" if x < 0.005 else f"{x:.0%}"
    return " · ".join(f"{le}: {share(le)}" for le in SIZES + ["+Inf"] if b[0].get(le))


def brief(text, n=160):
    """The reason in a start failure: the config error after its field path, log colours removed."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", " ".join(text.split()))
    m = re.search(r"error initializing configuration '[^']*': (.*)", text)
    if m:
        text = m.group(1)
        text = text[text.rfind("typed_config.") + len("typed_config."):] if "typed_config." in text else text
    return text[:n]


def refusal(R, server):
    r = next((r for r in R.points if r.get("section") == "partial-start" and r.get("server") == server), None)
    return brief(" ".join(r.get("failures") or [])) if r else None


def rates_of(R):
    return sorted({r["rate"] for r in R.points if r.get("section") == "partial" and r.get("rate")})


def summary(path):
    """Console lines for bench_partial: the CPU, then process CPU per handshake per rate."""
    R = Results(path)
    lines = [f"CPU: {cpu_name(R.meta, flags=False)}"
             f"{'; noisy run: other jobs kept the cores busy' if R.noisy else ''}"]
    for rate in rates_of(R):
        cells = []
        for name, _ in ROWS:
            a = R.agg(pts(R, "partial", name, rate=rate))
            if a["rows"]:
                cells.append(f"{name} {fmt(a[PROCESS])} us (p99 {fmt(a['hs_p99_ms'], 1)} ms)")
        lines.append(f"{rate}/s: " + "; ".join(cells))
    for name, _ in ROWS + TWO:
        why = refusal(R, name)
        if why:
            lines.append(f"{name}: did not start: {why}")
    return lines


def partial_section(out, results_path, img):
    path = os.path.join(os.path.dirname(results_path), "partial.jsonl")
    if not os.path.exists(path):
        return
    R = Results(path)
    meta, st = R.meta, R.meta.get("settings", {})
    out.append("## Partial load: CPU per handshake below saturation (RSA-2048, open loop)\n")
    out.append(f"Measured by `bench/run --partial` (profile `{meta.get('profile')}`) on {meta.get('date')}, "
               f"{cpu_name(meta)}; a separate run from the tables above, so compare ratios within this "
               "section only.\n")
    if R.noisy:
        out.append(f"> **Provisional figures.** Other jobs kept this machine busy ({background_note(R)}). "
                   "Replace with a quiet run of `bench/run --partial`.\n")
    sat = R.agg(pts(R, "partial-saturated", ENVOY))
    peak = sat["handshakes_per_sec"]
    steal = [r.get("steal_cpu0") for r in R.points if isinstance(r.get("steal_cpu0"), (int, float))]
    out.append(
        f"- Every server pinned to CPU {st.get('server_cpu')} with one worker, `quickshake-bench` "
        f"pinned to CPU {st.get('client_cpu')}; TLS 1.3, key exchange **X25519** unless stated, every "
        "request a new TCP+TLS connection (a full handshake; no tickets, no session cache).\n"
        "- Open loop (`--rate R`): new connections on a fixed timetable whatever the server's pace. "
        f"R: {', '.join(fmt(x) for x in st.get('rates', []))}/s and "
        f"{', '.join(f'{x:.0%}' for x in st.get('fractions', []))} of Envoy 1.40.0's saturated rate "
        f"({st.get('saturation_clients')} clients, closed loop, measured first in this run: "
        f"**{fmt(peak)} handshakes/s**, runs {' · '.join(fmt(r.get('handshakes_per_sec')) for r in sat['rows'])}).\n"
        f"- Interleaved rounds: {st.get('rounds')} (every server at every rate, then again), "
        f"{st.get('duration')} s per point after {st.get('warmup')} s of warm-up; figures are medians "
        "over the rounds, each round's figure listed.\n"
        "- *process µs/hs*: the server's process-group CPU (utime+stime, all threads) over the "
        "handshakes of the window (the ranking figure); *CPU-0 µs/hs*: CPU 0's busy ticks over the "
        "server's `ssl.handshake` count. *vs Envoy*: Envoy 1.40.0's process µs/hs over the row's "
        "(above 1: cheaper than Envoy). Handshake latency: the client's TLS handshake time.\n"
        "- Provider stats (`listener.*.cryptomb.*` on `/stats/prometheus`, read before and after "
        "each point, warm-up included, differences summed over rounds): *batch*: RSA operations per "
        "batch (`rsa_queue_sizes`); *wait ms*: `batch_delay_ms`, each operation's wait from queueing "
        "to its batch starting, mean / the bucket bound holding the 99th percentile; *exceeded*: "
        "`budget_exceeded`." + (f" CPU 0 steal during the points: up to {max(steal):.0%}." if steal else "") + "\n")
    rates = rates_of(R)
    envoy_at = {rate: R.agg(pts(R, "partial", ENVOY, rate=rate)) for rate in rates}
    out.append("| offered /s | server | process µs/hs | CPU-0 µs/hs | vs Envoy | achieved hs/s | "
               "handshake p50 / p99 ms | batch | wait ms | exceeded | runs (process µs/hs) |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    curves = {}
    missing = []
    for rate in rates:
        e = envoy_at[rate][PROCESS]
        for name, label in ROWS:
            rows = pts(R, "partial", name, rate=rate)
            if not rows:
                if rate == rates[0] and refusal(R, name):
                    missing.append((label, refusal(R, name)))
                continue
            a = R.agg(rows)
            curves.setdefault(name, []).append((rate, a))
            size, delay, ex = batch_cells(a["rows"])
            ratio = f"{e / a[PROCESS]:.2f}x" if e and a[PROCESS] else "–"
            runs = " · ".join(fmt(r.get(PROCESS)) for r in a["rows"]) + (f", {a['failed']} failed" if a["failed"] else "")
            out.append(f"| {fmt(rate)} | {label} | **{fmt(a[PROCESS])}** | {fmt(a[CPU0])} | {ratio} | "
                       f"{fmt(a['handshakes_per_sec'])} | {fmt(a['hs_p50_ms'], 1)} / {fmt(a['hs_p99_ms'], 1)} | "
                       f"{size} | {delay} | {ex} | {runs} |")
    for label, why in missing:
        out.append(f"| – | {label} | not measured: did not start ({why}) | | | | | | | | |")
    out.append("")
    if curves:
        plot(curves, peak, os.path.join(img, "partial-load.png"), cpu_name(meta, flags=False))
        out.append("![CPU per handshake against offered load](img/partial-load.png)\n")

    batching = [n for n, _ in ROWS if n.startswith("quickshake-") and n != "quickshake-inline"]
    hrows = []
    for rate in rates:
        for name in batching:
            rows = [r for r in pts(R, "partial", name, rate=rate) if r.get("ok")]
            if hist(rows, "rsa_queue_sizes"):
                hrows.append(f"| {fmt(rate)} | {LABEL[name]} | {sizes_cell(rows)} | "
                             f"{sizes_cell(rows, 'x25519_queue_sizes')} |")
    if hrows:
        out.append("Batch sizes: the share of batches of each size (`rsa_queue_sizes`, "
                   "`x25519_queue_sizes`), all rounds together.\n")
        out.append("| offered /s | server | RSA batches by size | X25519 batches by size |")
        out.append("|---:|---|---|---|")
        out.extend(hrows)
        out.append("")

    mlkem = [(name, label, R.agg(pts(R, "partial-mlkem", name))) for name, label in ROWS]
    mlkem = [x for x in mlkem if x[2]["rows"]]
    if mlkem:
        rate = mlkem[0][2]["rows"][0].get("rate")
        e = next((a[PROCESS] for n, _, a in mlkem if n == ENVOY), None)
        out.append(f"### X25519MLKEM768 at {fmt(rate)}/s\n")
        out.append("The same points with `--groups X25519MLKEM768` (the client offers only that group; "
                   "*group*: what the handshakes negotiated).\n")
        out.append("| server | group | process µs/hs | CPU-0 µs/hs | vs Envoy | handshake p50 / p99 ms | batch | runs (process µs/hs) |")
        out.append("|---|---|---:|---:|---:|---:|---:|---|")
        for name, label, a in mlkem:
            ratio = f"{e / a[PROCESS]:.2f}x" if e and a[PROCESS] else "–"
            group = ", ".join(sorted({(r.get("negotiated") or {}).get("group") or "–" for r in a["rows"]}))
            out.append(f"| {label} | {group} | **{fmt(a[PROCESS])}** | {fmt(a[CPU0])} | {ratio} | "
                       f"{fmt(a['hs_p50_ms'], 1)} / {fmt(a['hs_p99_ms'], 1)} | {batch_cells(a['rows'])[0]} | "
                       f"{' · '.join(fmt(r.get(PROCESS)) for r in a['rows'])} |")
        out.append("")

    one = [(name, label, R.agg(pts(R, "partial-one-client", name))) for name, label in ROWS]
    one = [x for x in one if x[2]["rows"]]
    if one:
        out.append("### One closed-loop client\n")
        out.append("`-c 1`: one connection at a time, each a full handshake; a lone handshake must not "
                   "wait for a batch.\n")
        out.append("| server | handshake p50 / p99 ms | request p50 / p99 ms | hs/s | process µs/hs | wait ms | runs (hs p50 ms) |")
        out.append("|---|---:|---:|---:|---:|---:|---|")
        for name, label, a in one:
            out.append(f"| {label} | **{fmt(a['hs_p50_ms'], 2)}** / {fmt(a['hs_p99_ms'], 2)} | "
                       f"{fmt(a['req_p50_ms'], 2)} / {fmt(a['req_p99_ms'], 2)} | {fmt(a['handshakes_per_sec'])} | "
                       f"{fmt(a[PROCESS])} | {batch_cells(a['rows'])[1]} | "
                       f"{' · '.join(fmt(r.get('hs_p50_ms'), 2) for r in a['rows'])} |")
        out.append("")

    two = [(name, label, R.agg(pts(R, "partial-two-workers", name))) for name, label in TWO]
    if any(a["rows"] for _, _, a in two) or any(refusal(R, n) for n, _ in TWO):
        rate = st.get("two_workers_rate")
        out.append(f"### Two workers, {fmt(rate)} handshakes/s in total\n")
        out.append("quickshake `--concurrency 2`, server and `quickshake-bench` both on CPUs 0-1 (not "
                   "pinned apart), so only the server's process CPU counts. `queues: shared`: one queue "
                   "per provider fed by both workers; `queues: per_worker`: Envoy's layout, each worker's "
                   "queue sees half the traffic.\n")
        out.append("| server | process µs/hs | achieved hs/s | handshake p50 / p99 ms | batch | RSA batches by size | wait ms | exceeded | runs (process µs/hs) |")
        out.append("|---|---:|---:|---:|---:|---|---:|---:|---|")
        for name, label, a in two:
            if not a["rows"]:
                out.append(f"| {label} | not measured: {refusal(R, name) or 'no successful run'} | | | | | | | |")
                continue
            size, delay, ex = batch_cells(a["rows"])
            out.append(f"| {label} | **{fmt(a[PROCESS])}** | {fmt(a['handshakes_per_sec'])} | "
                       f"{fmt(a['hs_p50_ms'], 1)} / {fmt(a['hs_p99_ms'], 1)} | {size} | {sizes_cell(a['rows'])} | "
                       f"{delay} | {ex} | {' · '.join(fmt(r.get(PROCESS)) for r in a['rows'])} |")
        out.append("")

    goals = goal_lines(R, rates)
    if goals:
        out.append("Issue 32's bars, read from the tables above:\n")
        out.extend(f"- {g}" for g in goals)
        out.append("")

    cmds = {}
    for r in R.points:
        if r.get("server_command"):
            cmds.setdefault(r["server"], r["server_command"])
    loads = {}
    for r in R.points:
        if r.get("command"):
            loads.setdefault(r["section"], r["command"])
    out.append("Servers and load (one example per kind of point; raw results with every command: "
               "`bench/results/partial.jsonl`, configs rendered into `run/bench/`):\n")
    out.append("```")
    out.extend(list(cmds.values()) + list(loads.values()))
    out.append("```\n")


def goal_lines(R, rates):
    """Issue 32's done-when comparisons, each as measured (or why it is not)."""
    def at(name, rate, section="partial"):
        a = R.agg(pts(R, section, name, rate=rate) if rate else pts(R, section, name))
        return a if a["rows"] else None
    lines = []
    for rate in (600,):
        e, b, i = at(ENVOY, rate), at("quickshake-budget", rate), at("quickshake-inline", rate)
        if e and b and e[PROCESS] and b[PROCESS]:
            x = e[PROCESS] / b[PROCESS]
            lines.append(f"{rate}/s, default budget vs Envoy 1.40.0: {x:.2f}x less process CPU per "
                         f"handshake (bar 1.6x: {'met' if x >= 1.6 else 'not met'})")
        if b and i and b["hs_p99_ms"] is not None and i["hs_p99_ms"] is not None:
            limit = i["hs_p99_ms"] + DEFAULT_BUDGET_MS + 1
            lines.append(f"{rate}/s, default budget handshake p99 {fmt(b['hs_p99_ms'], 1)} ms vs the inline "
                         f"key's {fmt(i['hs_p99_ms'], 1)} ms + {DEFAULT_BUDGET_MS:g} ms budget + 1 ms "
                         f"(bar: {'met' if b['hs_p99_ms'] <= limit else 'not met'})")
    for rate in (300, 600, 1000):
        if rate not in rates:
            continue
        t, s = at("quickshake-budget-10ms", rate), at("quickshake-cryptomb-10ms", rate)
        if t and s and t[PROCESS] and s[PROCESS] and t["hs_p50_ms"] is not None and s["hs_p50_ms"] is not None:
            c = t[PROCESS] / s[PROCESS] - 1
            cpu_bar = f" (bar within 10%: {'met' if abs(c) <= 0.10 else 'not met'})" if rate == 600 else ""
            p50_bar = f" (bar lower: {'met' if t['hs_p50_ms'] < s['hs_p50_ms'] else 'not met'})" if rate == 600 else ""
            lines.append(f"{rate}/s, 10 ms budget vs the seed's 10 ms timer: process CPU {c:+.0%}{cpu_bar}, "
                         f"handshake p50 {fmt(t['hs_p50_ms'], 1)} vs {fmt(s['hs_p50_ms'], 1)} ms{p50_bar}")
    b, i = at("quickshake-budget", None, "partial-one-client"), at("quickshake-inline", None, "partial-one-client")
    if b and i and b["hs_p50_ms"] and i["hs_p50_ms"]:
        x = b["hs_p50_ms"] / i["hs_p50_ms"] - 1
        lines.append(f"one client, default budget vs inline key: handshake p50 {x:+.0%} "
                     f"(bar within 10%: {'met' if x <= 0.10 else 'not met'})")
    sh, pw = at(TWO[0][0], None, "partial-two-workers"), at(TWO[1][0], None, "partial-two-workers")
    if sh and pw and sh[PROCESS] and pw[PROCESS]:
        lines.append(f"two workers: shared queues {fmt(sh[PROCESS])} vs per-worker {fmt(pw[PROCESS])} "
                     f"process µs/hs ({pw[PROCESS] / sh[PROCESS] - 1:+.0%} for per-worker)")
    if not lines:
        lines.append("not measured yet (the budget-mode servers did not start, or no run)")
    return lines


def plot(curves, peak, path, model):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, pts_ in curves.items():
        pts_ = [(x, a) for x, a in pts_ if a[PROCESS]]
        if not pts_:
            continue
        style = "--" if name == ENVOY else "-"
        xs = [x for x, _ in pts_]
        line, = a1.plot(xs, [a[PROCESS] for _, a in pts_], style, marker="o", label=LABEL[name].replace("`", ""))
        lat = [(x, a["hs_p99_ms"]) for x, a in pts_ if a["hs_p99_ms"]]
        if lat:
            a2.plot([x for x, _ in lat], [y for _, y in lat], style, marker="o", color=line.get_color())
    for a in (a1, a2):
        a.set_xlabel("offered load (new connections/s)")
        a.grid(alpha=0.3)
        if peak:
            a.axvline(peak, color="grey", lw=0.8, ls=":")
    a1.set_ylabel("server process CPU µs per handshake")
    a1.set_ylim(bottom=0)
    a2.set_ylabel("handshake p99 ms")
    a2.set_yscale("log")
    for axis in (a2.yaxis.set_major_formatter, a2.yaxis.set_minor_formatter):
        axis(FuncFormatter(lambda v, _: f"{v:g}"))
    a1.set_title("CPU per handshake (lower is better)")
    a2.set_title("Handshake p99 (dotted line: Envoy saturated)")
    a1.legend(fontsize=7)
    fig.suptitle(f"Partial load, RSA-2048, TLS 1.3, X25519, one server core ({model})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
