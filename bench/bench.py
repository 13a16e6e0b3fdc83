#!/usr/bin/env python3
"""Orchestrates the handshake benchmark (called by bench/run; see docs/benchmarks.md).

Starts every server of a phase pinned to CPU 0 (one worker each), runs quickshake-bench (or
fortio) pinned to CPU 1 through each scenario, servers interleaved and repeated (A B A B),
and appends one JSON object per point to the results file. Every server it starts runs in its
own process group, is recorded in RUN_DIR/pids and is killed on exit (bench/run's trap kills
the recorded groups too if this script dies hard).

The server's counters (`/stats`), the CPUs' busy ticks (`/proc/stat`) and the CPU model and
flags (keyprovider's cpu_info()) are read by quickshake-bench alone: its own runs report them,
`quickshake-bench observe` reads them around fortio and for the background load,
`quickshake-bench cpu-info` prints the CPU (model, family/model number/stepping, flags). This
script reads what they report, plus what nothing else reads: the server's process-group CPU
(`/proc/PID/stat`).
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import socket
import statistics
import string
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = os.path.join(ROOT, "bench", "templates")
# crypto_mb is loaded only from the directory named (scripts/install-crypto-mb's); the servers,
# doctor and engine-bench started from here inherit it.
os.environ.setdefault("QUICKSHAKE_CRYPTO_MB_DIR", os.path.join(ROOT, ".deps", "crypto_mb"))
# The quickshake.batching provider block's one copy (the Helm chart reads it too).
BATCHING_PROVIDER = os.path.join(ROOT, "deploy", "helm", "quickshake", "files", "batching-provider.yaml")
SERVER_CPU, CLIENT_CPU = "0", "1"
BASE_PORT = int(os.environ.get("BENCH_BASE_PORT", "18440"))

CERTS = {
    "rsa2048": ("testdata/certs/rsa2048.cert.pem", "testdata/certs/rsa2048.key.pem"),
    "ecdsa-p256": ("testdata/certs/ecdsa-p256.cert.pem", "testdata/certs/ecdsa-p256.key.pem"),
}

# name -> (kind, provider). Kinds: quickshake, envoy, nginx, haproxy, floor.
SERVERS = {
    "quickshake-inline": ("quickshake", "inline"),
    "quickshake-cryptomb-1ms": ("quickshake", "cryptomb-1ms"),
    "quickshake-cryptomb-10ms": ("quickshake", "cryptomb-10ms"),
    "quickshake-adaptive": ("quickshake", "adaptive"),
    "quickshake-engine-software": ("quickshake", "engine-software"),
    "quickshake-engine-avx2": ("quickshake", "engine-avx2"),
    "quickshake-engine-ifma": ("quickshake", "engine-ifma"),
    "quickshake-engine-crypto_mb": ("quickshake", "engine-crypto_mb"),
    "quickshake-proxy": ("quickshake", "proxy"),
    "envoy-proxy": ("envoy", "proxy"),
    "envoy": ("envoy", None),
    "nginx": ("nginx", None),
    "haproxy": ("haproxy", None),
    "floor": ("floor", None),
}
# Keep-alive HTTPS proxied to a local upstream (nginx, plain HTTP/1.1, pinned with the client).
PROXY = ["quickshake-proxy", "envoy-proxy"]
UPSTREAM_PORT = BASE_PORT + 200
GATEWAY = ["quickshake-inline", "envoy", "nginx", "haproxy", "floor"]
# quickshake.batching (adaptive) with each engine, at 64 clients; an engine this CPU lacks fails
# to start (its name is explicit, fallback off) and is reported as not available.
ENGINES = ["quickshake-engine-software", "quickshake-engine-avx2", "quickshake-engine-ifma",
           "quickshake-engine-crypto_mb"]
# quickshake.batching variants: provider -> (batching, typed_config lines added to the Helm chart's
# block). A line is added only where a variant departs from the provider's defaults (budget mode:
# `max_batch_delay` 2 ms, `queues: shared`); bench_partial.py runs them.
BATCHING = {
    "adaptive": ("adaptive", []),
    "budget": ("budget", []),
    "budget-10ms": ("budget", ["max_batch_delay: 0.01s"]),
    "budget-per-worker": ("budget", ["queues: per_worker"]),
}
PROVIDERS = ["quickshake-inline", "quickshake-cryptomb-1ms", "quickshake-cryptomb-10ms",
             "quickshake-adaptive", "envoy", "nginx"]

# Profiles. reps: how many times each point runs (servers interleaved: A B A B).
PROFILES = {
    "quick": dict(
        duration=3, warmup=1,
        gateway=[("rsa2048", "1.3", 1)],
        gateway_clients=[64],
        providers=[("rsa2048", "1.3")], provider_clients=[1, 16], provider_reps=1,
        keepalive_servers=["quickshake-inline", "envoy"], keepalive_reps=1,
        open_servers=["quickshake-inline", "quickshake-adaptive", "envoy"],
        open_fractions=[0.3, 0.7, 1.05],
        fortio=True, engines=False,
    ),
    "default": dict(
        duration=5, warmup=1,
        gateway=[("rsa2048", "1.3", 2), ("rsa2048", "1.2", 1),
                 ("ecdsa-p256", "1.3", 1), ("ecdsa-p256", "1.2", 1)],
        gateway_clients=[64],
        providers=[("rsa2048", "1.3")], provider_clients=[1, 4, 16, 64], provider_reps=1,
        keepalive_servers=["quickshake-inline", "envoy"], keepalive_reps=2,
        open_servers=["quickshake-inline", "quickshake-cryptomb-10ms", "quickshake-adaptive",
                      "envoy", "nginx"],
        open_fractions=[0.25, 0.5, 0.8, 1.05],
        fortio=True, engines=True, proxy=True,
    ),
    "full": dict(
        duration=10, warmup=2,
        gateway=[("rsa2048", "1.3", 3), ("rsa2048", "1.2", 3),
                 ("ecdsa-p256", "1.3", 3), ("ecdsa-p256", "1.2", 3)],
        gateway_clients=[1, 4, 16, 64],
        providers=[("rsa2048", "1.3"), ("rsa2048", "1.2"), ("ecdsa-p256", "1.3")],
        provider_clients=[1, 4, 16, 64], provider_reps=2,
        keepalive_servers=["quickshake-inline", "quickshake-adaptive", "envoy", "nginx",
                           "haproxy"], keepalive_reps=3,
        open_servers=list(PROVIDERS) + ["haproxy", "floor"],
        open_fractions=[0.1, 0.25, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1],
        fortio=True, engines=True, proxy=True,
    ),
}


def groups(cert, tls):
    """X25519 is the key exchange everywhere. TLS 1.2 servers also check the client's
    supported_groups for the ECDSA certificate's curve (RFC 8422), so P-256 is listed second
    there; X25519 is still the group negotiated."""
    return "X25519,P-256" if cert.startswith("ecdsa") and tls == "1.2" else "X25519"


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(cmd, timeout=20):
    try:
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
        return (r.stdout + r.stderr).strip()
    except Exception as e:  # noqa: BLE001 - recorded as text
        return f"error: {e}"


def port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Like the servers, ignore TIME_WAIT leftovers of earlier runs: only a listener counts.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_port(port, proc, limit=20.0):
    end = time.time() + limit
    while time.time() < end:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def group_cpu_seconds(pgid):
    """utime+stime of every process in the server's process group (all threads)."""
    hz = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields[0] is state; pgrp is the 5th stat field
            total += int(fields[11]) + int(fields[12])
    return total / hz


