//! The `quickshake` command as a library: command line, logging, and wiring of configuration,
//! providers, workers and the admin endpoint. Errors get their context here and end the process
//! with a message that names the field or file at fault.
//!
//! It owns the process's life from the parsed command line to its exit status ([`run`]); the
//! binaries (`quickshake`, and the test-only `quickshake-test`) are a `main` that calls it with
//! their [`Extensions`]. It must not hold test doubles: those come from the embedding binary.
#![forbid(unsafe_code)]

mod cli;
mod convert;
mod doctor;
mod error;
mod logging;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use quickshake_admin::AdminState;
use quickshake_config::Bootstrap;
use quickshake_control::admin_state::GatewayAdmin;
use quickshake_keyprovider::Providers;
use quickshake_server::{build_listeners, DrainHandle, Gateway, GatewayOptions, HandshakePriority};
use quickshake_stats::Store;
use quickshake_xds::ResolveError;

use cli::{Cli, Command, Mode};
use error::ServeError;

/// What the embedding binary adds to quickshake. The release `quickshake` binary passes
/// `Extensions::default()`: nothing added.
#[derive(Default)]
pub struct Extensions {
    /// Engines a `quickshake.batching` provider may select with `engine: NAME` besides the
    /// built-in ones (the test-only `quickshake-test` adds `fault`).
    pub engines: quickshake_keyprovider::ExtraEngines,
}

/// The whole of the `quickshake` command: parses the command line, then validates, serves,
/// converts or runs `doctor`, and returns the process's exit status.
pub fn run(ext: Extensions) -> ExitCode {
    let cli = Cli::parse();
    let provider_options = cli.provider_options(ext.engines);
    if let Err(e) = cli::tracing_level(&cli.log_level) {
        return fail(&e.to_string());
    }
    let loggers = init_logging(&cli);
    match &cli.command {
        Some(Command::Doctor { json }) => {
            return doctor::run(
                doctor::ConfigArgs {
                    path: cli.config.as_deref(),
                    yaml: cli.config_yaml.as_deref(),
                },
                *json,
                concurrency(&cli),
                provider_options,
            )
        }
        Some(Command::Convert { input, key_file }) => return run_convert(input, key_file),
        None => {}
    }
    if cli.config.is_none() && cli.config_yaml.is_none() {
        return fail("a configuration is required: quickshake -c FILE (or --config-yaml YAML)");
    }
    let origin = ConfigOrigin::of(&cli);
    let mut cfg = match quickshake_config::load(cli.config.as_deref(), cli.config_yaml.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(&origin.error(&e)),
    };
    cfg.node.override_with(&cli.service_flags());
    for field in &cfg.ignored {
        tracing::info!(%field, "accepted with no effect in quickshake");
    }
    let store = Store::new();
    let providers = Arc::new(Providers::new(store.clone(), provider_options));
    let clusters = match quickshake_control::clusters::cluster_manager(&cfg.clusters, &store) {
        Ok(c) => c,
        Err(e) => return fail(&origin.error(&e)),
    };
    if cli.mode == Mode::Validate {
        return match build_listeners(&served_at_start(&cfg), &store, &providers, &clusters) {
            Ok(_) => {
                println!("configuration {} OK", origin.name);
                ExitCode::SUCCESS
            }
            Err(e) => fail(&origin.error(&e)),
        };
    }
    match serve(&cli, &origin, cfg, store, &providers, &clusters, loggers) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

/// Logging to standard error with a filter `/logging` can change at run time: every logger at
/// `--log-level`, `--component-log-level` on top; `RUST_LOG`, when set, replaces both until the
/// first change through `/logging`.
fn init_logging(cli: &Cli) -> Arc<logging::Loggers> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let components: Vec<(String, quickshake_admin::LogLevel)> = cli
        .component_log_level
        .as_ref()
        .map(|c| {
            c.levels
                .iter()
                .map(|(name, level)| (name.clone(), logging::cli_level(level)))
                .collect()
        })
        .unwrap_or_default();
    let (mut loggers, unknown) =
        logging::Loggers::new(logging::cli_level(&cli.log_level), &components);
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| loggers.filter());
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                // Colour only for a terminal: a file (Envoy Gateway's and func-e's logs of the
                // proxy) gets plain text, as Envoy writes it.
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
        )
        .init();
    loggers.attach(handle);
    if !unknown.is_empty() {
        tracing::warn!(
            components = %unknown.join(","),
            "--component-log-level: no quickshake counterpart; ignored"
        );
    }
    Arc::new(loggers)
}

