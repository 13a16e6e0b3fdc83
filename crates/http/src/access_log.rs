//! Envoy-style access logs: a parsed format (text or JSON, see [`format`]) written one line per
//! request to a file, stdout or stderr. Formatting is pure and unit-tested in [`format`]; sinks
//! are line-buffered and shared by all workers.

pub(crate) mod format;

use std::fs::OpenOptions;
use std::io::{LineWriter, Write};
use std::sync::{Arc, Mutex};

use quickshake_config::{AccessLog, AccessLogSink, LogFormat};

pub(crate) use format::LogRecord;

/// One configured access log: a format and a sink shared by all workers.
#[derive(Clone)]
pub struct AccessLogger {
    format: Arc<LogFormat>,
    omit_empty_values: bool,
    sink: Arc<Mutex<Box<dyn Write + Send>>>,
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
            sink: Arc::new(Mutex::new(sink)),
        })
    }

    pub fn log(&self, r: &LogRecord) {
        let line = format::render(&self.format, self.omit_empty_values, r);
        if let Ok(mut sink) = self.sink.lock() {
            // A full disk must not take the data path down; the line is dropped.
            let _ = sink.write_all(line.as_bytes());
        }
    }
}
