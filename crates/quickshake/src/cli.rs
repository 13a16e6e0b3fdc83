//! The command line, Envoy's where the meaning is the same.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "quickshake",
    // `quickshake 0.1.0 (git 1a2b3c4d5e6f)`: the revision from build.rs.
    version = concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("QUICKSHAKE_GIT_REV"), ")"),
    about = "A TLS-terminating gateway that makes new TLS connections cheap"
)]
pub struct Cli {
    /// Envoy v3 bootstrap configuration file (YAML or JSON).
    #[arg(short = 'c', long = "config-path", global = true)]
    pub config: Option<PathBuf>,
    /// Envoy's: a bootstrap as a YAML (or JSON) string. Alone it is the whole bootstrap; with
    /// -c it is merged into the file's (protobuf MergeFrom: mappings merged field by field,
    /// lists appended, scalars replaced).
    #[arg(long = "config-yaml", value_name = "YAML")]
    pub config_yaml: Option<String>,
    /// Envoy's: the bootstrap's node.cluster, replaced by this value.
    #[arg(long = "service-cluster", value_name = "NAME")]
    pub service_cluster: Option<String>,
    /// Envoy's: the bootstrap's node.id, replaced by this value.
    #[arg(long = "service-node", value_name = "NAME")]
    pub service_node: Option<String>,
    /// Envoy's: the bootstrap's node.locality.zone, replaced by this value.
    #[arg(long = "service-zone", value_name = "NAME")]
    pub service_zone: Option<String>,
    /// Worker threads (default: the CPUs this process may run on).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Accepted for Envoy compatibility: the default concurrency already follows the CPU set.
    #[arg(long = "cpuset-threads")]
    pub cpuset_threads: bool,
    /// trace, debug, info, warning/warn, error, critical, off.
    #[arg(short = 'l', long = "log-level", default_value = "info")]
    pub log_level: String,
    /// Envoy's: once the admin endpoint listens, its address (`IP:PORT`, `[IPv6]:PORT`; with
    /// `port_value: 0` the port the kernel chose) is written to this file, as Envoy writes it.
    #[arg(long = "admin-address-path", value_name = "FILE")]
    pub admin_address_path: Option<PathBuf>,
    /// `serve` runs; `validate` checks the configuration (certificates and keys included) and exits.
    #[arg(long, value_enum, default_value = "serve")]
    pub mode: Mode,
    /// Seconds a drain (SIGTERM, /quitquitquit) waits for open connections.
    #[arg(long = "drain-time-s", default_value_t = 10)]
    pub drain_time_s: u64,
    /// Envoy's. quickshake drains as Envoy's `immediate` with either: every open connection is
    /// told to close (GOAWAY, Connection: close) as soon as the drain starts.
    #[arg(long = "drain-strategy", value_enum, default_value = "gradual")]
    pub drain_strategy: DrainStrategy,
    /// Envoy's (v4 or v6), accepted: quickshake never puts its own address in a header.
    #[arg(long = "local-address-ip-version", value_enum, default_value = "v4")]
    pub local_address_ip_version: IpVersion,
    /// Envoy's, accepted: access log files are written a line at a time.
    #[arg(
        long = "file-flush-interval-msec",
        value_name = "MS",
        default_value_t = 10_000
    )]
    pub file_flush_interval_msec: u64,
    /// Envoy's, accepted: quickshake has no hot restart.
    #[arg(long = "disable-hot-restart")]
    pub disable_hot_restart: bool,
    /// Envoy's, accepted without effect: every field quickshake does not implement stays an
    /// error, since quickshake cannot tell a field Envoy does not know from one it does not
    /// implement.
    #[arg(long = "allow-unknown-static-fields", alias = "allow-unknown-fields")]
    pub allow_unknown_static_fields: bool,
    /// Envoy's, accepted: quickshake logs no deprecated-field warnings to skip.
    #[arg(long = "skip-deprecated-logs")]
    pub skip_deprecated_logs: bool,
    /// Envoy's, accepted without effect: quickshake leaves the process's core-dump setting
    /// (dumpable flag, `ulimit -c`) as the kernel and the launcher set it.
    #[arg(long = "enable-core-dump")]
    pub enable_core_dump: bool,
    /// Envoy's (the buffered size that forces a file flush), accepted: access log files are
    /// written a line at a time.
    #[arg(
        long = "file-flush-min-size-kb",
        value_name = "KB",
        default_value_t = 64
    )]
    pub file_flush_min_size_kb: u32,
    /// Envoy's hot-restart epoch, accepted and shown in `/server_info`: quickshake has no hot
    /// restart, so every epoch starts afresh (as Envoy with `--disable-hot-restart`).
    #[arg(long = "restart-epoch", value_name = "N", default_value_t = 0)]
    pub restart_epoch: u32,
    /// Envoy's (how long a hot-restart parent lives on), accepted: quickshake has no hot restart.
    #[arg(
        long = "parent-shutdown-time-s",
        value_name = "S",
        default_value_t = 900
    )]
    pub parent_shutdown_time_s: u32,
    /// Envoy's (a spdlog pattern), accepted: quickshake's log lines keep their own layout.
    #[arg(long = "log-format", value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// Envoy's `component:level,...`: the loggers quickshake has (admin, config, conn_handler,
    /// connection, filter, http, main, misc, pool, router, secret, upstream; see `/logging`)
    /// log at that level; other names are ignored with a warning.
    #[arg(long = "component-log-level", value_name = "LIST", value_parser = parse_component_levels)]
    pub component_log_level: Option<ComponentLevels>,
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
    /// The directory holding Intel's crypto_mb libraries (in it or in its `lib/`, as
    /// scripts/install-crypto-mb lays them out). crypto_mb is loaded from there only; without
    /// it, from the system loader path (LD_LIBRARY_PATH, ld.so.conf). Loaded only when a
    /// provider needs it (`engine: crypto_mb`, or `auto` where it is the engine picked).
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
    /// Everything after `--`, ignored as Envoy ignores it (func-e appends `-- --run-id ID`).
    #[arg(
        last = true,
        value_name = "IGNORED",
        allow_hyphen_values = true,
        hide = true
    )]
    pub ignored: Vec<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HandshakePriorityArg {
    Normal,
    Idle,
}