/// Where the configuration came from, for messages: `'FILE'`, or `--config-yaml` alone.
struct ConfigOrigin {
    /// `'FILE'` or `(--config-yaml)`.
    name: String,
    /// Prefixes errors: `error initializing configuration 'FILE'`, or without a name when the
    /// bootstrap is the `--config-yaml` string alone (its errors say `--config-yaml`).
    context: String,
}

impl ConfigOrigin {
    fn of(cli: &Cli) -> ConfigOrigin {
        match &cli.config {
            Some(path) => {
                let name = format!("'{}'", path.display());
                ConfigOrigin {
                    context: format!("error initializing configuration {name}"),
                    name,
                }
            }
            None => ConfigOrigin {
                name: "(--config-yaml)".to_owned(),
                context: "error initializing configuration".to_owned(),
            },
        }
    }

    fn error(&self, e: &dyn std::fmt::Display) -> String {
        format!("{}: {e}", self.context)
    }
}

fn run_convert(input: &std::path::Path, key_file: &str) -> ExitCode {
    let text = if input.as_os_str() == "-" {
        let mut s = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut s) {
            return fail(&format!("convert: reading standard input: {e}"));
        }
        s
    } else {
        match std::fs::read_to_string(input) {
            Ok(s) => s,
            Err(e) => return fail(&format!("convert: {}: {e}", input.display())),
        }
    };
    match convert::find(&text) {
        Ok(found) if found.is_empty() => fail("convert: no privateKeyProvider found"),
        Ok(found) => {
            for f in &found {
                println!("{}", convert::render(f, key_file));
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("convert: {e}")),
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("quickshake: {msg}");
    ExitCode::FAILURE
}

fn concurrency(cli: &Cli) -> usize {
    cli.concurrency
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1)
}

fn serve(
    cli: &Cli,
    origin: &ConfigOrigin,
    cfg: Bootstrap,
    store: Store,
    providers: &Arc<Providers>,
    clusters: &quickshake_upstream::ClusterManager,
    loggers: Arc<logging::Loggers>,
) -> Result<(), ServeError> {
    let opts = GatewayOptions {
        concurrency: concurrency(cli),
        drain_time: Duration::from_secs(cli.drain_time_s),
        handshake_priority: match cli.handshake_priority {
            cli::HandshakePriorityArg::Normal => HandshakePriority::Normal,
            cli::HandshakePriorityArg::Idle => HandshakePriority::Idle,
        },
    };
    // Bind admin first so a taken admin port fails before workers start.
    let admin_listener = match &cfg.admin {
        Some(a) => {
            let listener = bind_admin(a.address)?;
            announce_admin(&listener, cli.admin_address_path.as_deref())?;
            Some(listener)
        }
        None => None,
    };
    // A static listener whose secrets come from a control plane warms until they arrive: the
    // xDS client's configuration binds it then (as Envoy's listener warming does).
    let at_start = served_at_start(&cfg);
    if let Some(r) = cfg
        .listeners
        .iter()
        .flat_map(|l| l.control_plane_secrets())
        .next()
    {
        if cfg.dynamic.as_ref().and_then(|d| d.ads.as_ref()).is_none() {
            return Err(ServeError::StaticSdsWithoutXds(r.path.clone()));
        }
    }
    let gateway =
        Gateway::start(&at_start, &opts, store.clone(), providers, clusters).map_err(|source| {
            ServeError::Gateway {
                context: origin.context.clone(),
                source: Box::new(source),
            }
        })?;
    let drain = gateway.drain_handle();
    quickshake_control::reload::spawn(
        at_start
            .listeners
            .iter()
            .cloned()
            .zip(gateway.listeners.iter().cloned())
            .collect(),
        store.clone(),
        providers.clone(),
        clusters.clone(),
        Duration::from_millis(cli.reload_interval_ms),
    );
    let (xds, xds_listeners) = match &cfg.dynamic {
        Some(d) => {
            let (handle, view) = start_xds(d, &cfg, &gateway, &store, providers, clusters)?;
            (Some(handle), Some(view))
        }
        None => (None, None),
    };
    let mut admin = GatewayAdmin::new(
        store.clone(),
        gateway.listeners.clone(),
        cfg.config_dump(),
        command_line_options(cli, &opts),
        drain.clone(),
    );
    admin.node = cfg.node.clone();
    admin.dynamic_listeners = xds_listeners;
    admin.logging = Some(loggers);
    admin.runtime = quickshake_control::admin_state::runtime_layers(&cfg.runtime);
    admin.clusters = Some(clusters.clone());
    if let Some(x) = xds.clone() {
        admin.initialized = Some(Box::new(move || x.initialized()));
    }
    let dump_providers = providers.clone();
    admin.extra_dump = Some(Box::new(move || {
        let mut sections = dump_providers.config_dump();
        if let Some(x) = &xds {
            sections.extend(x.config_dump());
        }
        sections
    }));
    let admin: Arc<dyn AdminState> = Arc::new(admin);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::EventLoop)?;
    // Health checks and outlier detection run on this (main) event loop, off the workers.
    clusters.start_background(rt.handle().clone());
    rt.block_on(async {
        if let Some(listener) = admin_listener {
            start_admin(listener, admin, drain.clone())?;
        }
        tracing::info!(
            workers = opts.concurrency,
            listeners = gateway.listeners.len(),
            "quickshake started"
        );
        wait_for_signal_or_drain(&drain).await;
        Ok::<(), ServeError>(())
    })?;
    tracing::info!("draining");
    drain.drain();
    gateway.join();
    tracing::info!("exiting");
    Ok(())
}

