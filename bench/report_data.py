"""What bench/report.py and bench/report_h3.py share: reading a results file (JSON lines
written by bench/bench.py or bench/bench_h3.py: a meta line, points, an end line), medians over
repeated points, and how figures and server names are printed."""
import json
import statistics

LABEL = {
    "quickshake-inline": "quickshake, inline key",
    "quickshake-cryptomb-1ms": "quickshake, cryptomb poll_delay 1 ms",
    "quickshake-cryptomb-10ms": "quickshake, cryptomb poll_delay 10 ms",
    "quickshake-adaptive": "quickshake, quickshake.batching adaptive",
    "envoy": "Envoy 1.39.3 (inline key)",
    "nginx": "nginx",
    "haproxy": "HAProxy",
    "floor": "floor (bare tokio-boring loop)",
    "quickshake-proxy": "quickshake, proxying to the upstream",
    "envoy-proxy": "Envoy 1.39.3, proxying to the upstream",
    "quickshake-engine-software": "quickshake.batching, engine software",
    "quickshake-engine-avx2": "quickshake.batching, engine avx2",
    "quickshake-engine-ifma": "quickshake.batching, engine ifma",
    "quickshake-engine-crypto_mb": "quickshake.batching, engine crypto_mb",
}
CERT = {"rsa2048": "RSA-2048", "ecdsa-p256": "ECDSA P-256"}
BACKGROUND_LIMIT = 0.05  # CPU 0 busy share with nothing of ours running


def med(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None


def fmt(v, nd=0):
    if not isinstance(v, (int, float)):
        return "–"
    return f"{v:,.{nd}f}"


class Results:
    def __init__(self, path):
        self.meta, self.points, self.end = {}, [], {}
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                r = json.loads(line)
                if r.get("type") == "meta":
                    self.meta = r
                elif r.get("type") == "point":
                    self.points.append(r)
                elif r.get("type") == "end":
                    self.end = r
        bgs = [(x.get("background_cpu_busy") or {}).get("0") for x in (self.meta, self.end)]
        bgs = [b for b in bgs if b is not None]
        # Mid-run foreign load: on a quiet machine CPU-0 busy time and the server's own
        # process CPU agree within a few %; a saturated point where CPU 0 was much busier than
        # the server accounts for means something else ran there.
        sat = [r for r in self.points if r.get("ok") and r.get("mode") == "closed"
               and (r.get("clients") or 0) >= 16 and r.get("server_process_cpu_us_per_handshake")
               and r.get("server_cpu_us_per_handshake")]
        self.suspect = [r for r in sat if r["server_cpu_us_per_handshake"]
                        > 1.3 * r["server_process_cpu_us_per_handshake"]]
        self.noisy = (not bgs or max(bgs) > BACKGROUND_LIMIT
                      or (sat and len(self.suspect) > 0.2 * len(sat)))
        # Rank by CPU 0 busy time per handshake (the method); when other tenants kept CPU 0
        # busy, that figure counts their work too, so rank by the server's own process CPU.
        self.cpu_key = "server_process_cpu_us_per_handshake" if self.noisy else "server_cpu_us_per_handshake"
        self.cpu_req_key = "server_process_cpu_us_per_request" if self.noisy else "server_cpu_us_per_request"

    def select(self, **kw):
        out = []
        for r in self.points:
            if r.get("section") == "start":
                continue
            if all(r.get(k) == v if not callable(v) else v(r.get(k)) for k, v in kw.items()):
                out.append(r)
        return out

    def agg(self, rows):
        """Median of each figure over repeated runs (failed runs left out, counted)."""
        good = [r for r in rows if r.get("ok")]
        a = {"runs": len(rows), "failed": len(rows) - len(good), "rows": good}
        for k in ("handshakes_per_sec", "requests_per_sec", "server_cpu_us_per_handshake",
                  "server_process_cpu_us_per_handshake", "server_cpu_us_per_request",
                  "server_process_cpu_us_per_request", "client_cpu_us_per_handshake",
                  "hs_p50_ms", "hs_p99_ms", "req_p50_ms", "req_p99_ms", "server_cpu_utilization"):
            a[k] = med(r.get(k) for r in good)
        a["resumed"] = sum(r.get("resumed") or 0 for r in good)
        a["server_reused"] = sum(r.get("server_session_reused") or 0 for r in good)
        a["server_counted"] = any(r.get("server_session_reused") is not None for r in good)
        a["client_bottleneck"] = any(r.get("client_bottleneck") for r in good)
        return a


def cpu_name(meta, flags=True):
    """The machine as the reports name it: model, family and model number, crypto flags."""
    cpu = meta.get("cpu", {})
    name = f"{cpu.get('model')} family {cpu.get('family')} model {cpu.get('model_number')}"
    return f"{name} ({', '.join(cpu.get('crypto_flags', []))})" if flags else name


def background_note(R):
    """Each CPU's busy share with nothing of ours running, before and after the run."""
    bg = [(x.get("background_cpu_busy") or {}) for x in (R.meta, R.end)]
    return "; ".join(f"CPU {c} {fmt((bg[0].get(c) or 0) * 100)}% before, "
                     f"{fmt((bg[1].get(c) or 0) * 100)}% after" for c in ("0", "1"))


def resumption_cell(a):
    s = f"{a['resumed']}"
    s += f" / {a['server_reused']}" if a["server_counted"] else " / n.a."
    return s


def runs_cell(a, key="handshakes_per_sec"):
    vals = [fmt(r.get(key)) for r in a["rows"]]
    extra = [f"{a['failed']} failed"] if a["failed"] else []
    return ", ".join([" · ".join(vals)] * bool(vals) + extra)


def closed_points(R, server, cert, tls, clients):
    return R.select(server=server, cert=cert, tls=tls, mode="closed", clients=clients,
                    tool="quickshake-bench",
                    section=lambda s: s in ("gateway", "providers", "open-peak", "engines"))
