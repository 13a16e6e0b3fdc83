//! The admission filters' settings: Envoy's `local_ratelimit` listener and network filters
//! (`token_bucket`, `runtime_enabled`, `share_key`) and quickshake's own
//! `quickshake.filters.listener.handshake_limit`. Checked as Envoy 1.39 checks them: `stat_prefix`
//! not empty, `token_bucket` required, `tokens_per_fill` and `fill_interval` above zero, and
//! `fill_interval` at least 50 ms unless `max_tokens` is 0.

use std::time::Duration;

use crate::duration::duration;
use crate::model::{HandshakeLimit, LocalRateLimit, TokenBucket};
use crate::walk::{Node, Result};

pub(crate) const LISTENER_LOCAL_RATELIMIT_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.listener.local_ratelimit.v3.LocalRateLimit";
pub(crate) const NETWORK_LOCAL_RATELIMIT_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit";
pub(crate) const HANDSHAKE_LIMIT_TYPE: &str =
    "type.googleapis.com/quickshake.filters.listener.v1.HandshakeLimit";

/// Envoy refuses faster refills ("local rate limit token bucket fill timer must be >= 50ms").
const MIN_FILL_INTERVAL: Duration = Duration::from_millis(50);

/// Which of the two `local_ratelimit` filters a `typed_config` configures.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RateLimitFilter {
    Listener,
    Network,
}

/// A `local_ratelimit` filter's `typed_config`; `filter` is the path of the filter it belongs
/// to (`...listener_filters[0]`).
pub(crate) fn local_rate_limit(
    tc: &Node<'_>,
    kind: RateLimitFilter,
    filter: &str,
) -> Result<LocalRateLimit> {
    let (type_url, allowed): (&str, &[&str]) = match kind {
        RateLimitFilter::Listener => (
            LISTENER_LOCAL_RATELIMIT_TYPE,
            &["stat_prefix", "token_bucket", "runtime_enabled"],
        ),
        RateLimitFilter::Network => (
            NETWORK_LOCAL_RATELIMIT_TYPE,
            &[
                "stat_prefix",
                "token_bucket",
                "runtime_enabled",
                "share_key",
            ],
        ),
    };
    let o = tc.typed(type_url, allowed, &[])?;
    let stat_prefix = o.req("stat_prefix")?.non_empty_str()?.to_owned();
    let token_bucket = token_bucket(&o.req("token_bucket")?)?;
    let enabled = match o.get("runtime_enabled") {
        Some(r) => {
            let ro = r.obj(&["default_value", "runtime_key"])?;
            ro.opt_str("runtime_key")?;
            ro.req("default_value")?.as_bool()?
        }
        None => true,
    };
    let share_key = o.opt_str("share_key")?.unwrap_or_default().to_owned();
    Ok(LocalRateLimit {
        path: filter.to_owned(),
        stat_prefix,
        token_bucket,
        enabled,
        share_key,
    })
}

/// `envoy.type.v3.TokenBucket`.
pub(crate) fn token_bucket(node: &Node<'_>) -> Result<TokenBucket> {
    let o = node.obj(&["max_tokens", "tokens_per_fill", "fill_interval"])?;
    let max_tokens = o
        .get("max_tokens")
        .map(|n| n.as_u64_in(0, u64::from(u32::MAX)))
        .transpose()?
        .unwrap_or(0) as u32;
    let tokens_per_fill = o
        .get("tokens_per_fill")
        .map(|n| n.as_u64_in(1, u64::from(u32::MAX)))
        .transpose()?
        .unwrap_or(1) as u32;
    let interval_node = o.req("fill_interval")?;
    let fill_interval = duration(&interval_node)?;
    if fill_interval.is_zero() {
        return Err(interval_node.err("must be greater than 0s"));
    }
    if max_tokens > 0 && fill_interval < MIN_FILL_INTERVAL {
        return Err(interval_node.err(format!(
            "must be at least 50ms, got {fill_interval:?} (Envoy: \"local rate limit token \
             bucket fill timer must be >= 50ms\")"
        )));
    }
    Ok(TokenBucket {
        max_tokens,
        tokens_per_fill,
        fill_interval,
    })
}