def observe(bench, server_cpu=None, server_stats=None, duration=None, command=None, timeout=None):
    """`quickshake-bench observe`: the server's counters and CPU around `command` (or an idle
    `duration`), read and computed as in quickshake-bench's own runs, plus every core's busy
    share. Returns (its JSON report or None, its stderr, which carries the command's output,
    and its command line). It runs in a process group of its own with the command, killed
    whole on timeout or interruption."""
    cmd = [bench, "observe", "--json"]
    if server_cpu is not None:
        cmd += ["--server-cpu", str(server_cpu)]
    if server_stats:
        cmd += ["--server-stats", server_stats]
    if duration:
        cmd += ["-d", duration]
    if command:
        cmd += ["--"] + command
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise
    js = json.loads(out) if out.strip().startswith("{") else None
    return js, err, cmd


class Server:
    def __init__(self, name, cert, index, run_dir, bins, phase=0, spec=None, template=None,
                 cpus=SERVER_CPU, workers=1):
        """`spec`: (kind, provider) when `name` is not in SERVERS; `template`: a config template
        other than the kind's own (quickshake and Envoy only: bench_h3's h3.yaml); `cpus`: the
        `taskset -c` list; `workers`: quickshake's and Envoy's `--concurrency`."""
        self.name = name
        self.cpus, self.workers = cpus, workers
        self.kind, self.provider = spec or SERVERS[name]
        self.template = template
        self.cert_name = cert
        self.cert, self.key = (os.path.join(ROOT, p) for p in CERTS[cert])
        base = BASE_PORT + 2 * len(SERVERS) * phase  # new ports per phase
        self.port = base + 2 * index
        self.admin_port = base + 2 * index + 1 if self.kind in ("quickshake", "envoy", "floor") else None
        self.dir = os.path.join(run_dir, f"{name}-{cert}")
        self.bins = bins
        self.proc = None
        self.cmd = None

    def _render(self, template, out, **kw):
        with open(os.path.join(TEMPLATES, template)) as f:
            text = string.Template(f.read()).substitute(**kw)
        path = os.path.join(self.dir, out)
        with open(path, "w") as f:
            f.write(text)
        return path

    def _key_block(self, indent=14):
        ind = " " * indent
        if self.provider in (None, "inline", "proxy"):
            return f"{ind}private_key: {{ filename: {self.key} }}"
        if self.provider.startswith("cryptomb"):
            delay = {"cryptomb-1ms": "0.001s", "cryptomb-10ms": "0.01s"}[self.provider]
            lines = ["private_key_provider:", "  provider_name: cryptomb", "  fallback: true",
                     "  typed_config:",
                     '    "@type": type.googleapis.com/envoy.extensions.private_key_providers.cryptomb.v3alpha.CryptoMbPrivateKeyMethodConfig',
                     f"    poll_delay: {delay}", f"    private_key: {{ filename: {self.key} }}"]
        else:
            engine = self.provider[len("engine-"):] if self.provider.startswith("engine-") else "auto"
            batching, extra = BATCHING.get(self.provider, BATCHING["adaptive"])
            # fallback and poll_delay: the provider's defaults (an engine this CPU lacks fails).
            with open(BATCHING_PROVIDER) as f:
                lines = string.Template(f.read()).substitute(
                    private_key=f"{{ filename: {self.key} }}", fallback="false", poll_delay="0.01s",
                    engine=engine, batching=batching).splitlines()
            lines += [f"    {x}" for x in extra]
        return "\n".join(ind + line for line in lines)

    def _proxy(self, cfg):
        """For the proxy servers: route to the upstream cluster instead of a direct response."""
        if self.provider != "proxy":
            return
        text = open(cfg).read()
        text = text.replace('direct_response: { status: 200, body: { inline_string: "ok" } }',
                            "route: { cluster: upstream }")
        cluster = ("static_resources:\n  clusters:\n  - name: upstream\n    connect_timeout: 1s\n"
                   "    type: STATIC\n    load_assignment:\n      cluster_name: upstream\n"
                   "      endpoints: [ { lb_endpoints: [ { endpoint: { address: { socket_address: "
                   f"{{ address: 127.0.0.1, port_value: {UPSTREAM_PORT} }} }} }} }} ] }} ]\n")
        text = text.replace("static_resources:\n", cluster, 1)
        with open(cfg, "w") as f:
            f.write(text)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        for p in (self.port, self.admin_port):
            if p is not None and not port_free(p):
                raise RuntimeError(f"{self.name}: port {p} is in use (set BENCH_BASE_PORT)")
        kw = dict(port=self.port, admin_port=self.admin_port, cert=self.cert, key=self.key,
                  dir=self.dir, key_block=self._key_block(),
                  quic_key_block=self._key_block(16))  # h3.yaml: the QUIC listener's, nested deeper
        pin = ["taskset", "-c", self.cpus]
        if self.kind == "quickshake":
            cfg = self._render(self.template or "quickshake.yaml", "quickshake.yaml", **kw)
            self._proxy(cfg)
            self.cmd = pin + [self.bins["quickshake"], "-c", cfg, "--concurrency", str(self.workers)]
        elif self.kind == "envoy":
            cfg = self._render(self.template or "envoy.yaml", "envoy.yaml", **kw)
            self._proxy(cfg)
            self.cmd = pin + [self.bins["envoy"], "-c", cfg, "--concurrency", str(self.workers),
                              "--disable-hot-restart", "-l", "warning",
                              "--base-id", str(self.port)]
        elif self.kind == "nginx":
            cfg = self._render("nginx.conf", "nginx.conf", **kw)
            self.cmd = pin + [self.bins["nginx"], "-c", cfg, "-e", os.path.join(self.dir, "nginx-error.log")]
        elif self.kind == "haproxy":
            pem = os.path.join(self.dir, "combined.pem")
            with open(pem, "w") as f:
                f.write(open(self.cert).read() + open(self.key).read())
            os.chmod(pem, 0o600)
            cfg = self._render("haproxy.cfg", "haproxy.cfg", pem=pem, **kw)
            self.cmd = pin + [self.bins["haproxy"], "-f", cfg, "-db"]
        else:
            self.cmd = pin + [self.bins["floor"], "--cert", self.cert, "--key", self.key,
                              "--port", str(self.port), "--admin-port", str(self.admin_port)]
        logf = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen(self.cmd, stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.pidfile = os.path.join(os.environ.get("BENCH_PID_DIR", self.dir),
                                    f"{self.name}-{self.cert_name}.pid")
        with open(self.pidfile, "w") as f:
            f.write(str(self.proc.pid))
        ok = wait_port(self.port, self.proc) and (
            self.admin_port is None or wait_port(self.admin_port, self.proc))
        if not ok:
            tail = " | ".join(sh(f"grep -v NOTICE {os.path.join(self.dir, 'server.log')} | tail -3").splitlines())
            self.stop()
            raise RuntimeError(f"{self.name} ({self.cert_name}) did not start: {tail}")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None
        try:
            os.remove(self.pidfile)
        except OSError:
            pass


class Runner:
    def __init__(self, args, prof, bins, out):
        self.args, self.prof, self.bins, self.out = args, prof, bins, out
        self.results = []
        self.t0 = time.time()

    def record(self, rec):
        rec["type"] = "point"
        rec["profile"] = self.args.profile
        rec["time"] = datetime.datetime.now().isoformat(timespec="seconds")
        self.results.append(rec)
        with open(self.out, "a") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")

    def bench(self, srv, section, tls, clients=None, rate=None, keepalive=False, rep=1, h3=False,
              group=None, client_cpus=CLIENT_CPU, server_cpu=SERVER_CPU, probe=None):
        """One quickshake-bench run against `srv`; `h3`: HTTP/3, a new QUIC connection per
        request, to the UDP listener on the same port (SNI localhost, as over TCP); `group`:
        the key exchange offered instead of groups()'s; `server_cpu` None: no core's busy time
        is read (a server on several cores: process CPU only); `probe`: called before the run,
        what it returns is called after it and gives fields for the record (bench_partial.py:
        the provider's stats)."""
        p = self.prof
        group = group or groups(srv.cert_name, tls)
        cmd = ["taskset", "-c", client_cpus, self.bins["bench"], "-d", f"{p['duration']}s",
               "--warmup", f"{p['warmup']}s", "--json", "--cacert", srv.cert]
        if server_cpu is not None:
            cmd += ["--server-cpu", server_cpu]
        cmd += ["--tls", tls, "--groups", group]
        if h3:
            cmd += ["--h3", "--sni", "localhost"]
        if clients is not None:
            cmd += ["-c", str(clients)]
        if rate is not None:
            cmd += ["--rate", f"{rate:.0f}"]
        if keepalive:
            cmd += ["--keepalive"]
        if srv.admin_port:
            cmd += ["--server-stats", f"http://127.0.0.1:{srv.admin_port}"]
        cmd.append(f"https://127.0.0.1:{srv.port}/" if h3 else f"https://localhost:{srv.port}/")
        rec = dict(section=section, server=srv.name, kind=srv.kind, provider=srv.provider,
                   cert=srv.cert_name, tls=tls, clients=clients, rate=rate,
                   transport="quic" if h3 else "tcp", groups=group,
                   mode="keepalive" if keepalive else ("open" if rate else "closed"),
                   rep=rep, tool="quickshake-bench", command=" ".join(cmd),
                   server_command=" ".join(srv.cmd))
        limit = p["duration"] + p["warmup"] + 40
        try:
            after = probe() if probe else None
            pcpu0 = group_cpu_seconds(srv.proc.pid) if srv.alive() else None
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
            pcpu1 = group_cpu_seconds(srv.proc.pid) if srv.alive() else None
            if after:
                rec.update(after())
            js = json.loads(r.stdout) if r.stdout.strip().startswith("{") else None
            rec["exit"] = r.returncode
            if js is None:
                rec.update(ok=False, failures=[r.stderr.strip()[-400:]])
            else:
                self._from_report(rec, js)
                if keepalive and js.get("requests"):
                    # Every handshake happens in the warm-up; the tool then reports "no TLS
                    # handshake completed" for the window, which is expected here.
                    rec["failures"] = [x for x in rec["failures"] if "no TLS handshake" not in x]
                    rec["ok"] = not rec["failures"]
                if pcpu0 is not None and pcpu1 is not None:
                    # Process CPU covers warm-up + window: scale by the window's share.
                    share = p["duration"] / (p["duration"] + p["warmup"])
                    rec["server_process_cpu_s"] = pcpu1 - pcpu0
                    n_hs, n_req = js.get("handshakes"), js.get("requests")
                    w = (pcpu1 - pcpu0) * share * 1e6
                    rec["server_process_cpu_us_per_handshake"] = w / n_hs if n_hs else None
                    rec["server_process_cpu_us_per_request"] = w / n_req if n_req else None
        except subprocess.TimeoutExpired:
            rec.update(ok=False, failures=[f"timed out after {limit}s"])
        if not srv.alive():
            rec["ok"] = False
            rec.setdefault("failures", []).append("server exited")
        self.record(rec)
        self._say(rec)
        return rec

    @staticmethod
    def _from_report(rec, js):
        s = js.get("server") or {}
        lat = js.get("latency_ms", {})
        busy = s.get("cpu_busy_seconds")
        rec.update(
            ok=js.get("ok", False), failures=js.get("failures", []), warnings=js.get("warnings", []),
            duration_s=js.get("duration_s"), handshakes=js.get("handshakes"),
            requests=js.get("requests"), resumed=js.get("resumed"),
            errors=js.get("errors", {}).get("total"),
            handshakes_per_sec=js.get("handshakes_per_sec"),
            requests_per_sec=js.get("requests_per_sec"),
            hs_p50_ms=lat.get("handshake", {}).get("p50"), hs_p99_ms=lat.get("handshake", {}).get("p99"),
            req_p50_ms=lat.get("request", {}).get("p50"), req_p99_ms=lat.get("request", {}).get("p99"),
            client_cpu_us_per_handshake=js.get("client_cpu_us_per_handshake"),
            client_bottleneck=js.get("client_bottleneck"),
            server_handshakes=s.get("handshakes"), server_session_reused=s.get("session_reused"),
            server_cpu_utilization=s.get("cpu_utilization"),
            server_cpu_us_per_handshake=s.get("cpu_us_per_handshake"),
            server_cpu_counted_by=s.get("cpu_per_handshake_counted_by"),
            server_cpu_us_per_request=(busy * 1e6 / js["requests"]) if busy and js.get("requests") else None,
            negotiated=js.get("negotiated"), open_loop=js.get("open_loop"),
        )

    def fortio(self, srv, clients, rep=1):
        p = self.prof
        jpath = os.path.join(srv.dir, f"fortio-{rep}.json")
        cmd = ["taskset", "-c", CLIENT_CPU, self.bins["fortio"], "load", "-stdclient",
               "-keepalive=false", "-c", str(clients), "-qps", "0", "-t", f"{p['duration']}s",
               "-k", "-json", jpath, "-loglevel", "Error", f"https://localhost:{srv.port}/"]
        env = dict(os.environ)  # fortio v1.66.0 offers X25519 (checked: ssl.curves below)
        rec = dict(section="fortio", server=srv.name, kind=srv.kind, provider=srv.provider,
                   cert=srv.cert_name, tls="1.3", clients=clients, rate=None, mode="closed",
                   rep=rep, tool="fortio", command=" ".join(cmd), server_command=" ".join(srv.cmd))
        # fortio has no warm-up flag: warm the server with the same load first, untimed.
        subprocess.run(cmd[:11] + ["-t", f"{p['warmup']}s", "-loglevel", "Error", cmd[-1]],
                       capture_output=True, env=env, timeout=p["warmup"] + 30)
        pcpu0 = group_cpu_seconds(srv.proc.pid)
        try:
            obs, err, ocmd = observe(self.bins["bench"], server_cpu=SERVER_CPU,
                                     server_stats=f"http://127.0.0.1:{srv.admin_port}" if srv.admin_port else None,
                                     command=cmd, timeout=p["duration"] + 40)
        except subprocess.TimeoutExpired:
            rec.update(ok=False, failures=["timed out"])
            self.record(rec)
            return rec
        pcpu = group_cpu_seconds(srv.proc.pid) - pcpu0
        rec["observer_command"] = " ".join(ocmd)
        if obs is None:
            rec.update(ok=False, failures=[err.strip()[-400:]])
            self.record(rec)
            return rec
        rec["exit"] = obs.get("exit")
        s = obs.get("server") or {}
        try:
            js = json.load(open(jpath))
        except (OSError, ValueError):
            rec.update(ok=False, failures=[err.strip()[-400:]])
            self.record(rec)
            return rec
        n = js["DurationHistogram"]["Count"]
        pct = {str(x["Percentile"]): x["Value"] * 1e3 for x in js["DurationHistogram"]["Percentiles"]}
        ok_codes = js.get("RetCodes", {}).get("200", 0)
        sh_hs, reused = s.get("handshakes"), s.get("session_reused")
        hs = sh_hs if sh_hs else n
        if s.get("curves") is not None:
            rec["server_curves"] = s["curves"]
        failures = []
        if ok_codes != n:
            failures.append(f"{n - ok_codes} non-200 responses")
        if reused:
            failures.append(f"server resumed {reused} sessions")
        rec.update(ok=not failures, failures=failures, warnings=obs.get("notes") or [],
                   duration_s=js["ActualDuration"] / 1e9,
                   handshakes=n, requests=n, resumed=None,
                   handshakes_per_sec=js["ActualQPS"], requests_per_sec=js["ActualQPS"],
                   req_p50_ms=pct.get("50"), req_p99_ms=pct.get("99"),
                   server_handshakes=sh_hs, server_session_reused=reused,
                   server_cpu_utilization=s.get("cpu_utilization"),
                   server_cpu_us_per_handshake=s.get("cpu_us_per_handshake"),
                   server_process_cpu_s=pcpu,
                   server_process_cpu_us_per_handshake=pcpu * 1e6 / hs if hs else None)
        self.record(rec)
        self._say(rec)
        return rec

    def _say(self, rec):
        def f(v, fmt):
            return format(v, fmt) if isinstance(v, (int, float)) else "-"
        extra = "" if rec.get("ok") else f"  FAILED: {'; '.join(rec.get('failures') or [])[:200]}"
        log(f"{rec['section']:<9} {rec['server']:<25} {rec['cert']:<10} tls{rec['tls']} "
            f"{rec['mode']:<9} c={rec['clients'] or '-'} rate={f(rec['rate'], '.0f')}: "
            f"{f(rec.get('handshakes_per_sec'), '7.0f')} hs/s {f(rec.get('requests_per_sec'), '7.0f')} req/s "
            f"cpu {f(rec.get('server_cpu_us_per_handshake'), '6.0f')} us/hs "
            f"p99 {f(rec.get('hs_p99_ms') or rec.get('req_p99_ms'), '.1f')} ms{extra}")


def background(bench, seconds=1):
    """Busy share of every CPU with nothing of ours running (other tenants, builds)."""
    obs, err, _ = observe(bench, duration=f"{seconds}s", timeout=seconds + 30)
    if obs is None:
        raise RuntimeError(f"quickshake-bench observe: {err.strip()[-400:]}")
    return {k: round(v, 3) for k, v in obs["cpu_busy"].items()}


def meta(args, bins):
    try:
        cpu = json.loads(sh(f"{bins['bench']} cpu-info --json"))
    except ValueError:
        cpu = {}
    flags = set(cpu.get("flags") or [])
    crypto = [x for x in ("aes", "vaes", "pclmulqdq", "vpclmulqdq", "sha_ni", "adx", "bmi2", "avx2",
                          "avx512f", "avx512ifma", "avx_ifma", "gfni") if x in flags]
    doctor = sh(f"{bins['quickshake']} doctor --json")
    try:
        doctor = json.loads(doctor)
    except ValueError:
        pass
    lock = open(os.path.join(ROOT, "Cargo.lock")).read()

    def crate(name):
        m = re.search(r'name = "%s"\nversion = "([^"]+)"' % re.escape(name), lock)
        return m.group(1) if m else "?"
    return {
        "type": "meta", "profile": args.profile,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(), "kernel": platform.release(),
        "cpu": {"model": cpu.get("model"), "family": cpu.get("family"),
                "model_number": cpu.get("model_number"), "stepping": cpu.get("stepping"),
                "nproc": os.cpu_count(), "crypto_flags": crypto},
        "doctor": doctor,
        "versions": {
            "quickshake": sh(f"{bins['quickshake']} --version"),
            "quickshake_git": sh(f"git -C {ROOT} describe --always --dirty"),
            "envoy": sh(f"{bins['envoy']} --version"),
            "nginx": sh(f"{bins['nginx']} -V 2>&1 | head -2"),
            "haproxy": sh(f"{bins['haproxy']} -vv | grep -E '^HAProxy version|Running on OpenSSL|Built with OpenSSL'"),
            "fortio": sh(f"{bins['fortio']} version"),
            "floor": f"tokio-boring {crate('tokio-boring')}, boring {crate('boring')}",
            "quickshake-bench": sh(f"{bins['bench']} --version"),
            "crypto_mb": doctor.get("crypto_mb", {}).get("version") if isinstance(doctor, dict) else None,
        },
        "settings": {"server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU, "groups": "X25519",
                     **PROFILES.get(args.profile, {})},
        "background_cpu_busy": background(bins["bench"]),
    }


def finish(run, bench, out, summary=None, expected=()):
    """Closes a results file (run time, background load), logs `summary(out)`'s lines and the
    count of failed points (sections in `expected`, recorded refusals, left out)."""
    end = {"type": "end", "seconds": round(time.time() - run.t0),
           "background_cpu_busy": background(bench)}
    with open(out, "a") as f:
        f.write(json.dumps(end, sort_keys=True) + "\n")
    for line in summary(out) if summary else ():
        log(line)
    bad = [r for r in run.results if not r.get("ok") and r.get("section") not in expected]
    log(f"done in {time.time() - run.t0:.0f}s: {len(run.results)} points, {len(bad)} failed -> {out}")


def median(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None


def start_upstream(run_dir, bins):
    """nginx answering 200 "ok" over plain HTTP/1.1 with keep-alive, pinned to the client CPU."""
    d = os.path.join(run_dir, "upstream")
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; worker_processes 1; user root; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 1000000; keepalive_timeout 300s;
  client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};
  server {{ listen 127.0.0.1:{UPSTREAM_PORT}; location / {{ return 200 "ok"; }} }} }}
