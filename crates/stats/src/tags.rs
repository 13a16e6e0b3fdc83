//! Envoy's default tag extraction (`source/common/config/well_known_names.cc`).
//!
//! Each extractor is a regex applied to the *full* stat name. Capture group 1
//! is the span removed from the name to form the tag-extracted name; capture
//! group 2 (or group 1 when there is only one) is the tag value. All removals
//! are computed on the original name and applied together, as Envoy's
//! `TagProducerImpl` does, so extractors do not interfere with each other.
//! Tags are listed in extractor order, which is the order Envoy prints them in
//! `/stats/prometheus` (e.g. `envoy_response_code_class` before
//! `envoy_http_conn_manager_prefix`).
//!
//! Envoy's regexes use look-ahead (`listener(?=\.)`), which the `regex` crate
//! lacks; the translations below are equivalent for real stat names.
//!
//! Prometheus label names are the tag names with `.` turned into `_`
//! (`envoy.listener_address` → `envoy_listener_address`). Istio's stats
//! configuration renames `envoy_listener_address` to `listener_address` (and
//! `envoy_cluster_name` to `cluster_name`); quickshake keeps Envoy's defaults.

use std::sync::OnceLock;

use regex::Regex;

/// One extracted tag (`name` is Envoy's dotted tag name, e.g. `envoy.ssl_cipher`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tag {
    pub name: String,
    pub value: String,
}

/// A stat name split into Envoy's tag-extracted name and tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extracted {
    /// The name with every tag span removed, e.g. `listener.ssl.handshake`.
    pub name: String,
    pub tags: Vec<Tag>,
}

/// Tag names from Envoy's `TagNameValues`.
pub mod names {
    pub const RESPONSE_CODE: &str = "envoy.response_code";
    pub const RESPONSE_CODE_CLASS: &str = "envoy.response_code_class";
    pub const SSL_CIPHER: &str = "envoy.ssl_cipher";
    pub const SSL_CIPHER_SUITE: &str = "cipher_suite";
    pub const SSL_VERSION: &str = "envoy.ssl_version";
    pub const SSL_CURVE: &str = "envoy.ssl_curve";
    pub const SSL_SIGALG: &str = "envoy.ssl_sigalg";
    pub const TCP_PREFIX: &str = "envoy.tcp_prefix";
    pub const CLUSTER_NAME: &str = "envoy.cluster_name";
    pub const HTTP_CONN_MANAGER_PREFIX: &str = "envoy.http_conn_manager_prefix";
    pub const LISTENER_ADDRESS: &str = "envoy.listener_address";
    pub const VIRTUAL_HOST: &str = "envoy.virtual_host";
    pub const WORKER_ID: &str = "envoy.worker_id";
    pub const LOCAL_NETWORK_RATELIMIT_PREFIX: &str = "envoy.local_network_ratelimit_prefix";
    pub const LOCAL_LISTENER_RATELIMIT_PREFIX: &str = "envoy.local_listener_ratelimit_prefix";
    pub const LOCAL_HTTP_RATELIMIT_PREFIX: &str = "envoy.local_http_ratelimit_prefix";
}

struct Extractor {
    name: &'static str,
    /// Cheap pre-filter: the regex can only match names containing this.
    substr: &'static str,
    regex: Regex,
}