/// `quickshake.filters.listener.handshake_limit`'s `typed_config`.
pub(crate) fn handshake_limit(tc: &Node<'_>) -> Result<HandshakeLimit> {
    let o = tc.typed(HANDSHAKE_LIMIT_TYPE, &["max_handshakes_per_source"], &[])?;
    let max = o
        .req("max_handshakes_per_source")?
        .as_u64_in(1, u64::from(u32::MAX))? as u32;
    Ok(HandshakeLimit {
        max_handshakes_per_source: max,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rl(v: serde_json::Value, kind: RateLimitFilter) -> Result<LocalRateLimit> {
        local_rate_limit(&Node::new(&v, "f.typed_config"), kind, "f")
    }

    fn listener_rl(fields: serde_json::Value) -> serde_json::Value {
        let mut v = json!({"@type": LISTENER_LOCAL_RATELIMIT_TYPE});
        if let (Some(o), Some(f)) = (v.as_object_mut(), fields.as_object()) {
            o.extend(f.clone());
        }
        v
    }

    #[test]
    fn defaults_and_fields() {
        let r = rl(
            listener_rl(json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 3, "fill_interval": "60s"}})),
            RateLimitFilter::Listener,
        )
        .unwrap();
        assert_eq!(
            r.token_bucket,
            TokenBucket {
                max_tokens: 3,
                tokens_per_fill: 1,
                fill_interval: Duration::from_secs(60)
            }
        );
        assert!(r.enabled);
        assert_eq!(r.share_key, "");
        assert_eq!(r.path, "f");
        let r = rl(
            json!({"@type": NETWORK_LOCAL_RATELIMIT_TYPE, "stat_prefix": "n", "share_key": "k",
                   "runtime_enabled": {"default_value": false, "runtime_key": "x"},
                   "token_bucket": {"max_tokens": 5, "tokens_per_fill": 2, "fill_interval": "0.05s"}}),
            RateLimitFilter::Network,
        )
        .unwrap();
        assert!(!r.enabled);
        assert_eq!(r.share_key, "k");
        assert_eq!(r.token_bucket.tokens_per_fill, 2);
    }

    #[test]
    fn envoy_checks() {
        let err = |fields| {
            rl(listener_rl(fields), RateLimitFilter::Listener)
                .unwrap_err()
                .to_string()
        };
        let e = err(
            json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 3, "fill_interval": "0.01s"}}),
        );
        assert!(
            e.contains("f.typed_config.token_bucket.fill_interval") && e.contains("50ms"),
            "{e}"
        );
        let e = err(
            json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 3, "fill_interval": "0s"}}),
        );
        assert!(e.contains("greater than 0s"), "{e}");
        let e = err(
            json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 3, "tokens_per_fill": 0, "fill_interval": "1s"}}),
        );
        assert!(e.contains("tokens_per_fill"), "{e}");
        let e = err(json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 3}}));
        assert!(e.contains("fill_interval"), "{e}");
        let e = err(json!({"token_bucket": {"max_tokens": 3, "fill_interval": "1s"}}));
        assert!(e.contains("stat_prefix"), "{e}");
        let e = err(json!({"stat_prefix": "a"}));
        assert!(e.contains("token_bucket"), "{e}");
        let e = err(
            json!({"stat_prefix": "a", "share_key": "k", "token_bucket": {"max_tokens": 1, "fill_interval": "1s"}}),
        );
        assert!(e.contains("share_key") && e.contains("unknown"), "{e}");
        let e = err(
            json!({"stat_prefix": "a", "runtime_enabled": {"runtime_key": "k"}, "token_bucket": {"max_tokens": 1, "fill_interval": "1s"}}),
        );
        assert!(e.contains("default_value"), "{e}");
        // max_tokens 0 refuses everything; Envoy skips the 50 ms check then.
        let r = rl(
            listener_rl(json!({"stat_prefix": "a", "token_bucket": {"fill_interval": "0.01s"}})),
            RateLimitFilter::Listener,
        )
        .unwrap();
        assert_eq!(r.token_bucket.max_tokens, 0);
    }

    #[test]
    fn handshake_limit_fields() {
        let v = json!({"@type": HANDSHAKE_LIMIT_TYPE, "max_handshakes_per_source": 4});
        let h = handshake_limit(&Node::new(&v, "t")).unwrap();
        assert_eq!(h.max_handshakes_per_source, 4);
        let v = json!({"@type": HANDSHAKE_LIMIT_TYPE, "maxHandshakesPerSource": 0});
        let e = handshake_limit(&Node::new(&v, "t"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.maxHandshakesPerSource") && e.contains("1..="),
            "{e}"
        );
        let v = json!({"@type": HANDSHAKE_LIMIT_TYPE});
        let e = handshake_limit(&Node::new(&v, "t"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_handshakes_per_source"), "{e}");
    }
}
