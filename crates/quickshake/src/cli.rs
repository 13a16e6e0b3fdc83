//! The command line, Envoy's where the meaning is the same.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "quickshake",
    version,
    about = "A TLS-terminating gateway that makes new TLS connections cheap"
)]
pub struct Cli {
    /// Envoy v3 bootstrap configuration file (YAML or JSON).
    #[arg(short = 'c', long = "config-path", global = true)]
    pub config: Option<PathBuf>,
    /// Worker threads (default: the CPUs this process may run on).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Accepted for Envoy compatibility: the default concurrency already follows the CPU set.
    #[arg(long = "cpuset-threads")]
    pub cpuset_threads: bool,
    /// trace, debug, info, warning/warn, error, critical, off.
    #[arg(short = 'l', long = "log-level", default_value = "info")]
    pub log_level: String,
    /// `serve` runs; `validate` checks the configuration (certificates and keys included) and exits.
    #[arg(long, value_enum, default_value = "serve")]
    pub mode: Mode,
    /// Seconds a drain (SIGTERM, /quitquitquit) waits for open connections.
    #[arg(long = "drain-time-s", default_value_t = 10)]
    pub drain_time_s: u64,
    /// `normal`: handshakes run on the worker threads (the most handshakes per core). `idle`:
    /// each worker handshakes on a companion thread in the kernel's SCHED_IDLE class, so
    /// requests on established connections never wait behind handshakes (and their key
    /// operations); new handshakes get the CPU that established traffic leaves.
    #[arg(long = "handshake-priority", value_enum, default_value = "normal")]
    pub handshake_priority: HandshakePriorityArg,
    /// CPU engines compute provider batches on one lower-priority (nice 10) thread per worker
    /// instead of on the worker, so established connections keep low latency during handshake
    /// storms at some cost in handshakes per core. Offload engines always wait off the worker.
    /// The environment variable takes `1`/`0` (also true/false, yes/no, on/off).
    #[arg(
        long = "batch-threads",
        env = "QUICKSHAKE_BATCH_THREADS",
        global = true,
        action = clap::ArgAction::SetTrue,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub batch_threads: bool,
    /// Engines to treat as absent, comma-separated (`crypto_mb`, `ifma`, `avx2`, `qat`, or
    /// `all`): runs the no-engine path on a machine that has the engine (tests, comparisons).
    #[arg(
        long = "hide-engines",
        env = "QUICKSHAKE_HIDE_ENGINES",
        value_name = "LIST",
        global = true
    )]
    pub hide_engines: Option<String>,
    /// A directory holding Intel's crypto_mb libraries, searched (recursively) before
    /// `<repo>/.deps/crypto_mb` and the system library path.
    #[arg(
        long = "crypto-mb-dir",
        env = "QUICKSHAKE_CRYPTO_MB_DIR",
        value_name = "DIR",
        global = true
    )]
    pub crypto_mb_dir: Option<PathBuf>,
    /// How often certificate, key and SDS files are checked for rotation, in milliseconds.
    #[arg(
        long = "reload-interval-ms",
        env = "QUICKSHAKE_RELOAD_INTERVAL_MS",
        default_value_t = 1000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub reload_interval_ms: u64,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HandshakePriorityArg {
    Normal,
    Idle,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Serve,
    Validate,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Translate Istio's `privateKeyProvider` (ProxyConfig, meshConfig.defaultConfig or the
    /// `proxy.istio.io/config` annotation) into quickshake's `private_key_provider`.
    Convert {
        /// Istio YAML file (`-` for standard input).
        input: PathBuf,
        /// The key file the provider block should name.
        #[arg(long, default_value = "/etc/quickshake/tls/tls.key")]
        key_file: String,
    },
    /// Report CPU features, acceleration engines, QAT devices and, with -c, which engine each key gets.
    Doctor {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

impl Cli {
    /// The provider registry's options, from the flags (or their environment variables).
    pub fn provider_options(&self) -> quickshake_keyprovider::ProviderOptions {
        quickshake_keyprovider::ProviderOptions {
            engines: quickshake_keyprovider::EngineOptions {
                hide: self
                    .hide_engines
                    .as_deref()
                    .map(quickshake_keyprovider::options::parse_hide_list)
                    .unwrap_or_default(),
                crypto_mb_dir: self.crypto_mb_dir.clone(),
            },
            batch_threads: self.batch_threads,
        }
    }
}

/// Map Envoy's log level names onto tracing's.
pub fn tracing_level(level: &str) -> Result<&'static str, String> {
    Ok(match level.to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "info" => "info",
        "warning" | "warn" => "warn",
        "error" | "critical" => "error",
        "off" => "off",
        other => return Err(format!("--log-level: unknown level '{other}' (trace, debug, info, warning, error, critical, off)")),
    })
}
