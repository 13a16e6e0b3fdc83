//! Route configuration: where an HTTP connection manager's routes come from (inline or RDS), the
//! standalone `RouteConfiguration`, virtual hosts, route matching (path, `case_sensitive`,
//! `headers`) and route actions.

use std::time::Duration;

use super::filter_config::{CorsPolicy, Fraction, PerFilterConfigs};
use super::header_mutation::HeaderMutations;
use super::matcher::{HeaderMatcher, QueryParameterMatcher};
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
    /// `typed_per_filter_config` (least specific level).
    pub per_filter: PerFilterConfigs,
}

#[derive(Debug, Clone)]
pub struct VirtualHost {
    pub name: String,
    /// `*`, exact, `*.suffix`, `prefix*`; matched case-insensitively, port-stripped.
    pub domains: Vec<String>,
    pub routes: Vec<Route>,
    pub mutations: HeaderMutations,
    /// `typed_per_filter_config`.
    pub per_filter: PerFilterConfigs,
    /// `cors` (the older `envoy.config.route.v3.CorsPolicy`): used by the CORS filter when no
    /// level has a `typed_per_filter_config` policy.
    pub cors: Option<CorsPolicy>,
    /// `require_tls` (default NONE).
    pub require_tls: RequireTls,
    /// `include_request_attempt_count`: `x-envoy-attempt-count` on each upstream attempt.
    pub include_request_attempt_count: bool,
    /// `include_attempt_count_in_response`: `x-envoy-attempt-count` on the response.
    pub include_attempt_count_in_response: bool,
}

/// A virtual host's `require_tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequireTls {
    #[default]
    None,
    /// `EXTERNAL_ONLY`: a plaintext request not marked `x-envoy-internal: true` is redirected
    /// (301) to `https`.
    ExternalOnly,
    /// `ALL`: every plaintext request is redirected (301) to `https`.
    All,
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
    /// `match.query_parameters`: every one must match.
    pub query_parameters: Vec<QueryParameterMatcher>,
    pub action: RouteAction,
    pub mutations: HeaderMutations,
    /// `typed_per_filter_config` (most specific level).
    pub per_filter: PerFilterConfigs,
    /// `route.cors` (the older `envoy.config.route.v3.CorsPolicy`).
    pub cors: Option<CorsPolicy>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteMatch {
    Prefix(String),
    Path(String),
    /// `path_separated_prefix`: the path (without its query) equals it, or continues with `/`
    /// after it. Has no `?` or `#`, does not end with `/`.
    PathSeparatedPrefix(String),
}

#[derive(Debug, Clone)]
pub enum RouteAction {
    DirectResponse {
        status: u16,
        body: Option<String>,
    },
    /// `route`: forward to a cluster.
    /// (Boxed: by far the largest action.)
    Route(Box<RouteTarget>),
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
    /// `max_grpc_timeout`: for a gRPC request the timeout is its `grpc-timeout` (none when
    /// absent), capped by this unless zero; `None`: the route's `timeout` applies.
    pub max_grpc_timeout: Option<Duration>,
    /// `grpc_timeout_offset`: taken off `grpc-timeout` when it is larger.
    pub grpc_timeout_offset: Option<Duration>,
    /// `regex_rewrite` (not with `prefix_rewrite`); boxed, as routes rarely have one.
    pub regex_rewrite: Option<Box<RegexRewrite>>,
    /// `host_rewrite_literal`: the `Host` sent upstream.
    pub host_rewrite_literal: Option<String>,
    /// `append_x_forwarded_host`: a host rewrite appends the original host to
    /// `x-forwarded-host` (unless it is already its last value).
    pub append_x_forwarded_host: bool,
    /// `idle_timeout`: the stream idle timeout for this route, in place of the connection
    /// manager's `stream_idle_timeout`; `Some(ZERO)` disables it.
    pub idle_timeout: Option<Duration>,
    /// `request_mirror_policies`: each sends a copy of the request (fire and forget).
    pub mirrors: Vec<RequestMirror>,
    /// `cluster_not_found_response_code`: the status when the cluster does not exist (503
    /// SERVICE_UNAVAILABLE by default, 404 NOT_FOUND, 500 INTERNAL_SERVER_ERROR).
    pub cluster_not_found_status: u16,
    /// `weighted_clusters.clusters[]` (then `cluster` is the first of them): each request
    /// goes to one, drawn by weight.
    pub weighted: Vec<WeightedCluster>,
    /// `hash_policy`: the request hash the cluster's ring hash / Maglev balancer looks up.
    pub hash_policy: Vec<HashPolicy>,
    /// `weighted_clusters.use_hash_policy`: a request with a hash picks its weighted cluster
    /// by `hash % total weight` (the same cluster for the same hash) instead of at random.
    pub weighted_use_hash_policy: bool,
}

