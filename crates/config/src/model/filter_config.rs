//! The configuration of the HTTP filters Istio and Envoy Gateway always emit (`cors`, `fault`,
//! `grpc_stats`, `local_ratelimit`) and the per-route overrides (`typed_per_filter_config`) of route, virtual host
//! and route configuration.

use std::time::Duration;

use super::header_mutation::HeaderAdd;
use super::limits::TokenBucket;
use super::matcher::{HeaderMatcher, StringMatcher};

/// `envoy.config.core.v3.RuntimeFractionalPercent` / `envoy.type.v3.FractionalPercent`: a
/// share as `numerator` over `denominator` (100, 10 000 or 1 000 000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fraction {
    pub numerator: u32,
    pub denominator: u32,
}

impl Default for Fraction {
    fn default() -> Self {
        Fraction::ALL
    }
}

impl Fraction {
    /// Always (`100/100`).
    pub const ALL: Fraction = Fraction {
        numerator: 100,
        denominator: 100,
    };

    /// Whether a uniform draw `r` in `0..denominator` falls in the share.
    pub fn hits(&self, r: u32) -> bool {
        r < self.numerator.min(self.denominator)
    }
}

/// `envoy.extensions.filters.http.cors.v3.CorsPolicy` (per-route) or the older
/// `envoy.config.route.v3.CorsPolicy` (`virtual_host.cors`, `route.cors`). Fields left out are
/// taken from the next less specific policy, as Envoy's CORS filter does.
#[derive(Debug, Clone, Default)]
pub struct CorsPolicy {
    /// `allow_origin_string_match`: an `Origin` matching one is allowed (a matcher that
    /// matches `*` allows every origin).
    pub allow_origins: Vec<StringMatcher>,
    /// `allow_methods` (`*`: echo `Access-Control-Request-Method`).
    pub allow_methods: Option<String>,
    /// `allow_headers` (`*`: echo `Access-Control-Request-Headers`).
    pub allow_headers: Option<String>,
    pub expose_headers: Option<String>,
    pub max_age: Option<String>,
    pub allow_credentials: Option<bool>,
    pub allow_private_network_access: Option<bool>,
    /// `forward_not_matching_preflights` (default true).
    pub forward_not_matching_preflights: Option<bool>,
    /// `filter_enabled.default_value` (default 100%).
    pub filter_enabled: Fraction,
    /// `shadow_enabled.default_value` (default none): origins are checked and counted, the
    /// responses are left alone.
    pub shadow_enabled: Option<Fraction>,
}

/// `envoy.extensions.filters.http.fault.v3.HTTPFault`, as the filter's own configuration or a
/// route's override.
#[derive(Debug, Clone, Default)]
pub struct FaultConfig {
    pub delay: Option<FaultDelay>,
    pub abort: Option<FaultAbort>,
    /// `upstream_cluster`: faults only for routes to this cluster.
    pub upstream_cluster: Option<String>,
    /// `headers`: faults only for requests all of these match.
    pub headers: Vec<HeaderMatcher>,
    /// `downstream_nodes`: faults only for requests whose `x-envoy-downstream-service-node` is
    /// one of these.
    pub downstream_nodes: Vec<String>,
    /// `max_active_faults`: no new fault while this many are active.
    pub max_active_faults: Option<u64>,
}

/// `delay`: `fixed_delay`, or `header_delay` (the request's `x-envoy-fault-delay-request`,
/// in milliseconds), for `percentage` of requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultDelay {
    /// `fixed_delay`; `None` with `header_delay`.
    pub fixed: Option<Duration>,
    pub percentage: Fraction,
}

/// `abort`: `http_status`, `grpc_status` or `header_abort` (the request's
/// `x-envoy-fault-abort-request` / `x-envoy-fault-abort-grpc-request`), for `percentage` of
/// requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultAbort {
    pub kind: FaultAbortKind,
    pub percentage: Fraction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAbortKind {
    Http(u16),
    Grpc(u32),
    Header,
}

/// `envoy.extensions.filters.http.grpc_stats.v3.FilterConfig`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrpcStatsFilter {
    /// `emit_filter_state` (accepted: quickshake has no filter state to read).
    pub emit_filter_state: bool,
    /// `stats_for_all_methods` (default false).
    pub stats_for_all_methods: bool,
    /// `individual_method_stats_allowlist.services[]`: `(service, methods)`.
    pub allowlist: Option<Vec<(String, Vec<String>)>>,
    /// `replace_dots_in_grpc_service_name`.
    pub replace_dots_in_grpc_service_name: bool,
}

/// One `typed_per_filter_config` entry, keyed by the filter's name in `http_filters`.
#[derive(Debug, Clone)]
pub enum PerFilterConfig {
    Cors(CorsPolicy),
    Fault(FaultConfig),
    /// `envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit`: the route's limit,
    /// with a bucket of its own.
    LocalRateLimit(std::sync::Arc<HttpLocalRateLimit>),
    /// `envoy.config.route.v3.FilterConfig` with `disabled: true`: the filter does not run for
    /// this route.
    Disabled,
    /// A filter with no per-route settings quickshake reads (`FilterConfig` enabling it, or an
    /// optional filter quickshake does not know). Like every entry but `Disabled`, it enables a
    /// filter installed `disabled` (Envoy: "a filter explicitly configured is enabled").
    Ignored,
}

/// A level's `typed_per_filter_config`: `(filter name, config)`.
pub type PerFilterConfigs = Vec<(String, PerFilterConfig)>;

/// `envoy.filters.http.local_ratelimit` (`...http.local_ratelimit.v3.LocalRateLimit`), as the
/// filter's own configuration or a route's (`typed_per_filter_config`; a route's has a bucket
/// of its own, as in Envoy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLocalRateLimit {
    /// `stat_prefix`: `<stat_prefix>.http_local_rate_limit.{enabled,enforced,rate_limited,ok}`.
    pub stat_prefix: String,
    /// `token_bucket` (none: every request passes, as in Envoy).
    pub token_bucket: Option<TokenBucket>,
    /// `filter_enabled.default_value` (0% when absent, as in Envoy: the filter does nothing).
    pub filter_enabled: Fraction,
    /// `filter_enforced.default_value` (0% when absent: requests over the limit are counted,
    /// not refused).
    pub filter_enforced: Fraction,
    /// `status.code` (429 by default; a code below 400 is 429, as in Envoy).
    pub status: u16,
    /// `response_headers_to_add` (on the refusal).
    pub response_headers_to_add: Vec<HeaderAdd>,
    /// `enable_x_ratelimit_headers: DRAFT_VERSION_03`: `x-ratelimit-limit`,
    /// `x-ratelimit-remaining` and `x-ratelimit-reset` on every response the filter saw.
    pub x_ratelimit_headers: bool,
}