""")
    proc = subprocess.Popen(["taskset", "-c", CLIENT_CPU, bins["nginx"], "-c", conf],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_port(UPSTREAM_PORT, proc)
    return proc


BINARIES = ("quickshake", "bench", "floor", "envoy", "nginx", "haproxy", "fortio")


def arguments(binaries=BINARIES):
    """What every run starts with: SIGTERM/SIGHUP unwind through the finally blocks (so every
    server is stopped), and a parser with --out, --run-dir and each binary's path."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: sys.exit(128 + n))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--run-dir", required=True)
    for b in binaries:
        ap.add_argument(f"--{b}", required=True)
    return ap


def main():
    ap = arguments()
    ap.add_argument("--profile", choices=PROFILES, default="default")
    args = ap.parse_args()
    bins = {b: getattr(args, b) for b in BINARIES}
    prof = PROFILES[args.profile]
    os.makedirs(args.run_dir, exist_ok=True)
    with open(args.out, "w") as f:
        f.write(json.dumps(meta(args, bins), sort_keys=True) + "\n")
    run = Runner(args, prof, bins, args.out)

    certs = sorted({c for c, _, _ in prof["gateway"]} | {c for c, _ in prof["providers"]},
                   key=lambda c: c != "rsa2048")
    names = list(SERVERS)
    servers = {}
    upstream = start_upstream(args.run_dir, bins) if prof.get("proxy") else None
    try:
        for cert in certs:
            log(f"phase {cert}: starting {len(names)} servers on CPU {SERVER_CPU}")
            servers = {}
            for i, name in enumerate(names):
                s = Server(name, cert, i, args.run_dir, bins, phase=certs.index(cert))
                try:
                    s.start()
                    servers[name] = s
                except RuntimeError as e:
                    log(f"SKIP {e}")
                    run.record(dict(section="start", server=name, cert=cert, tls=None, clients=None,
                                    rate=None, mode=None, rep=0, ok=False, failures=[str(e)]))
            time.sleep(1.0)
            log(f"background CPU busy (idle servers): {background(bins['bench'])}")
            done = {}  # (server, tls, mode, clients, rate) -> list of records

            def point(name, tls, clients, section, reps=1):
                if name not in servers:
                    return
                key = (name, tls, "closed", clients, None)
                have = done.setdefault(key, [])
                for rep in range(len(have) + 1, reps + 1):
                    have.append(run.bench(servers[name], section, tls, clients=clients, rep=rep))

            # Gateway: every server at 64 clients, A B C D E A B C D E.
            for gcert, tls, reps in prof["gateway"]:
                if gcert != cert:
                    continue
                for c in prof["gateway_clients"]:
                    for rep in range(1, reps + 1):
                        for name in GATEWAY:
                            point(name, tls, c, "gateway", reps=rep)
            # Providers: closed-loop concurrency sweep.
            for pcert, tls in prof["providers"]:
                if pcert != cert:
                    continue
                for rep in range(1, prof["provider_reps"] + 1):
                    for c in prof["provider_clients"]:
                        for name in PROVIDERS:
                            point(name, tls, c, "providers", reps=rep)
            if cert != "rsa2048":
                continue
            # Engines: quickshake.batching adaptive with each engine, 64 clients, TLS 1.3.
            if prof.get("engines"):
                for name in ENGINES:
                    point(name, "1.3", 64, "engines")
            # Keep-alive HTTPS proxied to a local upstream (gateway CPU per request).
            if prof.get("proxy") and all(n in servers for n in PROXY):
                for rep in range(1, prof["keepalive_reps"] + 1):
                    for name in PROXY:
                        run.bench(servers[name], "proxy", "1.3", clients=16, keepalive=True, rep=rep)
            # Keep-alive HTTPS: one handshake per connection, then requests.
            for rep in range(1, prof["keepalive_reps"] + 1):
                for name in prof["keepalive_servers"]:
                    if name in servers:
                        run.bench(servers[name], "keepalive", "1.3", clients=16, keepalive=True, rep=rep)
            # Open loop: offered rate as fractions of the server's own 64-client throughput.
            for name in prof["open_servers"]:
                if name not in servers:
                    continue
                peak = median(r.get("handshakes_per_sec") for r in done.get((name, "1.3", "closed", 64, None), []))
                if not peak:
                    rec = run.bench(servers[name], "open-peak", "1.3", clients=64)
                    peak = rec.get("handshakes_per_sec")
                if not peak:
                    continue
                for frac in prof["open_fractions"]:
                    rate = max(20, round(peak * frac / 10) * 10)
                    run.bench(servers[name], "open", "1.3", rate=rate)
            # fortio cross-check next to quickshake-bench on the same server.
            if prof["fortio"] and "quickshake-inline" in servers:
                s = servers["quickshake-inline"]
                run.fortio(s, 16)
                run.bench(s, "fortio", "1.3", clients=16)
            for s in servers.values():
                s.stop()
            servers = {}
    finally:
        for s in servers.values():
            s.stop()
        if upstream is not None:
            upstream.terminate()
    finish(run, bins["bench"], args.out)


if __name__ == "__main__":
    main()
