//! The server-side interface: everything the admin endpoint reports or changes.

use crate::ops_types::{ListenerInfo, LogControl, RuntimeLayer};

/// `/drain_listeners`' query: each flag is set by its parameter's presence, whatever its value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainListeners {
    /// `inboundonly`: only the listeners with `traffic_direction: INBOUND`.
    pub inbound_only: bool,
    /// `graceful`: connections drain (close after their response) while the listeners go on
    /// accepting for the drain time; the listeners stop after it. Without it they stop at once.
    pub graceful: bool,
    /// `skip_exit` (with `graceful`): the listeners are not stopped after the drain time.
    pub skip_exit: bool,
}

/// What the admin endpoint needs from the running server.
pub trait AdminState: Send + Sync + 'static {
    /// The stat registry `/stats` renders.
    fn stats(&self) -> &quickshake_stats::Store;
    /// Envoy's `/server_info` JSON (`version`, `state`, `uptime_current_epoch`,
    /// `uptime_all_epochs`, `command_line_options{concurrency,...}`, ...).
    /// `/ready` also reads `state` from it to explain a 503.
    fn server_info(&self) -> serde_json::Value;
    /// Envoy's `/certs` JSON (`{"certificates":[...]}`).
    fn certs(&self) -> serde_json::Value;
    /// `/config_dump` JSON, already redacted by the caller.
    fn config_dump(&self) -> serde_json::Value;
    /// `/ready` answers 200 `LIVE` when true, else 503 with the state.
    fn is_live(&self) -> bool;
    /// `/healthcheck/fail` (true) and `/healthcheck/ok` (false); POST only.
    fn set_health_check_failed(&self, failed: bool);
    /// `/quitquitquit` (POST): answer `OK` then shut the server down. The
    /// implementation should only signal; the response is written first.
    fn quit(&self);
    /// `/drain_listeners` (POST), its query already checked (`skip_exit` needs `graceful`).
    /// The process goes on running, as Envoy's.
    fn drain_listeners(&self, drain: DrainListeners) {
        let _ = drain;
    }
    /// `/listeners`: every running listener, static and added over xDS.
    fn listeners(&self) -> Vec<ListenerInfo> {
        Vec::new()
    }
    /// `/logging`: the process's loggers and their levels; `None`: none to list or change.
    fn log_control(&self) -> Option<&dyn LogControl> {
        None
    }
    /// `/runtime`: `layered_runtime`'s layers with the keys quickshake reads.
    fn runtime_layers(&self) -> Vec<RuntimeLayer> {
        Vec::new()
    }
    /// `/clusters`: every upstream cluster with its hosts, sorted as the server wants them
    /// shown.
    fn clusters(&self) -> Vec<crate::ClusterStatus> {
        Vec::new()
    }
}
