//! The endpoint table and the pure request → response mapping.

use hyper::Method;
use quickshake_stats::{Format, QueryError, StatsQuery};
use thiserror::Error;

use crate::ops;
use crate::state::{AdminState, DrainListeners};

/// Content type of plain-text admin answers (Envoy's `TextUtf8`).
pub const TEXT: &str = "text/plain; charset=UTF-8";
/// Content type of JSON admin answers.
pub const JSON: &str = "application/json";

/// What the admin endpoint answers: status, content type and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl AdminResponse {
    fn text(status: u16, body: impl Into<String>) -> Self {
        AdminResponse {
            status,
            content_type: TEXT,
            body: body.into(),
        }
    }

    fn json(value: &serde_json::Value) -> Self {
        // `Value` always serialises; fall back to compact output regardless.
        let mut body = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
        body.push('\n');
        AdminResponse {
            status: 200,
            content_type: JSON,
            body,
        }
    }
}

/// Why a request was refused; `Display` is Envoy's response body.
#[derive(Debug, Error)]
pub enum AdminError {
    #[error("Method {0} not allowed, POST required.")]
    MethodNotAllowed(Method),
    #[error("invalid path. {}", help_text())]
    NotFound,
    #[error("{0}")]
    BadQuery(#[from] QueryError),
}

impl AdminError {
    /// HTTP status Envoy uses for this error.
    pub fn status(&self) -> u16 {
        match self {
            AdminError::MethodNotAllowed(_) => 405,
            AdminError::NotFound => 404,
            AdminError::BadQuery(_) => 400,
        }
    }
}

impl From<AdminError> for AdminResponse {
    fn from(e: AdminError) -> Self {
        AdminResponse::text(e.status(), e.to_string())
    }
}

/// One admin endpoint.
struct Endpoint {
    path: &'static str,
    help: &'static str,
    /// Mutates server state: Envoy requires POST.
    post: bool,
    params: &'static [(&'static str, &'static str)],
}

const STATS_PARAMS: &[(&str, &str)] = &[
    (
        "usedonly",
        "Only include stats that have been written by system since restart",
    ),
    (
        "filter",
        "Regular expression (Google re2) for filtering stats",
    ),
    ("format", "Format to use: text, json or prometheus"),
    (
        "type",
        "Stat types to include: All, Counters, Gauges or Histograms",
    ),
    (
        "histogram_buckets",
        "Histogram bucket display mode: summary, cumulative, disjoint or detailed",
    ),
];

const LISTENERS_PARAMS: &[(&str, &str)] = &[("format", "File format to use; One of (text, json)")];

const LOGGING_PARAMS: &[(&str, &str)] = &[
    (
        "paths",
        "Change multiple logging levels by setting to <logger_name1>:<desired_level1>,<logger_name2>:<desired_level2>.",
    ),
    (
        "level",
        "desired logging level, this will change all loggers's level; One of (, trace, debug, info, warning, error, critical, off)",
    ),
];

const DRAIN_PARAMS: &[(&str, &str)] = &[
    ("graceful", "When draining listeners, enter a graceful drain period prior to closing listeners. This behaviour and duration is configurable via server options or CLI"),
    ("skip_exit", "When draining listeners, do not exit after the drain period. This must be used with graceful"),
    ("inboundonly", "Drains all inbound listeners. traffic_direction field in envoy_v3_api_msg_config.listener.v3.Listener is used to determine whether a listener is inbound or outbound."),
];

const RUNTIME_MODIFY_HELP: &str = "Adds or modifies runtime values as passed in query parameters. To delete a previously added key, use an empty string as the value. Note that deletion only applies to overrides added via this endpoint; values loaded from disk can be modified via override but not deleted. E.g. ?key1=value1&key2=value2...";

const PROM_PARAMS: &[(&str, &str)] = &[
    (
        "usedonly",
        "Only include stats that have been written by system since restart",
    ),
    (
        "filter",
        "Regular expression (Google re2) for filtering stats",
    ),
];

/// Sorted by path, as Envoy lists them.
const ENDPOINTS: &[Endpoint] = &[
    Endpoint {
        path: "/",
        help: "Admin home page",
        post: false,
        params: &[],
    },
    Endpoint {
        path: "/certs",
        help: "print certs on machine",
        post: false,
        params: &[],
    },
    Endpoint {
        path: "/clusters",
        help: "upstream cluster status",
        post: false,
        params: &[("format", "File format to use; One of (text, json)")],
    },
    Endpoint {
        path: "/config_dump",
        help: "dump current Envoy configs (experimental)",
        post: false,
        params: &[],
    },
    Endpoint {
        path: "/drain_listeners",
        help: "drain listeners",
        post: true,
        params: DRAIN_PARAMS,
    },
    Endpoint {
        path: "/healthcheck/fail",
        help: "cause the server to fail health checks",
        post: true,
        params: &[],
    },
    Endpoint {
        path: "/healthcheck/ok",
        help: "cause the server to pass health checks",
        post: true,
        params: &[],
    },
    Endpoint {
        path: "/help",
        help: "print out list of admin commands",
        post: false,
        params: &[],
    },
    Endpoint {
        path: "/listeners",
        help: "print listener info",
        post: false,
        params: LISTENERS_PARAMS,
    },
    Endpoint {
        path: "/logging",
        help: "query/change logging levels",
        post: true,
        params: LOGGING_PARAMS,
    },
    Endpoint {
        path: "/quitquitquit",
        help: "exit the server",
        post: true,
        params: &[],
    },
    Endpoint {
        path: "/ready",
        help: "print server state, return 200 if LIVE, otherwise return 503",
        post: false,
        params: &[],
    },
    Endpoint {
        path: "/runtime",
        help: "print runtime values",
        post: false,
        params: &[],
    },
    Endpoint {
        path: "/runtime_modify",
        help: RUNTIME_MODIFY_HELP,
        post: true,
        params: &[],
    },
    Endpoint {
        path: "/server_info",
        help: "print server version/status information",
        post: false,
        params: &[],
    },
    Endpoint {
        path: "/stats",
        help: "print server stats",
        post: false,
        params: STATS_PARAMS,
    },
    Endpoint {
        path: "/stats/prometheus",
        help: "print server stats in prometheus format",
        post: false,
        params: PROM_PARAMS,
    },
];

/// Envoy's `/help` text: `admin commands are:` then one line per endpoint.
pub fn help_text() -> String {
    let mut out = String::from("admin commands are:\n");
    for e in ENDPOINTS {
        out.push_str("  ");
        out.push_str(e.path);
        out.push_str(if e.post { " (POST): " } else { ": " });
        out.push_str(e.help);
        out.push('\n');
        for (name, help) in e.params {
            out.push_str("      ");
            out.push_str(name);
            out.push_str(": ");
            out.push_str(help);
            out.push('\n');
        }
    }
    out
}

/// Answers one admin request without any I/O beyond calling `state`.
/// `path_and_query` is the request target, e.g. `/stats?format=prometheus`.
pub fn handle(state: &dyn AdminState, method: &Method, path_and_query: &str) -> AdminResponse {
    route(state, method, path_and_query).unwrap_or_else(AdminResponse::from)
}

fn route(
    state: &dyn AdminState,
    method: &Method,
    path_and_query: &str,
) -> Result<AdminResponse, AdminError> {
    let path = path_and_query
        .split_once('?')
        .map_or(path_and_query, |(p, _)| p);
    let endpoint = ENDPOINTS
        .iter()
        .find(|e| e.path == path)
        .ok_or(AdminError::NotFound)?;
    if endpoint.post && method != Method::POST {
        tracing::warn!(path, %method, "admin path mutates state; POST required");
        return Err(AdminError::MethodNotAllowed(method.clone()));
    }
    Ok(match endpoint.path {
        "/" | "/help" => AdminResponse::text(200, help_text()),
        "/ready" => ready(state),
        "/server_info" => AdminResponse::json(&state.server_info()),
        "/certs" => AdminResponse::json(&state.certs()),
        "/clusters" => clusters(state, path_and_query),
        "/config_dump" => AdminResponse::json(&state.config_dump()),
        "/stats" => stats(state, path_and_query, None)?,
        "/stats/prometheus" => stats(state, path_and_query, Some(Format::Prometheus))?,
        "/healthcheck/fail" => {
            state.set_health_check_failed(true);
            AdminResponse::text(200, "OK\n")
        }
        "/healthcheck/ok" => {
            state.set_health_check_failed(false);
            AdminResponse::text(200, "OK\n")
        }
        "/drain_listeners" => drain_listeners(state, query_of(path_and_query)),
        "/quitquitquit" => {
            state.quit();
            AdminResponse::text(200, "OK\n")
        }
        "/listeners" | "/logging" | "/runtime" | "/runtime_modify" => {
            operations(state, endpoint.path, query_of(path_and_query))
        }
        _ => return Err(AdminError::NotFound),
    })
}

/// `/drain_listeners`: Envoy's `handlerDrainListeners`. Its flags count by presence;
/// `skip_exit` without `graceful` is refused (400), as Envoy 1.39 does.
fn drain_listeners(state: &dyn AdminState, query: &str) -> AdminResponse {
    let has = |name: &str| {
        query
            .split('&')
            .any(|kv| kv.split_once('=').map_or(kv, |(k, _)| k) == name)
    };
    let drain = DrainListeners {
        inbound_only: has("inboundonly"),
        graceful: has("graceful"),
        skip_exit: has("skip_exit"),
    };
    if drain.skip_exit && !drain.graceful {
        return AdminResponse::text(400, "skip_exit requires graceful\n");
    }
    state.drain_listeners(drain);
    AdminResponse::text(200, "OK\n")
}

fn query_of(path_and_query: &str) -> &str {
    path_and_query.split_once('?').map_or("", |(_, q)| q)
}

/// `/listeners`, `/logging`, `/runtime`, `/runtime_modify` (rendered by [`ops`]).
fn operations(state: &dyn AdminState, path: &str, query: &str) -> AdminResponse {
    match path {
        "/listeners" if ops::wants_json(query) => {
            AdminResponse::json(&ops::listeners_json(&state.listeners()))
        }
        "/listeners" => AdminResponse::text(200, ops::listeners_text(&state.listeners())),
        "/logging" => {
            let (status, body) = ops::logging(state.log_control(), query);
            AdminResponse::text(status, body)
        }
        "/runtime" => AdminResponse::json(&ops::runtime_json(&state.runtime_layers())),
        _ => {
            let (status, body) = ops::runtime_modify(&state.runtime_layers(), query);
            AdminResponse::text(status, body)
        }
    }
}

/// `/clusters`: Envoy's text lines, or `ClusterStatuses` JSON with `format=json` (any other
/// format is text, as in Envoy).
fn clusters(state: &dyn AdminState, path_and_query: &str) -> AdminResponse {
    let query = path_and_query.split_once('?').map_or("", |(_, q)| q);
    let json = query.split('&').any(|kv| kv == "format=json");
    let all = state.clusters();
    if json {
        AdminResponse::json(&crate::clusters::render_json(&all))
    } else {
        AdminResponse::text(200, crate::clusters::render_text(&all))
    }
}

/// `/ready`: `LIVE` with 200, otherwise the server state with 503.
fn ready(state: &dyn AdminState) -> AdminResponse {
    if state.is_live() {
        return AdminResponse::text(200, "LIVE\n");
    }
    let info = state.server_info();
    let reported = info
        .get("state")
        .and_then(serde_json::Value::as_str)
        .filter(|s| *s != "LIVE")
        .unwrap_or("DRAINING");
    AdminResponse::text(503, format!("{reported}\n"))
}

fn stats(
    state: &dyn AdminState,
    path_and_query: &str,
    force: Option<Format>,
) -> Result<AdminResponse, AdminError> {
    let query = path_and_query.split_once('?').map_or("", |(_, q)| q);
    let mut q = StatsQuery::from_query_string(query)?;
    if let Some(f) = force {
        q.format = f;
    }
    let r = state.stats().render(&q);
    Ok(AdminResponse {
        status: 200,
        content_type: r.content_type,
        body: r.body,
    })
}
