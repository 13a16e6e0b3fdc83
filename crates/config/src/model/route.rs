//! Route configuration: where an HTTP connection manager's routes come from (inline or RDS), the
//! standalone `RouteConfiguration`, virtual hosts, route matching (path, `case_sensitive`,
//! `headers`) and route actions.

use std::time::Duration;

use super::xds::ConfigSource;

/// Where an HTTP connection manager's routes come from.
#[derive(Debug, Clone)]
pub enum RouteSource {
    /// `route_config`: inline (clusters checked unless `validate_clusters: false`).
    Static(RouteConfig),
    /// `rds`: the `RouteConfiguration` named `route_config_name`, delivered by xDS from
    /// `config_source`. Until it arrives, the connection manager has no routes.
    Rds {
        route_config_name: String,
        config_source: ConfigSource,
    },
}

impl RouteSource {
    /// The inline route configuration, if any.
    pub fn static_config(&self) -> Option<&RouteConfig> {
        match self {
            RouteSource::Static(rc) => Some(rc),
            RouteSource::Rds { .. } => None,
        }
    }
}

/// Envoy's `RouteConfiguration` (inline `route_config`, or an RDS resource parsed by
/// [`crate::route_configuration`]).
#[derive(Debug, Clone, Default)]
pub struct RouteConfig {
    /// `name` (empty when not set).
    pub name: String,
    /// Domains unique (case-insensitively) across the virtual hosts.
    pub virtual_hosts: Vec<VirtualHost>,
    /// `validate_clusters`: Envoy's default is true for `route_config` and false for RDS. When
    /// false, routes may name clusters that do not exist (yet): such a route answers 503 with the
    /// `NC` response flag.
    pub validate_clusters: bool,
    /// `ignore_port_in_host_matching` (default false): when set, the port of `Host` /
    /// `:authority` is dropped before the virtual host is chosen; when not, it is part of the
    /// host a domain must match, as in Envoy (`example.com` does not match `example.com:8443`).
    pub ignore_port_in_host_matching: bool,
    /// The route configuration's header mutations (applied after the virtual host's).
    pub mutations: HeaderMutations,
}

/// One level's `request_headers_to_add` / `_to_remove` and `response_headers_to_add` /
/// `_to_remove`. Names are lower case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderMutations {
    pub request_add: Vec<HeaderAdd>,
    pub request_remove: Vec<String>,
    pub response_add: Vec<HeaderAdd>,
    pub response_remove: Vec<String>,
}

impl HeaderMutations {
    pub fn is_empty(&self) -> bool {
        self.request_add.is_empty()
            && self.request_remove.is_empty()
            && self.response_add.is_empty()
            && self.response_remove.is_empty()
    }
}

/// Envoy's `HeaderValueOption` with a literal value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderAdd {
    pub name: String,
    pub value: String,
    pub action: AppendAction,
    /// `keep_empty_value`: an empty value is added rather than skipped.
    pub keep_empty_value: bool,
}

/// `append_action` (or the older `append`: true appends, false overwrites).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendAction {
    AppendIfExistsOrAdd,
    AddIfAbsent,
    OverwriteIfExistsOrAdd,
    OverwriteIfExists,
}

#[derive(Debug, Clone)]
pub struct VirtualHost {
    pub name: String,
    /// `*`, exact, `*.suffix`, `prefix*`; matched case-insensitively, port-stripped.
    pub domains: Vec<String>,
    pub routes: Vec<Route>,
    pub mutations: HeaderMutations,
}