/// One `hash_policy` entry: what is hashed (xxHash64), and whether a hash found here ends
/// the list (`terminal`). Entries whose input is absent add nothing; hashes combine as Envoy's
/// (`rotl(hash, 1) ^ new`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashPolicy {
    pub source: HashSource,
    pub terminal: bool,
}

/// A `hash_policy` `cookie`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CookieHash {
    pub name: String,
    /// `ttl`: generate the cookie when the request has none (`Max-Age`; zero: a session cookie).
    pub ttl: Option<Duration>,
    pub path: Option<String>,
    /// `attributes[]` `(name, value)` added to a generated cookie.
    pub attributes: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashSource {
    /// `header.header_name` (lowercase): its value (several values: sorted, concatenated).
    Header(String),
    /// `cookie`: the value of an existing cookie; when absent and `ttl` is set, one is
    /// generated (and sent in `Set-Cookie`).
    Cookie(CookieHash),
    /// `connection_properties.source_ip`: the client's IP address as text.
    SourceIp,
    /// `query_parameter.name`: the first value of that query parameter.
    QueryParameter(String),
}

/// One of a route's `weighted_clusters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedCluster {
    pub name: String,
    pub weight: u32,
    /// Its request header mutations (applied once it is picked, after the route's).
    pub mutations: HeaderMutations,
}

/// `regex_rewrite` (`RegexMatchAndSubstitute`): every match of `pattern` in the path (the
/// query is kept) is replaced by `substitution`, whose `\N` name capture groups (RE2's syntax).
#[derive(Debug, Clone)]
pub struct RegexRewrite {
    pub pattern: regex::Regex,
    /// As configured (RE2 syntax).
    pub substitution: String,
    /// `substitution` in the `regex` crate's replacement syntax.
    pub replacement: String,
}

impl PartialEq for RegexRewrite {
    fn eq(&self, other: &Self) -> bool {
        self.pattern.as_str() == other.pattern.as_str() && self.substitution == other.substitution
    }
}
impl Eq for RegexRewrite {}

impl RegexRewrite {
    /// The path with every match replaced.
    pub fn apply(&self, path: &str) -> String {
        self.pattern
            .replace_all(path, self.replacement.as_str())
            .into_owned()
    }
}

/// One of a route's `request_mirror_policies`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMirror {
    pub cluster: String,
    /// `runtime_fraction.default_value` (all requests when absent).
    pub fraction: Fraction,
    /// `disable_shadow_host_suffix_append`: false appends `-shadow` to the mirror's `Host`.
    pub disable_shadow_host_suffix_append: bool,
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
    /// `retry_host_predicate` `envoy.retry_host_predicates.previous_hosts`: a retry avoids the
    /// hosts already tried, re-picking up to `host_selection_retry_max_attempts` times.
    pub previous_hosts: bool,
    /// `host_selection_retry_max_attempts` (default 1).
    pub host_selection_retry_max_attempts: u32,
    /// `retry_back_off` (`base_interval`, `max_interval`): before retry `n` (from 1) a wait drawn
    /// uniformly in `[0, min(base * 2^(n-1), max)]` (Envoy's jittered exponential back-off);
    /// `None` retries at once.
    pub back_off: Option<(Duration, Duration)>,
}

/// A route's `redirect` action: the `Location` is built as Envoy's `Http::Utility::newUri`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub https_redirect: bool,
    /// `scheme_redirect` (its other form, `https_redirect`, above).
    pub scheme_redirect: Option<String>,
    pub host_redirect: Option<String>,
    /// `port_redirect` (non-zero).
    pub port_redirect: Option<u32>,
    pub path_redirect: Option<String>,
    /// `prefix_rewrite`: the route's matched prefix replaced in the path.
    pub prefix_rewrite: Option<String>,
    pub regex_rewrite: Option<RegexRewrite>,
    /// `strip_query` (not for a `path_redirect` that has its own query).
    pub strip_query: bool,
    /// `response_code`: MOVED_PERMANENTLY 301 (default), FOUND 302, SEE_OTHER 303,
    /// TEMPORARY_REDIRECT 307, PERMANENT_REDIRECT 308.
    pub response_code: u16,
}