/// Envoy's `--drain-strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DrainStrategy {
    Gradual,
    Immediate,
}

impl DrainStrategy {
    /// The name `/server_info` shows (Envoy's enum value).
    pub fn envoy_name(self) -> &'static str {
        match self {
            DrainStrategy::Gradual => "Gradual",
            DrainStrategy::Immediate => "Immediate",
        }
    }
}

/// Envoy's `--local-address-ip-version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IpVersion {
    V4,
    V6,
}

impl IpVersion {
    pub fn envoy_name(self) -> &'static str {
        match self {
            IpVersion::V4 => "v4",
            IpVersion::V6 => "v6",
        }
    }
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
    /// `--service-node`, `--service-cluster`, `--service-zone` as a node whose set fields
    /// replace the bootstrap's.
    pub fn service_flags(&self) -> quickshake_config::Node {
        quickshake_config::Node {
            id: self.service_node.clone().unwrap_or_default(),
            cluster: self.service_cluster.clone().unwrap_or_default(),
            zone: self.service_zone.clone().unwrap_or_default(),
            ..quickshake_config::Node::default()
        }
    }

    /// The provider registry's options, from the flags (or their environment variables), with
    /// the engines the embedding binary adds.
    pub fn provider_options(
        &self,
        extra_engines: quickshake_keyprovider::ExtraEngines,
    ) -> quickshake_keyprovider::ProviderOptions {
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
            measure_tokens: false,
            extra_engines,
        }
    }
}

/// A `--log-level` or `--component-log-level` the command line gives that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LevelError {
    #[error(
        "--log-level: unknown level '{0}' (trace, debug, info, warning, error, critical, off)"
    )]
    Unknown(String),
    #[error("'{0}' is not component:level (e.g. upstream:debug,connection:trace)")]
    NotComponentLevel(String),
    #[error("'{0}' names no component")]
    NoComponent(String),
    #[error(
        "'{entry}': unknown level '{level}' (trace, debug, info, warning, error, critical, off)"
    )]
    UnknownComponentLevel { entry: String, level: String },
}

/// Map Envoy's log level names onto tracing's.
pub fn tracing_level(level: &str) -> Result<&'static str, LevelError> {
    Ok(match level.to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "info" => "info",
        "warning" | "warn" => "warn",
        "error" | "critical" => "error",
        "off" => "off",
        other => return Err(LevelError::Unknown(other.to_owned())),
    })
}

/// `--component-log-level` as given (`upstream:debug,connection:trace`), each level checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentLevels {
    pub text: String,
    /// (component, tracing level) in the order given.
    pub levels: Vec<(String, &'static str)>,
}

