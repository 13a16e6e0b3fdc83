//! `quickshake-bench` command line: parses flags, builds the runtime, prints the report; and
//! its two helpers for the benchmark scripts, `observe` and `cpu-info`.

use std::io::IsTerminal;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use quickshake_bench::client::{self, Alpn, Config, TlsOptions, TlsVersion};
use quickshake_bench::http::Url;
use quickshake_bench::observe::{self, Observe};
use quickshake_bench::report::Report;
use quickshake_bench::{machine, parse_duration, stats_client};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TlsArg {
    #[value(name = "1.2")]
    V12,
    #[value(name = "1.3")]
    V13,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AlpnArg {
    H1,
    H2,
}

/// Handshake load generator: every request on a brand-new TCP+TLS (or, with --h3, QUIC)
/// connection, no session resumption (detected and refused), open or closed loop, client and
/// server CPU per handshake.
#[derive(Debug, Parser)]
#[command(
    name = "quickshake-bench",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    helper: Option<Helper>,
    #[command(flatten)]
    run: Args,
}

#[derive(Debug, Subcommand)]
enum Helper {
    /// Read the server's counters and CPU around another load generator's run (or an idle
    /// window) and report them as a run does: server handshakes, session_reused, groups, busy
    /// time of --server-cpu and its share and µs per handshake, and every core's busy share.
    Observe(ObserveArgs),
    /// Print this machine's CPU model and flags (keyprovider's cpu_info()), as bench/engine
    /// does; --json: model, vendor, processors and every flag.
    CpuInfo {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
struct ObserveArgs {
    /// Envoy-style admin base URL; its /stats is read before and after the window.
    #[arg(long)]
    server_stats: Option<String>,
    /// CPU number the server is pinned to; its /proc/stat busy time is reported per handshake.
    #[arg(long)]
    server_cpu: Option<usize>,
    /// Without a command: an idle window of this length, e.g. 1s.
    #[arg(short = 'd', long, value_parser = parse_duration, conflicts_with = "command")]
    duration: Option<Duration>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// The window: this command, run to its end (after --; its stdout goes to stderr).
    #[arg(last = true, required_unless_present = "duration")]
    command: Vec<String>,
}

#[derive(Debug, clap::Args)]
struct Args {
    /// Target, https://host:port/path.
    #[arg(required = true)]
    url: Option<String>,
    /// Closed loop: connections in flight (default 16). Open loop: cap on outstanding
    /// requests (default 1024).
    #[arg(short = 'c', long = "connections")]
    connections: Option<usize>,
    /// Open loop: new requests per second on a fixed timetable; latency counts from each
    /// request's intended start.
    #[arg(long)]
    rate: Option<f64>,
    /// Length of the timed window, e.g. 10s, 500ms, 1m (default 10s unless -n is given).
    #[arg(short = 'd', long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Stop after this many requests have been started in the timed window.
    #[arg(short = 'n', long = "max-requests", value_parser = clap::value_parser!(u64).range(1..))]
    max_requests: Option<u64>,
    /// Load before the timed window, not counted (counters and CPU are read after it).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    warmup: Duration,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Pin the TLS version (default: 1.2 to 1.3).
    #[arg(long, value_enum)]
    tls: Option<TlsArg>,
    /// CA bundle (PEM) to verify the server with.
    #[arg(long, conflicts_with = "insecure")]
    cacert: Option<PathBuf>,
    /// Do not verify the server certificate.
    #[arg(short = 'k', long)]
    insecure: bool,
    /// Key exchange groups offered, in order: X25519, P-256, X25519MLKEM768 (comma-separated).
    #[arg(long, default_value = "X25519")]
    groups: String,
    /// Signature algorithms accepted, e.g. rsa_pss_rsae_sha256,ecdsa_secp256r1_sha256.
    #[arg(long)]
    sigalgs: Option<String>,
    /// TLS 1.2 cipher list (OpenSSL syntax); TLS 1.3 suites are fixed by BoringSSL.
    #[arg(long)]
    cipher: Option<String>,
    /// Server name for SNI and verification (default: the URL host).
    #[arg(long)]
    sni: Option<String>,
    /// Make every connection from this local address (e.g. 127.0.0.2: Linux routes all of
    /// 127/8 to the loopback), of the target's address family.
    #[arg(long)]
    bind: Option<IpAddr>,
    /// ALPN to offer; h2 speaks a minimal HTTP/2 (one stream per request).
    #[arg(long, value_enum)]
    alpn: Option<AlpnArg>,
    /// Client certificate chain (PEM) for mutual TLS.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// Client private key (PEM) for mutual TLS.
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// One handshake per connection, then requests on it (HTTP keep-alive).
    #[arg(long)]
    keepalive: bool,
    /// Offer a saved session per connection slot and report resumptions instead of failing.
    #[arg(long)]
    allow_resumption: bool,
    /// Testing: offer saved sessions but still fail on resumption.
    #[arg(long, hide = true)]
    offer_sessions: bool,
    /// Envoy-style admin base URL; its /stats is read before and after the window.
    #[arg(long)]
    server_stats: Option<String>,
    /// CPU number the server is pinned to; its /proc/stat busy time is reported per handshake.
    #[arg(long)]
    server_cpu: Option<usize>,
    /// HTTP/3: every request on a new QUIC connection (full TLS 1.3 handshake, no
    /// resumption, no 0-RTT), over UDP to the URL's host and port.
    #[arg(long, conflicts_with_all = ["keepalive", "allow_resumption", "offer_sessions", "alpn", "cipher"])]
    h3: bool,
    /// Runtime worker threads (1 = single-threaded runtime; pin with taskset).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,
    /// Per-request limit (connect + handshake + response).
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    timeout: Duration,
    /// Live progress on stderr even when it is not a terminal.
    #[arg(long)]
    progress: bool,
}

fn config(a: &Args) -> Result<Config, String> {
    let target = a.url.as_deref().unwrap_or_default();
    let url = Url::parse(target)?;
    if url.scheme != "https" {
        return Err(format!("URL {target:?}: only https:// targets"));
    }
    let addr = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {}: {e}", url.host))?
        .next()
        .ok_or_else(|| format!("{} resolves to no address", url.host))?;
    if let Some(b) = a.bind {
        if b.is_ipv4() != addr.is_ipv4() {
            return Err(format!(
                "--bind {b}: not of the address family of the target {addr}"
            ));
        }
    }
    let open = a.rate.is_some();
    let connections = a.connections.unwrap_or(if open { 1024 } else { 16 });
    if connections == 0 {
        return Err("-c must be at least 1".into());
    }
    let duration = match (a.duration, a.max_requests) {
        (Some(d), _) => Some(d),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(10)),
    };
    let server_stats = a
        .server_stats
        .as_deref()
        .map(stats_client::stats_url)
        .transpose()?;
    Ok(Config {
        server_name: a.sni.clone().unwrap_or_else(|| url.host.clone()),
        url,
        addr,
        bind: a.bind,
        connections,
        rate: a.rate,
        duration,
        max_requests: a.max_requests,
        warmup: a.warmup,
        keepalive: a.keepalive,
        allow_resumption: a.allow_resumption,
        offer_sessions: a.offer_sessions,
        timeout: a.timeout,
        threads: usize::from(a.threads),
        progress: a.progress || std::io::stderr().is_terminal(),
        server_stats,
        server_cpu: a.server_cpu,
        tls: TlsOptions {
            version: a.tls.map(|v| match v {
                TlsArg::V12 => TlsVersion::V12,
                TlsArg::V13 => TlsVersion::V13,
            }),
            cacert: a.cacert.clone(),
            insecure: a.insecure,
            groups: a.groups.clone(),
            sigalgs: a.sigalgs.clone(),
            cipher: a.cipher.clone(),
            alpn: a.alpn.map(|x| match x {
                AlpnArg::H1 => Alpn::H1,
                AlpnArg::H2 => Alpn::H2,
            }),
            cert: a.cert.clone(),
            key: a.key.clone(),
        },
        h3: a.h3,
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.helper {
        Some(Helper::Observe(a)) => observe_main(&a),
        Some(Helper::CpuInfo { json }) => {
            let info = quickshake_keyprovider::engines::cpu_info();
            if json {
                println!("{}", machine::to_json(info));
            } else {
                print!("{}", machine::header(info));
            }
            ExitCode::SUCCESS
        }
        None => run_main(&cli.run),
    }
}

fn observe_main(a: &ObserveArgs) -> ExitCode {
    let server_stats = match a
        .server_stats
        .as_deref()
        .map(stats_client::stats_url)
        .transpose()
    {
        Ok(u) => u,
        Err(e) => {
            eprintln!("quickshake-bench observe: {e}");
            return ExitCode::from(2);
        }
    };
    let o = Observe {
        server_stats,
        server_cpu: a.server_cpu,
        command: a.command.clone(),
        duration: a.duration.unwrap_or_default(),
    };
    match observe::observe(&o) {
        Ok(obs) => {
            if a.json {
                println!("{}", obs.to_json());
            } else {
                print!("{}", obs.to_text());
            }
            // The command's failure (fortio's, say) shows in the exit status too.
            if a.command.is_empty() || obs.exit == Some(0) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("quickshake-bench observe: {e}");
            ExitCode::from(2)
        }
    }
}

fn run_main(args: &Args) -> ExitCode {
    let cfg = match config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("quickshake-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = if cfg.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.threads)
            .enable_all()
            .build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("quickshake-bench: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let data = match rt.block_on(client::run(cfg)) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("quickshake-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let report = Report::build(data);
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    if report.ok {
        ExitCode::SUCCESS
    } else {
        for f in &report.failures {
            eprintln!("quickshake-bench: FAILED: {f}");
        }
        ExitCode::from(1)
    }
}