/// The bootstrap less its static listeners whose secrets come from a control plane (those start
/// with the xDS client, once their secrets arrive).
fn served_at_start(cfg: &Bootstrap) -> Bootstrap {
    let mut at_start = cfg.clone();
    at_start
        .listeners
        .retain(|l| l.control_plane_secrets().is_empty());
    at_start
}

/// Start the xDS client for `dynamic_resources.ads_config`, talking to the static cluster it
/// names (its first endpoint: `socket_address`, or `pipe.path` as Istio renders it).
fn start_xds(
    d: &quickshake_config::DynamicResources,
    cfg: &Bootstrap,
    gateway: &Gateway,
    store: &Store,
    providers: &Arc<Providers>,
    clusters: &quickshake_upstream::ClusterManager,
) -> Result<(quickshake_xds::XdsHandle, quickshake_control::ListenerView), ServeError> {
    let Some(ads) = &d.ads else {
        return Err(ServeError::NoAdsConfig(d.path.clone()));
    };
    for src in [&d.lds, &d.cds].into_iter().flatten() {
        if src.kind != quickshake_config::ConfigSourceKind::Ads {
            return Err(ServeError::SourceNotAds(src.path.clone()));
        }
    }
    let (endpoint, tls) =
        xds_cluster(&cfg.clusters, &ads.cluster_name).map_err(|source| ServeError::XdsCluster {
            field: ads.path.clone(),
            source,
        })?;
    let statics = cfg.clusters.clone();
    let resolve: quickshake_xds::Resolver = Arc::new(move |name| xds_cluster(&statics, name));
    let sink = quickshake_control::DynamicConfig::new(
        cfg.clone(),
        gateway.workers(),
        store.clone(),
        providers.clone(),
        clusters.clone(),
    );
    // Envoy's init manager waits for the first LDS and CDS answers, each up to its
    // initial_fetch_timeout (0s: for ever).
    let deadlines: Vec<Option<Duration>> = [&d.lds, &d.cds]
        .into_iter()
        .flatten()
        .map(|s| s.initial_fetch_deadline())
        .collect();
    let initial_fetch = if deadlines.iter().any(Option::is_none) {
        None
    } else {
        Some(deadlines.into_iter().flatten().max().unwrap_or_default())
    };
    let opts = quickshake_xds::XdsOptions {
        node: cfg.node.clone(),
        ads: ads.clone(),
        endpoint,
        tls,
        initial_fetch,
        resolve,
        static_secrets: quickshake_xds::state::static_secret_refs(&cfg.listeners),
    };
    tracing::info!(cluster = %ads.cluster_name, api_type = ?ads.api_type, "starting the xDS client");
    let view = sink.listener_view();
    let handle =
        quickshake_xds::spawn(opts, Box::new(sink), store).map_err(ServeError::XdsClient)?;
    Ok((handle, view))
}

/// How the xDS client reaches the static cluster `name`: its first endpoint (`socket_address`,
/// or `pipe.path` as Istio renders it) and its TLS context (ALPN `h2` unless it names others).
fn xds_cluster(
    clusters: &[quickshake_config::Cluster],
    name: &str,
) -> Result<
    (
        quickshake_xds::XdsEndpoint,
        Option<Arc<quickshake_tls::ClientTls>>,
    ),
    ResolveError,
> {
    let cluster = clusters
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| ResolveError::UnknownCluster(name.to_owned()))?;
    let endpoint = match (cluster.endpoints.first(), &cluster.pipe) {
        (_, Some(path)) => quickshake_xds::XdsEndpoint::Unix(path.clone()),
        (Some(e), None) => quickshake_xds::XdsEndpoint::Tcp(e.host.clone(), e.port),
        (None, None) => return Err(ResolveError::NoEndpoint(name.to_owned())),
    };
    let tls = match &cluster.upstream_tls {
        Some(t) => {
            let mut spec = quickshake_control::clusters::tls_spec(cluster, t)
                .map_err(|e| ResolveError::TlsSpec(Box::new(e)))?;
            if spec.alpn.is_empty() {
                spec.alpn = vec!["h2".to_owned()];
            }
            let ctx = quickshake_tls::ClientTls::new(&spec).map_err(|source| {
                ResolveError::ClientTls {
                    field: format!("{}.transport_socket", cluster.path),
                    source,
                }
            })?;
            Some(Arc::new(ctx))
        }
        None => None,
    };
    Ok((endpoint, tls))
}

