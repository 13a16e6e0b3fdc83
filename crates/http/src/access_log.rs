//! Envoy-style access logs: a parsed format (text or JSON, see [`format`]) written one line per
//! request (the HTTP connection manager's) or per unserved connection (a listener's) to a file,
//! stdout or stderr, when the log's `filter` passes it. Formatting is pure and unit-tested in
//! [`format`]; sinks are line-buffered and shared by all workers.

pub(crate) mod format;

use std::fs::OpenOptions;
use std::io::{LineWriter, Write};
use std::sync::{Arc, Mutex};

use quickshake_config::{AccessLog, AccessLogFilter, AccessLogSink, LogFormat};

pub use format::LogRecord;

use crate::error::HttpError;

/// One configured access log: a format and a sink shared by all workers.
#[derive(Clone)]
pub struct AccessLogger {
    format: Arc<LogFormat>,
    omit_empty_values: bool,
    filter: Option<AccessLogFilter>,
    sink: Arc<Mutex<Box<dyn Write + Send>>>,
}

/// Open `access_log[]` of the configuration object at `path` (errors name
/// `{path}.access_log[i]`).
pub fn open_access_logs(logs: &[AccessLog], path: &str) -> Result<Vec<AccessLogger>, HttpError> {
    logs.iter()
        .enumerate()
        .map(|(i, l)| {
            AccessLogger::open(l).map_err(|e| HttpError::Invalid {
                field: format!("{path}.access_log[{i}]"),
                reason: format!("cannot open: {e}"),
            })
        })
        .collect()
}

impl AccessLogger {
    pub fn open(cfg: &AccessLog) -> std::io::Result<Self> {
        let sink: Box<dyn Write + Send> = match &cfg.sink {
            AccessLogSink::File(path) => Box::new(LineWriter::new(
                OpenOptions::new().create(true).append(true).open(path)?,
            )),
            AccessLogSink::Stdout => Box::new(LineWriter::new(std::io::stdout())),
            AccessLogSink::Stderr => Box::new(std::io::stderr()),
        };
        Ok(AccessLogger {
            format: Arc::new(cfg.format.clone()),
            omit_empty_values: cfg.omit_empty_values,
            filter: cfg.filter.clone(),
            sink: Arc::new(Mutex::new(sink)),
        })
    }

    pub fn log(&self, r: &LogRecord) {
        if let Some(f) = &self.filter {
            if !f.passes(r.response_flags) {
                return;
            }
        }
        let line = format::render(&self.format, self.omit_empty_values, r);
        if let Ok(mut sink) = self.sink.lock() {
            // A full disk must not take the data path down; the line is dropped.
            let _ = sink.write_all(line.as_bytes());
        }
    }
}
