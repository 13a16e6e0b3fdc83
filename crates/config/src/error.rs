//! The one error type of the crate. Every variant that concerns a place in the configuration
//! carries the field path (`static_resources.listeners[0].address`) and shows it first.

use std::path::PathBuf;

/// A configuration that cannot be loaded. `Display` starts with the field path where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration file itself could not be read.
    #[error("cannot read config file {}: {source}", file.display())]
    ReadConfig {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The text is not YAML / JSON at all.
    #[error("{origin}: {message}")]
    Syntax { origin: String, message: String },
    /// A field Envoy does not know (or that is misspelt).
    #[error("{}: unknown field", show(path))]
    UnknownField { path: String },
    /// A field or value Envoy knows but quickshake does not implement (yet).
    #[error("{}: not supported yet{}", show(path), reason_suffix(reason))]
    Unsupported {
        path: String,
        reason: Option<String>,
    },
    /// A value of the wrong type, out of range, missing, or inconsistent.
    #[error("{}: {message}", show(path))]
    Invalid { path: String, message: String },
    /// A data source (certificate, key, CA file) could not be read.
    #[error("{}: cannot read {}: {source}", show(path), file.display())]
    ReadData {
        path: String,
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An error in the bootstrap given as a string (Envoy's `--config-yaml`), alone or merged into
    /// the file's: the inner error's field path is the merged document's.
    #[error("--config-yaml: {0}")]
    ConfigYaml(#[source] Box<ConfigError>),
}

impl ConfigError {
    /// The field path the error is about, where there is one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ConfigError::ReadConfig { .. } | ConfigError::Syntax { .. } => None,
            ConfigError::UnknownField { path }
            | ConfigError::Unsupported { path, .. }
            | ConfigError::Invalid { path, .. }
            | ConfigError::ReadData { path, .. } => Some(path),
            ConfigError::ConfigYaml(inner) => inner.path(),
        }
    }

    /// The error with its field path put under `root` (`"{root}: {path}"`, or `root` alone for
    /// the resource itself), for resources parsed on their own (RDS, CDS, EDS).
    pub(crate) fn rooted(self, root: &str) -> Self {
        let put = |path: String| {
            if root.is_empty() {
                path
            } else if path.is_empty() {
                root.to_owned()
            } else {
                format!("{root}: {path}")
            }
        };
        match self {
            ConfigError::UnknownField { path } => ConfigError::UnknownField { path: put(path) },
            ConfigError::Unsupported { path, reason } => ConfigError::Unsupported {
                path: put(path),
                reason,
            },
            ConfigError::Invalid { path, message } => ConfigError::Invalid {
                path: put(path),
                message,
            },
            ConfigError::ReadData { path, file, source } => ConfigError::ReadData {
                path: put(path),
                file,
                source,
            },
            ConfigError::ConfigYaml(inner) => ConfigError::ConfigYaml(Box::new(inner.rooted(root))),
            e @ (ConfigError::ReadConfig { .. } | ConfigError::Syntax { .. }) => e,
        }
    }

    pub(crate) fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }

    pub(crate) fn unsupported(path: impl Into<String>, reason: Option<&str>) -> Self {
        ConfigError::Unsupported {
            path: path.into(),
            reason: reason.map(str::to_owned),
        }
    }
}

fn show(path: &str) -> &str {
    if path.is_empty() {
        "(root)"
    } else {
        path
    }
}

fn reason_suffix(reason: &Option<String>) -> String {
    match reason {
        Some(r) => format!(" ({r})"),
        None => String::new(),
    }
}