fn parse_component_levels(text: &str) -> Result<ComponentLevels, LevelError> {
    let mut levels = Vec::new();
    for entry in text.split(',').filter(|e| !e.trim().is_empty()) {
        let Some((name, level)) = entry.split_once(':') else {
            return Err(LevelError::NotComponentLevel(entry.to_owned()));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(LevelError::NoComponent(entry.to_owned()));
        }
        let level = tracing_level(level.trim()).map_err(|_| LevelError::UnknownComponentLevel {
            entry: entry.to_owned(),
            level: level.trim().to_owned(),
        })?;
        levels.push((name.to_owned(), level));
    }
    Ok(ComponentLevels {
        text: text.to_owned(),
        levels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_levels() {
        let c = parse_component_levels(
            "upstream:debug,connection:trace,http:info,lua:debug,main:warning",
        )
        .unwrap();
        assert_eq!(c.levels.len(), 5);
        assert_eq!(c.levels[4], ("main".to_owned(), "warn"));
        assert!(parse_component_levels("upstream").is_err());
        assert!(parse_component_levels("upstream:loud").is_err());
        assert!(parse_component_levels(":debug").is_err());
        assert!(parse_component_levels("").unwrap().levels.is_empty());
    }

    /// Envoy Gateway's host-mode line (func-e appends `--admin-address-path` and `-- --run-id`)
    /// and pilot-agent's, with the flags older releases pass.
    #[test]
    fn control_plane_lines_parse_and_the_tail_is_ignored() {
        let cli = Cli::try_parse_from([
            "envoy",
            "--service-cluster",
            "default/eg",
            "--service-node",
            "default-eg-7f4",
            "--config-yaml",
            "{}",
            "--log-level",
            "info",
            "--cpuset-threads",
            "--drain-strategy",
            "immediate",
            "--component-log-level",
            "misc:error",
            "--drain-time-s",
            "60",
            "--admin-address-path",
            "/run/admin-address.txt",
            "--",
            "--run-id",
            "0",
            "doctor",
            "-c",
        ])
        .unwrap();
        assert_eq!(
            cli.admin_address_path.as_deref(),
            Some(std::path::Path::new("/run/admin-address.txt"))
        );
        assert!(cli.command.is_none(), "after --, `doctor` is no subcommand");
        assert_eq!(cli.ignored, ["--run-id", "0", "doctor", "-c"]);
        assert!(cli.config.is_none());
        let cli = Cli::try_parse_from([
            "envoy",
            "-c",
            "/etc/istio/proxy/envoy-rev.json",
            "--restart-epoch",
            "2",
            "--drain-time-s",
            "45",
            "--drain-strategy",
            "immediate",
            "--parent-shutdown-time-s",
            "60",
            "--local-address-ip-version",
            "v4",
            "--file-flush-interval-msec",
            "1000",
            "--disable-hot-restart",
            "--allow-unknown-static-fields",
            "--file-flush-min-size-kb",
            "32",
            "-l",
            "warning",
            "--component-log-level",
            "misc:error",
            "--skip-deprecated-logs",
            "--enable-core-dump",
            "--concurrency",
            "2",
        ])
        .unwrap();
        assert_eq!((cli.restart_epoch, cli.parent_shutdown_time_s), (2, 60));
        assert_eq!(cli.file_flush_min_size_kb, 32);
        assert!(cli.skip_deprecated_logs && cli.enable_core_dump);
        assert!(cli.ignored.is_empty());
        // The subcommands still parse.
        let cli = Cli::try_parse_from(["quickshake", "doctor", "--json"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Doctor { json: true })));
    }

    #[test]
    fn envoy_launch_lines_parse() {
        let cli = Cli::try_parse_from([
            "quickshake",
            "--service-cluster",
            "c",
            "--service-node",
            "n",
            "--config-yaml",
            "{}",
            "--log-level",
            "info",
            "--cpuset-threads",
            "--drain-strategy",
            "immediate",
            "--local-address-ip-version",
            "v6",
            "--file-flush-interval-msec",
            "1000",
            "--disable-hot-restart",
            "--allow-unknown-static-fields",
            "--log-format",
            "%v",
            "--component-log-level",
            "misc:error",
        ])
        .unwrap();
        assert_eq!(cli.drain_strategy, DrainStrategy::Immediate);
        assert_eq!(cli.local_address_ip_version, IpVersion::V6);
        assert_eq!(cli.restart_epoch, 0);
        assert_eq!(cli.parent_shutdown_time_s, 900);
        assert_eq!(cli.file_flush_min_size_kb, 64);
        assert_eq!(cli.service_flags().id, "n");
        for bad in [
            ["--restart-epoch", "-1"],
            ["--parent-shutdown-time-s", "soon"],
            ["--file-flush-min-size-kb", "big"],
            ["--local-address-ip-version", "v5"],
            ["--drain-strategy", "sometimes"],
            ["--file-flush-interval-msec", "-1"],
        ] {
            assert!(
                Cli::try_parse_from(["quickshake", bad[0], bad[1]]).is_err(),
                "{bad:?}"
            );
        }
    }
}