/// `/server_info`'s `command_line_options`: Envoy's field names and value forms where Envoy has
/// the flag, then quickshake's own.
fn command_line_options(cli: &Cli, opts: &GatewayOptions) -> serde_json::Value {
    serde_json::json!({
        "concurrency": opts.concurrency,
        "config_path": cli.config.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        "config_yaml": cli
            .config_yaml
            .as_deref()
            .map(quickshake_config::redacted_config_yaml)
            .unwrap_or_default(),
        "log_level": cli.log_level,
        "component_log_level": cli
            .component_log_level
            .as_ref()
            .map(|c| c.text.clone())
            .unwrap_or_default(),
        "log_format": cli.log_format.clone().unwrap_or_default(),
        "mode": "Serve",
        "cpuset_threads": cli.cpuset_threads,
        "drain_time": format!("{}s", cli.drain_time_s),
        "drain_strategy": cli.drain_strategy.envoy_name(),
        "service_cluster": cli.service_cluster.clone().unwrap_or_default(),
        "service_node": cli.service_node.clone().unwrap_or_default(),
        "service_zone": cli.service_zone.clone().unwrap_or_default(),
        "local_address_ip_version": cli.local_address_ip_version.envoy_name(),
        "file_flush_interval": format!("{}s", cli.file_flush_interval_msec as f64 / 1000.0),
        "disable_hot_restart": cli.disable_hot_restart,
        "allow_unknown_static_fields": cli.allow_unknown_static_fields,
        "admin_address_path": cli
            .admin_address_path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        "skip_deprecated_logs": cli.skip_deprecated_logs,
        "enable_core_dump": cli.enable_core_dump,
        "file_flush_min_size": cli.file_flush_min_size_kb,
        "restart_epoch": cli.restart_epoch,
        "parent_shutdown_time": format!("{}s", cli.parent_shutdown_time_s),
        "handshake_priority": format!("{:?}", cli.handshake_priority).to_lowercase(),
        "batch_threads": cli.batch_threads,
        "reload_interval": format!("{}s", cli.reload_interval_ms as f64 / 1000.0),
    })
}

fn bind_admin(addr: SocketAddr) -> Result<std::net::TcpListener, ServeError> {
    let bind_error = |source| ServeError::AdminBind { addr, source };
    let l = std::net::TcpListener::bind(addr).map_err(bind_error)?;
    l.set_nonblocking(true).map_err(bind_error)?;
    Ok(l)
}

/// Say where the admin endpoint listens, as Envoy does once its admin listener is bound: the
/// log line `admin address: IP:PORT` and, with `--admin-address-path`, that address alone
/// (`127.0.0.1:PORT`, `[::1]:PORT`; no newline) written over the file. With `port_value: 0` it
/// is the port the kernel chose. A file that cannot be written is logged and not fatal, as in
/// Envoy.
fn announce_admin(
    listener: &std::net::TcpListener,
    path: Option<&std::path::Path>,
) -> Result<(), ServeError> {
    let addr = listener.local_addr().map_err(ServeError::AdminListener)?;
    tracing::info!("admin address: {addr}");
    if let Some(path) = path {
        if let Err(e) = std::fs::write(path, addr.to_string()) {
            tracing::error!(
                path = %path.display(),
                error = %e,
                "cannot open admin address output file for writing"
            );
        }
    }
    Ok(())
}

fn start_admin(
    listener: std::net::TcpListener,
    state: Arc<dyn AdminState>,
    drain: DrainHandle,
) -> Result<(), ServeError> {
    let listener =
        tokio::net::TcpListener::from_std(listener).map_err(ServeError::AdminListener)?;
    tokio::spawn(async move {
        let shutdown = async move {
            // The admin endpoint stays up while draining; it goes with the process.
            std::future::pending::<()>().await;
        };
        if let Err(e) = quickshake_admin::serve(listener, state, shutdown).await {
            tracing::error!(error = %e, "admin endpoint stopped");
        }
        drop(drain);
    });
    Ok(())
}

async fn wait_for_signal_or_drain(drain: &DrainHandle) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot install signal handlers; stop with /quitquitquit");
        while !drain.is_draining() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => return,
            _ = int.recv() => return,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                if drain.is_draining() {
                    return;
                }
            }
        }
    }
}
