//! The process's loggers, as Envoy names them: each Envoy logger covers some of quickshake's
//! tracing targets; `--log-level` and `--component-log-level` set their levels at start, and
//! the admin endpoint's `/logging` lists and changes them while running (through the
//! [`LogControl`] this implements, which swaps the subscriber's `EnvFilter`).

use std::sync::{Mutex, PoisonError};

use quickshake_admin::{LogControl, LogLevel, UnknownLogger};
use tracing_subscriber::{reload, EnvFilter, Registry};

/// Envoy logger → the tracing targets (crate or module paths) it covers. Targets nest and the
/// longest that matches an event decides, so `connection` covers the rest of
/// `quickshake_listener`, and `misc` also every target not listed (dependencies included).
const LOGGERS: &[(&str, &[&str])] = &[
    (
        "admin",
        &["quickshake_admin", "quickshake_control::admin_state"],
    ),
    (
        "config",
        &[
            "quickshake_config",
            "quickshake_xds",
            "quickshake_control::dynamic",
        ],
    ),
    (
        "conn_handler",
        &[
            "quickshake_listener::listener",
            "quickshake_server::worker",
            "quickshake_listener::admission",
            "quickshake_listener::handshake_limit",
        ],
    ),
    (
        "connection",
        &[
            "quickshake_listener",
            "quickshake_quic",
            "quickshake_server",
            "quickshake_tls",
        ],
    ),
    (
        "filter",
        &[
            "quickshake_http::filters",
            "quickshake_http::header_mutation",
            "quickshake_listener::tcp_proxy",
        ],
    ),
    ("http", &["quickshake_http"]),
    ("main", &["quickshake", "quickshake_server::gateway"]),
    (
        "misc",
        &[
            "quickshake_keyprovider",
            "quickshake_mbmath",
            "quickshake_stats",
        ],
    ),
    ("pool", &["quickshake_upstream::pool"]),
    (
        "router",
        &["quickshake_http::proxy", "quickshake_http::routing"],
    ),
    ("secret", &["quickshake_control::reload"]),
    (
        "upstream",
        &["quickshake_upstream", "quickshake_control::clusters"],
    ),
];

/// The level an event must reach to be written, as an `EnvFilter` directive.
fn directive_level(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Trace => "trace",
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Warning => "warn",
        LogLevel::Error | LogLevel::Critical => "error",
        LogLevel::Off => "off",
    }
}

/// A level as the command line gives it (already checked by `cli::tracing_level`): Envoy's
/// names, any case, and tracing's `warn`.
pub fn cli_level(name: &str) -> LogLevel {
    let lower = name.to_ascii_lowercase();
    if lower == "warn" {
        return LogLevel::Warning;
    }
    LogLevel::parse(&lower).unwrap_or(LogLevel::Info)
}

/// Every logger's level, and the filter that enforces them.
pub struct Loggers {
    levels: Mutex<Vec<(&'static str, LogLevel)>>,
    reload: Option<reload::Handle<EnvFilter, Registry>>,
}

impl Loggers {
    /// Every logger at `base`, then each of `components` (`--component-log-level`) at its
    /// level. Returns the component names that name no logger.
    pub fn new(base: LogLevel, components: &[(String, LogLevel)]) -> (Loggers, Vec<String>) {
        let mut levels: Vec<(&'static str, LogLevel)> =
            LOGGERS.iter().map(|&(name, _)| (name, base)).collect();
        let mut unknown = Vec::new();
        for (name, level) in components {
            match levels.iter_mut().find(|(n, _)| n == name) {
                Some(entry) => entry.1 = *level,
                None => unknown.push(name.clone()),
            }
        }
        let loggers = Loggers {
            levels: Mutex::new(levels),
            reload: None,
        };
        (loggers, unknown)
    }

    /// Make changes take effect through the subscriber's reloadable filter.
    pub fn attach(&mut self, handle: reload::Handle<EnvFilter, Registry>) {
        self.reload = Some(handle);
    }

    /// The filter for the current levels.
    pub fn filter(&self) -> EnvFilter {
        EnvFilter::new(directives(&self.lock()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(&'static str, LogLevel)>> {
        self.levels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn apply(&self) {
        if let Some(handle) = &self.reload {
            if let Err(e) = handle.reload(self.filter()) {
                tracing::warn!(error = %e, "cannot change the log levels");
            }
        }
    }
}

/// `EnvFilter` directives for `levels`: `misc`'s level for everything, then each logger's
/// targets at its level.
fn directives(levels: &[(&'static str, LogLevel)]) -> String {
    let level_of = |name: &str| {
        levels
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(LogLevel::Info, |&(_, l)| l)
    };
    let mut out = vec![directive_level(level_of("misc")).to_owned()];
    for &(name, targets) in LOGGERS {
        let level = directive_level(level_of(name));
        out.extend(targets.iter().map(|t| format!("{t}={level}")));
    }
    out.join(",")
}

impl LogControl for Loggers {
    fn loggers(&self) -> Vec<(String, LogLevel)> {
        self.lock()
            .iter()
            .map(|&(n, l)| (n.to_owned(), l))
            .collect()
    }

    fn set_all(&self, level: LogLevel) {
        for entry in self.lock().iter_mut() {
            entry.1 = level;
        }
        self.apply();
    }

    fn set(&self, changes: &[(String, LogLevel)]) -> Result<(), UnknownLogger> {
        {
            let mut levels = self.lock();
            if changes
                .iter()
                .any(|(name, _)| !levels.iter().any(|(n, _)| n == name))
            {
                return Err(UnknownLogger);
            }
            for (name, level) in changes {
                for entry in levels.iter_mut().filter(|(n, _)| n == name) {
                    entry.1 = *level;
                }
            }
        }
        self.apply();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_levels_and_directives() {
        let components = [
            ("upstream".to_owned(), LogLevel::Debug),
            ("connection".to_owned(), LogLevel::Trace),
            ("lua".to_owned(), LogLevel::Debug),
            ("misc".to_owned(), LogLevel::Error),
        ];
        let (loggers, unknown) = Loggers::new(LogLevel::Info, &components);
        assert_eq!(unknown, ["lua"]);
        let d = directives(&loggers.lock());
        assert!(d.starts_with("error,quickshake_admin=info,"), "{d}");
        assert!(d.contains(",quickshake_upstream=debug,"), "{d}");
        assert!(
            d.contains(",quickshake_server=trace,quickshake_tls=trace,"),
            "{d}"
        );
        assert!(d.contains(",quickshake_keyprovider=error,"), "{d}");
        assert!(loggers.set(&[("nope".into(), LogLevel::Off)]).is_err());
        loggers.set_all(LogLevel::Critical);
        assert!(loggers
            .loggers()
            .iter()
            .all(|(_, l)| *l == LogLevel::Critical));
        assert!(!directives(&loggers.lock()).contains("info"));
        // Sorted as `/logging` lists them.
        let names: Vec<&str> = LOGGERS.iter().map(|(n, _)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        assert_eq!(cli_level("WARN"), LogLevel::Warning);
        assert_eq!(cli_level("critical"), LogLevel::Critical);
    }
}