/// (tag name, required substring, regex), in Envoy's order.
const DEFAULTS: &[(&str, &str, &str)] = &[
    // *_rq(_<response_code>)
    (names::RESPONSE_CODE, "_rq_", r"_rq(_(\d{3}))$"),
    // *_rq_(<response_code_class>)xx
    (names::RESPONSE_CODE_CLASS, "_rq_", r"_rq_(\d)xx$"),
    // listener.[<address>.]ssl.cipher.(<cipher>)
    (
        names::SSL_CIPHER,
        ".ssl.cipher.",
        r"^listener\..*?\.ssl\.cipher(\.(.*?))$",
    ),
    // cluster.[<cluster_name>.]ssl.ciphers.(<cipher>)
    (
        names::SSL_CIPHER_SUITE,
        ".ssl.ciphers.",
        r"^cluster\..*?\.ssl\.ciphers(\.(.*?))$",
    ),
    // [listener.<address>.]ssl.ciphers.(<cipher>)
    (
        names::SSL_CIPHER,
        "ssl.ciphers.",
        r"^(?:listener\..*?\.)?ssl\.ciphers(\.(.+))$",
    ),
    // [(listener|cluster).<x>.]ssl.versions.(<version>)
    (
        names::SSL_VERSION,
        "ssl.versions.",
        r"^(?:(?:listener|cluster)\..*?\.)?ssl\.versions(\.(.+))$",
    ),
    // [(listener|cluster).<x>.]ssl.curves.(<curve>)
    (
        names::SSL_CURVE,
        "ssl.curves.",
        r"^(?:(?:listener|cluster)\..*?\.)?ssl\.curves(\.(.+))$",
    ),
    // [(listener|cluster).<x>.]ssl.sigalgs.(<sigalg>)
    (
        names::SSL_SIGALG,
        "ssl.sigalgs.",
        r"^(?:(?:listener|cluster)\..*?\.)?ssl\.sigalgs(\.(.+))$",
    ),
    // tcp.(<stat_prefix>.)<base_stat>
    (names::TCP_PREFIX, "tcp.", r"^tcp\.((.*?)\.)\w+?$"),
    // cluster.(<cluster_name>.)*
    (names::CLUSTER_NAME, "cluster.", r"^cluster\.(([^.]+)\.)"),
    // http.(<stat_prefix>.)* or listener.[<address>.]http.(<stat_prefix>.)*
    (
        names::HTTP_CONN_MANAGER_PREFIX,
        "http.",
        r"^(?:listener\..*?\.)?http\.((.*?)\.)",
    ),
    // listener.(<address>.)*
    (
        names::LISTENER_ADDRESS,
        "listener.",
        r"^listener\.(((?:[_.[:digit:]]*|[_\[\]aAbBcCdDeEfF[:digit:]]*))\.)",
    ),
    // vhost.(<virtual host name>.)*
    (names::VIRTUAL_HOST, "vhost.", r"^vhost\.((.*?)\.)"),
    // listener_manager.(worker_<id>.)*
    (
        names::WORKER_ID,
        "listener_manager.worker_",
        r"^listener_manager\.((worker_\d+)\.)",
    ),
    // local_rate_limit.(<stat_prefix>.)* (the network filter)
    (
        names::LOCAL_NETWORK_RATELIMIT_PREFIX,
        "local_rate_limit.",
        r"^local_rate_limit\.(([^.]+)\.)",
    ),
    // listener_local_ratelimit.(<stat_prefix>.)* (the listener filter)
    (
        names::LOCAL_LISTENER_RATELIMIT_PREFIX,
        "listener_local_ratelimit.",
        r"^listener_local_ratelimit\.(([^.]+)\.)",
    ),
    // (<stat_prefix>.)http_local_rate_limit.* (the HTTP filter)
    (
        names::LOCAL_HTTP_RATELIMIT_PREFIX,
        ".http_local_rate_limit.",
        r"^(([^.]+)\.)http_local_rate_limit\.",
    ),
];

fn extractors() -> &'static [Extractor] {
    static EXTRACTORS: OnceLock<Vec<Extractor>> = OnceLock::new();
    EXTRACTORS.get_or_init(|| {
        DEFAULTS
            .iter()
            .filter_map(|(name, substr, re)| {
                // The patterns are constants covered by tests; a bad one is
                // dropped rather than panicking at runtime.
                Regex::new(re).ok().map(|regex| Extractor {
                    name,
                    substr,
                    regex,
                })
            })
            .collect()
    })
}

/// Applies Envoy's default extractors to `name`.
pub fn extract(name: &str) -> Extracted {
    let mut tags = Vec::new();
    let mut removed: Vec<(usize, usize)> = Vec::new();
    for ex in extractors() {
        if !name.contains(ex.substr) {
            continue;
        }
        let Some(caps) = ex.regex.captures(name) else {
            continue;
        };
        let Some(remove) = caps.get(1) else {
            continue;
        };
        let value = caps.get(2).unwrap_or(remove);
        // Envoy never extracts the same span twice (e.g. the cluster cipher
        // rule and the generic ssl.ciphers rule).
        if removed
            .iter()
            .any(|(s, e)| remove.start() < *e && *s < remove.end())
        {
            continue;
        }
        removed.push((remove.start(), remove.end()));
        tags.push(Tag {
            name: ex.name.to_owned(),
            value: value.as_str().to_owned(),
        });
    }
    if removed.is_empty() {
        return Extracted {
            name: name.to_owned(),
            tags,
        };
    }
    removed.sort_unstable();
    let mut out = String::with_capacity(name.len());
    let mut pos = 0;
    for (s, e) in removed {
        if s > pos {
            out.push_str(&name[pos..s]);
        }
        pos = pos.max(e);
    }
    out.push_str(&name[pos..]);
    Extracted { name: out, tags }
}

