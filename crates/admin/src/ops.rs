//! `/listeners`, `/logging`, `/runtime` and `/runtime_modify`: Envoy 1.39.3's bodies and
//! status codes, rendered from the typed views of [`crate::ops_types`]. Pure: the only effect
//! is calling [`LogControl`].

use serde_json::{json, Map, Value};

use crate::ops_types::{ListenerInfo, LogControl, LogLevel, RuntimeLayer, UnknownLogger};

/// Envoy's query parameters: `k=v` pairs split on `&`, not decoded; a pair with no value is
/// dropped and the first of a repeated key wins.
fn params(query: &str) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for pair in query.split('&') {
        let Some((k, v)) = pair.split_once('=') else {
            continue;
        };
        if k.is_empty() || v.is_empty() || out.iter().any(|(seen, _)| *seen == k) {
            continue;
        }
        out.push((k, v));
    }
    out
}

/// `/listeners` as text: `name::address` per address.
pub fn listeners_text(listeners: &[ListenerInfo]) -> String {
    let mut out = String::new();
    for l in listeners {
        for a in &l.addresses {
            out.push_str(&format!("{}::{a}\n", l.name));
        }
    }
    out
}

/// `/listeners?format=json`: Envoy's `admin.v3.Listeners`.
pub fn listeners_json(listeners: &[ListenerInfo]) -> Value {
    let address = |a: &std::net::SocketAddr| json!({"socket_address": {"address": a.ip().to_string(), "port_value": a.port()}});
    let statuses: Vec<Value> = listeners
        .iter()
        .map(|l| {
            let mut s = Map::new();
            s.insert("name".into(), json!(l.name));
            if let Some(first) = l.addresses.first() {
                s.insert("local_address".into(), address(first));
            }
            if l.addresses.len() > 1 {
                let more: Vec<Value> = l.addresses[1..].iter().map(address).collect();
                s.insert("additional_local_addresses".into(), json!(more));
            }
            Value::Object(s)
        })
        .collect();
    json!({ "listener_statuses": statuses })
}

/// Whether `/listeners` was asked for JSON (`format=json`).
pub fn wants_json(query: &str) -> bool {
    params(query)
        .iter()
        .any(|&(k, v)| k == "format" && v == "json")
}

/// `/logging` (POST): change levels as the query asks, then list every logger. Returns the
/// status (400 when the query is refused) and Envoy's text.
pub fn logging(ctl: Option<&dyn LogControl>, query: &str) -> (u16, String) {
    let params = params(query);
    let mut out = String::new();
    let mut status = 200;
    if !params.is_empty() {
        if let Err(reason) = change_levels(ctl, &params) {
            status = 400;
            out.push_str(&format!("error: {reason}\n\n"));
            out.push_str("usage: /logging?<name>=<level> (change single level)\n");
            out.push_str(
                "usage: /logging?paths=name1:level1,name2:level2,... (change multiple levels)\n",
            );
            out.push_str("usage: /logging?level=<level> (change all levels)\n");
            out.push_str("levels: ");
            for l in LogLevel::ALL {
                out.push_str(l.name());
                out.push(' ');
            }
            out.push('\n');
        }
    }
    out.push_str("active loggers:\n");
    for (name, level) in ctl.map(|c| c.loggers()).unwrap_or_default() {
        out.push_str(&format!("  {name}: {level}\n"));
    }
    out.push('\n');
    (status, out)
}

/// Why a `/logging` request changes nothing; displayed as Envoy's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum LoggingError {
    #[error("invalid number of parameters")]
    ParameterCount,
    #[error("unknown logger level")]
    UnknownLevel,
    #[error("empty logger name or empty logger level")]
    EmptyPair,
    #[error(transparent)]
    UnknownLogger(#[from] UnknownLogger),
}

fn level(name: &str) -> Result<LogLevel, LoggingError> {
    LogLevel::parse(name).ok_or(LoggingError::UnknownLevel)
}

/// Envoy's `changeLogLevel`: `level=` (all), `paths=a:l,b:l`, or `<logger>=<level>`.
fn change_levels(
    ctl: Option<&dyn LogControl>,
    params: &[(&str, &str)],
) -> Result<(), LoggingError> {
    let [(key, value)] = params else {
        return Err(LoggingError::ParameterCount);
    };
    if *key == "level" {
        let l = level(value)?;
        tracing::info!("change all log levels: level='{l}'");
        if let Some(c) = ctl {
            c.set_all(l);
        }
        return Ok(());
    }
    let mut changes = Vec::new();
    if *key == "paths" {
        for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
            let (name, lvl) = pair.split_once(':').unwrap_or((pair, ""));
            if name.trim().is_empty() || lvl.trim().is_empty() {
                return Err(LoggingError::EmptyPair);
            }
            changes.push((name.trim().to_owned(), level(lvl.trim())?));
        }
    } else {
        changes.push(((*key).to_owned(), level(value)?));
    }
    let ctl = ctl.ok_or(UnknownLogger)?;
    ctl.set(&changes)?;
    for (name, l) in &changes {
        tracing::info!("change log level: name='{name}' level='{l}'");
    }
    Ok(())
}

/// `/runtime`: every layer's name, and for each key every layer's value (empty where the layer
/// does not set it) and the last one set.
pub fn runtime_json(layers: &[RuntimeLayer]) -> Value {
    let mut keys: Vec<&String> = layers.iter().flat_map(|l| l.values.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut entries = Map::new();
    for key in keys {
        let values: Vec<&str> = layers
            .iter()
            .map(|l| l.values.get(key).map_or("", String::as_str))
            .collect();
        let last = values.iter().rev().find(|v| !v.is_empty()).copied();
        entries.insert(
            key.clone(),
            json!({"layer_values": values, "final_value": last.unwrap_or("")}),
        );
    }
    let names: Vec<&str> = layers.iter().map(|l| l.name.as_str()).collect();
    json!({"layers": names, "entries": entries})
}

/// `/runtime_modify` (POST). quickshake reads its runtime keys at start, so overrides are
/// refused: as Envoy's when there is no admin layer (503 `No admin layer specified`), and with a
/// reason of its own when there is one.
pub fn runtime_modify(layers: &[RuntimeLayer], query: &str) -> (u16, String) {
    if params(query).is_empty() {
        return (
            400,
            "usage: /runtime_modify?key1=value1&key2=value2&keyN=valueN\n       \
             or send the parameters as form values\n\
             use an empty value to remove a previously added override"
                .into(),
        );
    }
    if !layers.iter().any(|l| l.admin) {
        return (503, "No admin layer specified".into());
    }
    (
        503,
        "runtime overrides are not supported by quickshake: its runtime keys are read at start"
            .into(),
    )
}
