//! `envoy.filters.http.local_ratelimit`'s configuration
//! (`envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit`), as the filter's own
//! `typed_config` or a route's `typed_per_filter_config`. The token bucket is checked as for the
//! network filter (crate::limits). Descriptors (per-descriptor buckets picked by `rate_limits`
//! actions) are not supported yet: refused with their path.

use crate::fraction::fraction;
use crate::header_mutation::header_value_options;
use crate::model::{Fraction, HttpLocalRateLimit};
use crate::walk::{Node, Result};

pub(crate) const LOCAL_RATELIMIT: &str =
    "envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit";

/// Envoy's default `status`: 429 Too Many Requests.
const TOO_MANY_REQUESTS: u16 = 429;

/// `envoy.type.v3.StatusCode` names Envoy Gateway and users write (others by number).
const STATUS_NAMES: &[(&str, u16)] = &[
    ("BadRequest", 400),
    ("Unauthorized", 401),
    ("Forbidden", 403),
    ("NotFound", 404),
    ("TooManyRequests", 429),
    ("InternalServerError", 500),
    ("ServiceUnavailable", 503),
];

/// The filter's or a route's `LocalRateLimit`.
pub(crate) fn local_rate_limit(tc: &Node<'_>) -> Result<HttpLocalRateLimit> {
    let o = tc.typed(
        &format!("type.googleapis.com/{LOCAL_RATELIMIT}"),
        &[
            "stat_prefix",
            "status",
            "token_bucket",
            "filter_enabled",
            "filter_enforced",
            "response_headers_to_add",
            "request_headers_to_add_when_not_enforced",
            "enable_x_ratelimit_headers",
            "descriptors",
            "rate_limits",
            "stage",
            "vh_rate_limits",
            "always_consume_default_token_bucket",
            "max_dynamic_descriptors",
            "local_rate_limit_per_downstream_connection",
            "rate_limited_as_resource_exhausted",
        ],
        &["local_cluster_rate_limit"],
    )?;
    // Fields that only matter with descriptors are accepted at their defaults or alone.
    for key in ["descriptors", "rate_limits"] {
        if let Some(n) = o.get(key).filter(|n| !n.items().is_empty()) {
            return Err(crate::ConfigError::unsupported(
                n.path.clone(),
                Some(
                    "local rate limit descriptors and their rate_limits actions (per-descriptor \
                     token buckets); the filter's own token_bucket is supported",
                ),
            ));
        }
    }
    o.get("stage").map(|s| s.as_u64_in(0, 10)).transpose()?;
    o.opt_str("vh_rate_limits")?;
    o.opt_bool("always_consume_default_token_bucket")?;
    o.get("max_dynamic_descriptors")
        .map(|n| n.as_u64())
        .transpose()?;
    for key in [
        "local_rate_limit_per_downstream_connection",
        "rate_limited_as_resource_exhausted",
    ] {
        if o.bool_or_false(key)? {
            let path = o.get(key).map(|n| n.path.clone()).unwrap_or_default();
            return Err(crate::ConfigError::unsupported(path, None));
        }
    }
    if let Some(n) = o
        .get("request_headers_to_add_when_not_enforced")
        .filter(|n| !n.items().is_empty())
    {
        return Err(crate::ConfigError::unsupported(n.path.clone(), None));
    }
    let stat_prefix = o.req("stat_prefix")?.non_empty_str()?.to_owned();
    let token_bucket = o
        .get("token_bucket")
        .map(|b| crate::limits::token_bucket(&b))
        .transpose()?;
    let share = |key: &str| -> Result<Fraction> {
        let Some(n) = o.get(key) else {
            return Ok(Fraction {
                numerator: 0,
                denominator: 100,
            });
        };
        let ro = n.obj(&["default_value", "runtime_key"])?;
        ro.opt_str("runtime_key")?;
        match ro.get("default_value") {
            Some(d) => fraction(&d),
            None => Ok(Fraction {
                numerator: 0,
                denominator: 100,
            }),
        }
    };
    let status = match o.get("status") {
        None => TOO_MANY_REQUESTS,
        Some(s) => {
            let so = s.obj(&["code"])?;
            match so.get("code") {
                None => TOO_MANY_REQUESTS,
                Some(c) => {
                    let code = match c.v.as_str() {
                        Some(name) => STATUS_NAMES
                            .iter()
                            .find(|(n, _)| *n == name)
                            .map(|(_, v)| *v)
                            .ok_or_else(|| c.err(format!("unknown status code \"{name}\"")))?,
                        None => c.as_u64_in(100, 599)? as u16,
                    };
                    if code < 400 {
                        TOO_MANY_REQUESTS
                    } else {
                        code
                    }
                }
            }
        }
    };
    let x_ratelimit_headers = match o.get("enable_x_ratelimit_headers") {
        None => false,
        Some(n) => n.enum_index(&["OFF", "DRAFT_VERSION_03"])? == 1,
    };
    Ok(HttpLocalRateLimit {
        stat_prefix,
        token_bucket,
        filter_enabled: share("filter_enabled")?,
        filter_enforced: share("filter_enforced")?,
        status,
        response_headers_to_add: header_value_options(&o, "response_headers_to_add")?,
        x_ratelimit_headers,
    })
}
