//! The typed view of operations state the server hands to `/listeners`, `/logging` and
//! `/runtime`: running listeners, runtime layers, and the log level control the binary owns.
//! Plain data and one trait; no rendering (that is `ops`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

/// One running listener: its name and the addresses it accepts on (the first is Envoy's
/// `local_address`, the rest `additional_local_addresses`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerInfo {
    pub name: String,
    pub addresses: Vec<SocketAddr>,
}

/// One layer of `layered_runtime`, as `/runtime` lists it: its name and the values it sets
/// (Envoy's raw string form, e.g. `"5000"`), by flattened key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeLayer {
    pub name: String,
    /// An `admin_layer` (the one `/runtime_modify` writes in Envoy).
    pub admin: bool,
    pub values: BTreeMap<String, String>,
}

/// Envoy's (spdlog's) log levels, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warning,
    Error,
    Critical,
    Off,
}

impl LogLevel {
    /// Every level, in Envoy's order.
    pub const ALL: [LogLevel; 7] = [
        LogLevel::Trace,
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Off,
    ];

    /// Envoy's name (`warning`, not `warn`).
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Off => "off",
        }
    }

    /// The level Envoy's admin accepts under this exact (lower-case) name.
    pub fn parse(name: &str) -> Option<LogLevel> {
        LogLevel::ALL.into_iter().find(|l| l.name() == name)
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A logger name `/logging` does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown logger name")]
pub struct UnknownLogger;

/// The loggers the process has and how to change their levels at run time; the binary owns
/// the subscriber and implements this.
pub trait LogControl: Send + Sync {
    /// Every logger with its level, in the order `/logging` lists them.
    fn loggers(&self) -> Vec<(String, LogLevel)>;
    /// Set every logger to `level`.
    fn set_all(&self, level: LogLevel);
    /// Set the named loggers; nothing changes when one name is unknown.
    fn set(&self, changes: &[(String, LogLevel)]) -> Result<(), UnknownLogger>;
}