/// Prometheus-sanitises a name or label: every char outside `[a-zA-Z0-9_]`
/// becomes `_` (Envoy's `sanitizeName`).
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Envoy's Prometheus metric name for a tag-extracted name: `envoy_` + sanitised.
pub fn prometheus_name(extracted_name: &str) -> String {
    let mut s = String::with_capacity(extracted_name.len() + 6);
    s.push_str("envoy_");
    s.push_str(&sanitize(extracted_name));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(e: &Extracted) -> Vec<(&str, &str)> {
        e.tags
            .iter()
            .map(|t| (t.name.as_str(), t.value.as_str()))
            .collect()
    }

    #[test]
    fn all_default_regexes_compile() {
        assert_eq!(extractors().len(), DEFAULTS.len());
    }

    // Cases from Envoy's test/common/stats/tag_extractor_impl_test.cc
    // (DefaultTagRegexTest) and test/integration/ssl_integration_test.cc.
    #[test]
    fn listener_address_ipv4() {
        let e = extract("listener.127.0.0.1_0.downstream_cx_total");
        assert_eq!(e.name, "listener.downstream_cx_total");
        assert_eq!(tags(&e), vec![(names::LISTENER_ADDRESS, "127.0.0.1_0")]);
        let e = extract("listener.0.0.0.0_9000.ssl.handshake");
        assert_eq!(e.name, "listener.ssl.handshake");
        assert_eq!(tags(&e), vec![(names::LISTENER_ADDRESS, "0.0.0.0_9000")]);
    }

    #[test]
    fn listener_address_ipv6() {
        let e = extract("listener.[__1]_0.downstream_cx_total");
        assert_eq!(e.name, "listener.downstream_cx_total");
        assert_eq!(tags(&e), vec![(names::LISTENER_ADDRESS, "[__1]_0")]);
    }

    #[test]
    fn listener_admin_is_not_an_address() {
        let e = extract("listener.admin.downstream_cx_total");
        assert_eq!(e.name, "listener.admin.downstream_cx_total");
        assert!(e.tags.is_empty());
    }

    #[test]
    fn http_prefix_and_response_code_class() {
        let e = extract("http.ingress_http.downstream_rq_2xx");
        assert_eq!(e.name, "http.downstream_rq_xx");
        assert_eq!(
            tags(&e),
            vec![
                (names::RESPONSE_CODE_CLASS, "2"),
                (names::HTTP_CONN_MANAGER_PREFIX, "ingress_http"),
            ]
        );
        assert_eq!(
            prometheus_name(&e.name),
            "envoy_http_downstream_rq_xx".to_string()
        );
    }

    /// As Envoy 1.39.3's `/stats/prometheus` writes them:
    /// `envoy_local_rate_limit_rate_limited{envoy_local_network_ratelimit_prefix="nrl"}`,
    /// `envoy_listener_local_ratelimit_rate_limited{envoy_local_listener_ratelimit_prefix="lrl"}`,
    /// `envoy_http_local_rate_limit_enforced{envoy_local_http_ratelimit_prefix="hrl"}`.
    #[test]
    fn local_rate_limit_prefixes() {
        let e = extract("local_rate_limit.nrl.rate_limited");
        assert_eq!(
            prometheus_name(&e.name),
            "envoy_local_rate_limit_rate_limited"
        );
        assert_eq!(
            tags(&e),
            vec![(names::LOCAL_NETWORK_RATELIMIT_PREFIX, "nrl")]
        );
        let e = extract("hrl.http_local_rate_limit.enforced");
        assert_eq!(
            prometheus_name(&e.name),
            "envoy_http_local_rate_limit_enforced"
        );
        assert_eq!(tags(&e), vec![(names::LOCAL_HTTP_RATELIMIT_PREFIX, "hrl")]);
        let e = extract("listener_local_ratelimit.lrl.rate_limited");
        assert_eq!(
            prometheus_name(&e.name),
            "envoy_listener_local_ratelimit_rate_limited"
        );
        assert_eq!(
            tags(&e),
            vec![(names::LOCAL_LISTENER_RATELIMIT_PREFIX, "lrl")]
        );
    }

    #[test]
    fn response_code() {
        let e = extract("cluster.ratelimit.upstream_rq_200");
        assert_eq!(e.name, "cluster.upstream_rq");
        assert_eq!(
            tags(&e),
            vec![
                (names::RESPONSE_CODE, "200"),
                (names::CLUSTER_NAME, "ratelimit"),
            ]
        );
    }

    #[test]
    fn listener_http_prefix() {
        let e = extract("listener.0.0.0.0_9000.http.ingress.downstream_rq_5xx");
        assert_eq!(e.name, "listener.http.downstream_rq_xx");
        assert_eq!(
            tags(&e),
            vec![
                (names::RESPONSE_CODE_CLASS, "5"),
                (names::HTTP_CONN_MANAGER_PREFIX, "ingress"),
                (names::LISTENER_ADDRESS, "0.0.0.0_9000"),
            ]
        );
    }

    #[test]
    fn ssl_cipher_listener() {
        let e = extract("listener.127.0.0.1_3012.ssl.cipher.AES256-SHA");
        assert_eq!(e.name, "listener.ssl.cipher");
        assert_eq!(
            tags(&e),
            vec![
                (names::SSL_CIPHER, "AES256-SHA"),
                (names::LISTENER_ADDRESS, "127.0.0.1_3012"),
            ]
        );
    }

    #[test]
    fn ssl_handshake_details() {
        // ssl_integration_test.cc: ssl.ciphers / versions / curves / sigalgs.
        let e = extract("listener.127.0.0.1_0.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256");
        assert_eq!(e.name, "listener.ssl.ciphers");
        assert_eq!(
            tags(&e)[0],
            (names::SSL_CIPHER, "ECDHE-RSA-AES128-GCM-SHA256")
        );
        let e = extract("listener.127.0.0.1_0.ssl.versions.TLSv1.2");
        assert_eq!(e.name, "listener.ssl.versions");
        assert_eq!(tags(&e)[0], (names::SSL_VERSION, "TLSv1.2"));
        let e = extract("listener.127.0.0.1_0.ssl.curves.P-256");
        assert_eq!(e.name, "listener.ssl.curves");
        assert_eq!(tags(&e)[0], (names::SSL_CURVE, "P-256"));
        let e = extract("listener.127.0.0.1_0.ssl.sigalgs.rsa_pss_rsae_sha256");
        assert_eq!(e.name, "listener.ssl.sigalgs");
        assert_eq!(tags(&e)[0], (names::SSL_SIGALG, "rsa_pss_rsae_sha256"));
        let e = extract("ssl.curves.X25519");
        assert_eq!(e.name, "ssl.curves");
        assert_eq!(tags(&e), vec![(names::SSL_CURVE, "X25519")]);
    }

    #[test]
    fn cluster_cipher_is_cipher_suite() {
        // "The cipher suite extractor is written as two rules for listener and
        // cluster, and they don't match unfortunately".
        let e = extract("cluster.cluster_0.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256");
        assert_eq!(e.name, "cluster.ssl.ciphers");
        assert_eq!(
            tags(&e),
            vec![
                (names::SSL_CIPHER_SUITE, "ECDHE-RSA-AES128-GCM-SHA256"),
                (names::CLUSTER_NAME, "cluster_0"),
            ]
        );
    }

    #[test]
    fn worker_id() {
        let e = extract("listener_manager.worker_123.dispatcher.loop_duration_us");
        assert_eq!(e.name, "listener_manager.dispatcher.loop_duration_us");
        assert_eq!(tags(&e), vec![(names::WORKER_ID, "worker_123")]);
        let e = extract("listener_manager.total_listeners_active");
        assert!(e.tags.is_empty());
    }

    #[test]
    fn untagged_names_pass_through() {
        for n in ["server.live", "server.uptime", "cryptomb.rsa_queue_sizes"] {
            let e = extract(n);
            assert_eq!(e.name, n);
            assert!(e.tags.is_empty());
        }
    }

    #[test]
    fn sanitize_like_envoy() {
        assert_eq!(sanitize("envoy.listener_address"), "envoy_listener_address");
        assert_eq!(
            prometheus_name("listener.ssl.handshake"),
            "envoy_listener_ssl_handshake"
        );
    }
}