#[derive(Debug, Clone)]
pub struct Route {
    /// `name` (empty when not given): the access log's `%ROUTE_NAME%`.
    pub name: String,
    /// `match.prefix` / `match.path` / `match.path_separated_prefix`.
    pub matcher: RouteMatch,
    /// `match.case_sensitive` (default true): whether the path matcher compares case-sensitively.
    pub case_sensitive: bool,
    /// `match.headers`: every one must match.
    pub headers: Vec<HeaderMatcher>,
    pub action: RouteAction,
    pub mutations: HeaderMutations,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteMatch {
    Prefix(String),
    Path(String),
    /// `path_separated_prefix`: the path (without its query) equals it, or continues with `/`
    /// after it. Has no `?` or `#`, does not end with `/`.
    PathSeparatedPrefix(String),
}

/// Envoy's `HeaderMatcher` as it evaluates it: the request's values of `name` (several joined
/// with `,`) are tested by `rule`; the outcome is flipped by `invert_match`. A missing header
/// does not match unless `treat_missing_header_as_empty` (then it is tested as ""), except that
/// `present_match: false` matches it (and `present_match: true` with `invert_match`).
#[derive(Debug, Clone)]
pub struct HeaderMatcher {
    /// Lowercased; may be a pseudo-header (`:method`, `:path`, `:authority`, `:scheme`).
    pub name: String,
    pub rule: HeaderRule,
    pub invert_match: bool,
    pub treat_missing_header_as_empty: bool,
}

#[derive(Debug, Clone)]
pub enum HeaderRule {
    /// `present_match` (or no match specifier at all: present).
    Present(bool),
    /// `string_match`, or the legacy `exact_match` / `prefix_match` / `suffix_match` /
    /// `contains_match` / `safe_regex_match`.
    String(StringMatcher),
    /// Legacy `exact_match: ""`: any value matches.
    AnyValue,
    /// `range_match`: `start <= value < end` for an integer value.
    Range { start: i64, end: i64 },
}

/// Envoy's `StringMatcher`.
#[derive(Debug, Clone)]
pub struct StringMatcher {
    pub kind: StringMatch,
    /// `ignore_case` (ASCII; no effect on `safe_regex`).
    pub ignore_case: bool,
}

#[derive(Debug, Clone)]
pub enum StringMatch {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    /// `safe_regex.regex`, anchored: the whole value must match (RE2 semantics).
    Regex(regex::Regex),
}

impl StringMatcher {
    /// Whether `value` matches.
    pub fn matches(&self, value: &str) -> bool {
        let fold = |s: &str| {
            if self.ignore_case {
                s.to_ascii_lowercase()
            } else {
                s.to_owned()
            }
        };
        match &self.kind {
            StringMatch::Exact(e) => fold(value) == fold(e),
            StringMatch::Prefix(p) => fold(value).starts_with(&fold(p)),
            StringMatch::Suffix(s) => fold(value).ends_with(&fold(s)),
            StringMatch::Contains(c) => fold(value).contains(&fold(c)),
            StringMatch::Regex(r) => r.is_match(value),
        }
    }
}

impl HeaderMatcher {
    /// Envoy's `HeaderUtility::matchHeaders` for one matcher: `value` is the request's value of
    /// the header (several values joined with `,`), `None` when absent.
    pub fn matches(&self, value: Option<&str>) -> bool {
        let value = match value {
            Some(v) => v,
            None if self.treat_missing_header_as_empty => "",
            None => {
                let present = matches!(self.rule, HeaderRule::Present(true));
                let absent = matches!(self.rule, HeaderRule::Present(false));
                return if self.invert_match { present } else { absent };
            }
        };
        let m = match &self.rule {
            HeaderRule::Present(p) => *p,
            HeaderRule::String(s) => s.matches(value),
            HeaderRule::AnyValue => true,
            HeaderRule::Range { start, end } => {
                value.parse::<i64>().is_ok_and(|n| *start <= n && n < *end)
            }
        };
        m != self.invert_match
    }
}

#[derive(Debug, Clone)]
pub enum RouteAction {
    DirectResponse {
        status: u16,
        body: Option<String>,
    },
    /// `route`: forward to a cluster.
    Route(RouteTarget),
    /// `redirect`.
    Redirect(Redirect),
}

/// A route's `route` action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteTarget {
    /// Names a cluster of `Bootstrap::clusters` (checked when the route configuration has
    /// `validate_clusters`).
    pub cluster: String,
    /// `timeout`: Envoy's default 15s when absent; `"0s"` = no timeout (`None`).
    pub timeout: Option<Duration>,
    pub prefix_rewrite: Option<String>,
    pub retry_policy: Option<RetryPolicy>,
    /// `upgrade_configs`: per upgrade type (as written, e.g. `websocket`), whether this route
    /// enables (`enabled`, default true) or disables it. An entry here overrides the
    /// connection manager's `upgrade_configs` for that type (matched case-insensitively).
    pub upgrades: Vec<(String, bool)>,
}

/// A route's `retry_policy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// `retry_on`, split at commas and trimmed: `5xx`, `gateway-error`, `reset`,
    /// `reset-before-request`, `connect-failure`, `retriable-4xx`, `refused-stream`,
    /// `retriable-status-codes`, `envoy-ratelimited`, `http3-post-connect-failure`.
    pub retry_on: Vec<String>,
    /// `num_retries` (default 1).
    pub num_retries: u32,
    pub per_try_timeout: Option<Duration>,
    /// `retriable_status_codes` (each 100..=599).
    pub retriable_status_codes: Vec<u16>,
}

/// A route's `redirect` action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub https_redirect: bool,
    pub host_redirect: Option<String>,
    pub path_redirect: Option<String>,
    /// `response_code`: MOVED_PERMANENTLY 301 (default), FOUND 302, SEE_OTHER 303,
    /// TEMPORARY_REDIRECT 307, PERMANENT_REDIRECT 308.
    pub response_code: u16,
}
