//! An HTTP connection manager's `http_filters[]`: the router (last), `health_check` and
//! `compressor` (gzip, brotli, zstd). A filter is identified by its `typed_config` `@type`, as
//! Envoy does (Istio names its compressors `envoy.filters.http.compressor.brotli` etc.), or by
//! `name` when it has no `typed_config`. `disabled: true` installs a filter that runs only on
//! routes whose `typed_per_filter_config` enables it; supported for the filters whose
//! per-route lookup quickshake runs (cors, compressor, fault, local_ratelimit), refused for
//! the others.

use crate::duration::duration;
use crate::filter_config::{self, CORS, FAULT, GRPC_STATS};
use crate::http_ratelimit::LOCAL_RATELIMIT;
use crate::matcher::header_matcher;
use crate::model::{CompressionLibrary, CompressorFilter, HealthCheckFilter, HttpFilter};
use crate::walk::{Node, Obj, Result};

const ROUTER: &str = "envoy.extensions.filters.http.router.v3.Router";
const HEALTH_CHECK: &str = "envoy.extensions.filters.http.health_check.v3.HealthCheck";
const COMPRESSOR: &str = "envoy.extensions.filters.http.compressor.v3.Compressor";
const GZIP: &str = "envoy.extensions.compression.gzip.compressor.v3.Gzip";
const BROTLI: &str = "envoy.extensions.compression.brotli.compressor.v3.Brotli";
const ZSTD: &str = "envoy.extensions.compression.zstd.compressor.v3.Zstd";
const GRPC_WEB: &str = "envoy.extensions.filters.http.grpc_web.v3.GrpcWeb";
const SUPPORTED: &str = "envoy.filters.http.router, envoy.filters.http.health_check, \
     envoy.filters.http.compressor, envoy.filters.http.cors, envoy.filters.http.fault, \
     envoy.filters.http.grpc_stats, envoy.filters.http.grpc_web, envoy.filters.http.local_ratelimit";

/// Envoy's default `common_config.content_type` list.
const DEFAULT_CONTENT_TYPES: &[&str] = &[
    "text/html",
    "text/plain",
    "text/css",
    "application/javascript",
    "application/x-javascript",
    "text/javascript",
    "text/x-javascript",
    "text/ecmascript",
    "text/js",
    "text/jscript",
    "text/x-js",
    "application/ecmascript",
    "application/x-json",
    "application/xml",
    "application/json",
    "image/svg+xml",
    "text/xml",
    "application/xhtml+xml",
];

fn url(short: &str) -> String {
    format!("type.googleapis.com/{short}")
}

/// The router's settings quickshake reads.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RouterSettings {
    /// `suppress_envoy_headers` (default false).
    pub suppress_envoy_headers: bool,
}

/// One entry of `http_filters[]`.
enum Filter {
    Router(RouterSettings),
    Other(HttpFilter),
    /// One of Istio's own filters, accepted with no effect (crate::istio).
    NoEffect,
}

/// `http_filters[]`: the filters before the router, in order, and the router's settings. The
/// router must be last.
pub(crate) fn http_filters(list: &[Node<'_>]) -> Result<(Vec<HttpFilter>, RouterSettings)> {
    let mut out = Vec::new();
    let mut router: Option<(String, RouterSettings)> = None;
    for f in list {
        if let Some((at, _)) = &router {
            return Err(f.err(format!("the router ({at}) must be the last HTTP filter")));
        }
        match http_filter(f)? {
            Filter::Other(filter) => out.push(filter),
            Filter::Router(settings) => router = Some((f.path.clone(), settings)),
            Filter::NoEffect => {}
        }
    }
    Ok((out, router.map(|(_, s)| s).unwrap_or_default()))
}

/// One filter.
fn http_filter(node: &Node<'_>) -> Result<Filter> {
    let o = node.obj_with(
        &["name", "typed_config", "disabled"],
        &["config_discovery", "is_optional"],
    )?;
    let disabled = o.bool_or_false("disabled")?;
    let name_node = o.req("name")?;
    let name = name_node.non_empty_str()?;
    // `typed_config: {}` is accepted for the router, as Envoy's older examples write it.
    let tc = o
        .get("typed_config")
        .filter(|tc| !tc.v.as_object().is_some_and(|m| m.is_empty()));
    if let Some(tc) = &tc {
        if crate::istio::http_filter(tc)? {
            return Ok(Filter::NoEffect);
        }
    }
    let filter = filter_of(name, &o, tc, disabled)?;
    match (&filter, disabled) {
        (Filter::Other(HttpFilter::Cors { .. }), _)
        | (Filter::Other(HttpFilter::Compressor(_)), _)
        | (Filter::Other(HttpFilter::Fault { .. }), _)
        | (Filter::Other(HttpFilter::LocalRateLimit { .. }), _)
        | (_, false) => Ok(filter),
        _ => Err(crate::ConfigError::unsupported(
            o.path.clone() + ".disabled",
            Some(
                "a filter disabled by default, of this type (supported: envoy.filters.http.cors, \
                 envoy.filters.http.compressor, envoy.filters.http.fault, \
                 envoy.filters.http.local_ratelimit)",
            ),
        )),
    }
}

/// The filter of `name` / `typed_config`.
fn filter_of(name: &str, o: &Obj<'_>, tc: Option<Node<'_>>, disabled: bool) -> Result<Filter> {
    let name_node = o.req("name")?;
    let kind = match &tc {
        Some(tc) => {
            let t = tc.type_url()?;
            t.rsplit('/').next().unwrap_or(t)
        }
        None => match name {
            "envoy.filters.http.router" | "envoy.router" => ROUTER,
            "envoy.filters.http.health_check" | "envoy.filters.http.compressor" => {
                return Err(o.missing("typed_config"))
            }
            // Envoy takes these by name with their empty configuration.
            "envoy.filters.http.cors" => CORS,
            "envoy.filters.http.fault" => FAULT,
            "envoy.filters.http.grpc_stats" => GRPC_STATS,
            "envoy.filters.http.grpc_web" => GRPC_WEB,
            "envoy.filters.http.local_ratelimit" => return Err(o.missing("typed_config")),
            other => {
                return Err(name_node.err(format!(
                    "unknown HTTP filter \"{other}\" (supported: {SUPPORTED})"
                )))
            }
        },
    };
    match (kind, tc) {
        (ROUTER, None) => Ok(Filter::Router(RouterSettings::default())),
        (ROUTER, Some(tc)) => {
            let ro = tc.typed(
                &url(ROUTER),
                &["suppress_envoy_headers"],
                &[
                    "dynamic_stats",
                    "start_child_span",
                    "upstream_log",
                    "upstream_log_options",
                    "strict_check_headers",
                    "respect_expected_rq_timeout",
                    "suppress_grpc_request_failure_code_stats",
                    "upstream_http_filters",
                ],
            )?;
            Ok(Filter::Router(RouterSettings {
                suppress_envoy_headers: ro.bool_or_false("suppress_envoy_headers")?,
            }))
        }
        (HEALTH_CHECK, Some(tc)) => Ok(Filter::Other(HttpFilter::HealthCheck(health_check(&tc)?))),
        (COMPRESSOR, Some(tc)) => Ok(Filter::Other(HttpFilter::Compressor(CompressorFilter {
            name: name.to_owned(),
            disabled,
            ..compressor(&tc)?
        }))),
        (CORS, Some(tc)) => {
            filter_config::cors_filter(&tc)?;
            Ok(Filter::Other(HttpFilter::Cors {
                name: name.to_owned(),
                disabled,
            }))
        }
        (FAULT, Some(tc)) => Ok(Filter::Other(HttpFilter::Fault {
            name: name.to_owned(),
            disabled,
            config: filter_config::fault(&tc)?,
        })),
        (LOCAL_RATELIMIT, Some(tc)) => Ok(Filter::Other(HttpFilter::LocalRateLimit {
            name: name.to_owned(),
            disabled,
            config: std::sync::Arc::new(crate::http_ratelimit::local_rate_limit(&tc)?),
        })),
        (GRPC_STATS, Some(tc)) => Ok(Filter::Other(HttpFilter::GrpcStats(
            filter_config::grpc_stats(&tc)?,
        ))),
        (CORS, None) => Ok(Filter::Other(HttpFilter::Cors {
            name: name.to_owned(),
            disabled,
        })),
        (FAULT, None) => Ok(Filter::Other(HttpFilter::Fault {
            name: name.to_owned(),
            disabled,
            config: Default::default(),
        })),
        (GRPC_STATS, None) => Ok(Filter::Other(HttpFilter::GrpcStats(Default::default()))),
        (GRPC_WEB, tc) => {
            if let Some(tc) = tc {
                tc.typed(&url(GRPC_WEB), &[], &[])?;
            }
            Ok(Filter::Other(HttpFilter::GrpcWeb))
        }
        (other, Some(tc)) => Err(crate::ConfigError::invalid(
            tc.path.clone() + ".@type",
            format!("unknown HTTP filter type {other} (supported: {SUPPORTED})"),
        )),
        (_, None) => Err(o.missing("typed_config")),
    }
}

fn health_check(tc: &Node<'_>) -> Result<HealthCheckFilter> {
    let o = tc.typed(
        &url(HEALTH_CHECK),
        &["pass_through_mode", "headers", "cache_time"],
        &["cluster_min_healthy_percentages"],
    )?;
    let pass_through_mode = o.req("pass_through_mode")?.as_bool()?;
    let cache_time = o.get("cache_time").map(|d| duration(&d)).transpose()?;
    let headers = o
        .items("headers")
        .iter()
        .map(header_matcher)
        .collect::<Result<Vec<_>>>()?;
    Ok(HealthCheckFilter {
        pass_through_mode,
        headers,
        cache_time,
    })
}

fn compressor(tc: &Node<'_>) -> Result<CompressorFilter> {
    let o = tc.typed(
        &url(COMPRESSOR),
        &["compressor_library", "response_direction_config"],
        &[
            "request_direction_config",
            "choose_first",
            "content_length",
            "content_type",
            "disable_on_etag_header",
            "remove_accept_encoding_header",
            "runtime_enabled",
        ],
    )?;
    let lib = o.req("compressor_library")?;
    let lo = lib.obj(&["name", "typed_config"])?;
    lo.opt_str("name")?;
    let library = compression_library(&lo.req("typed_config")?)?;
    let mut filter = CompressorFilter {
        name: String::new(),
        disabled: false,
        library,
        min_content_length: 30,
        content_types: Vec::new(),
        disable_on_etag_header: false,
        remove_accept_encoding_header: false,
    };
    if let Some(rd) = o.get("response_direction_config") {
        let ro = rd.obj_with(
            &[
                "common_config",
                "disable_on_etag_header",
                "remove_accept_encoding_header",
            ],
            &["uncompressible_response_codes", "status_header_enabled"],
        )?;
        filter.disable_on_etag_header = ro.bool_or_false("disable_on_etag_header")?;
        filter.remove_accept_encoding_header = ro.bool_or_false("remove_accept_encoding_header")?;
        if let Some(cc) = ro.get("common_config") {
            let co = cc.obj_with(&["min_content_length", "content_type"], &["enabled"])?;
            if let Some(m) = co.get("min_content_length") {
                filter.min_content_length = m.as_u64_in(0, u64::from(u32::MAX))?;
            }
            for t in co.items("content_type") {
                filter.content_types.push(media_type(t.non_empty_str()?));
            }
        }
    }
    if filter.content_types.is_empty() {
        filter.content_types = DEFAULT_CONTENT_TYPES
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
    }
    Ok(filter)
}

/// The media type of a `Content-Type` value: parameters dropped, lowercased.
pub(crate) fn media_type(value: &str) -> String {
    value
        .split(';')
        .next()
        .unwrap_or(value)
        .trim()
        .to_ascii_lowercase()
}

fn compression_library(tc: &Node<'_>) -> Result<CompressionLibrary> {
    let t = tc.type_url()?;
    match t.rsplit('/').next().unwrap_or(t) {
        GZIP => {
            let o = tc.typed(
                &url(GZIP),
                &[
                    "compression_level",
                    "memory_level",
                    "window_bits",
                    "compression_strategy",
                    "chunk_size",
                ],
                &[],
            )?;
            check_u64(&o, "memory_level", 1, 9)?;
            check_u64(&o, "window_bits", 9, 15)?;
            check_u64(&o, "chunk_size", 4096, 65536)?;
            if let Some(s) = o.get("compression_strategy") {
                match s.as_str()? {
                    "DEFAULT_STRATEGY" | "FILTERED" | "HUFFMAN_ONLY" | "RLE" | "FIXED" => {}
                    other => return Err(s.err(format!("unknown strategy \"{other}\""))),
                }
            }
            let level = match o.get("compression_level") {
                None => 6,
                Some(l) => match l.as_str()? {
                    "DEFAULT_COMPRESSION" => 6,
                    "BEST_SPEED" | "COMPRESSION_LEVEL_1" => 1,
                    "BEST_COMPRESSION" | "COMPRESSION_LEVEL_9" => 9,
                    other => other
                        .strip_prefix("COMPRESSION_LEVEL_")
                        .and_then(|n| n.parse::<u32>().ok())
                        .filter(|n| (1..=9).contains(n))
                        .ok_or_else(|| l.err(format!("unknown compression level \"{other}\"")))?,
                },
            };
            Ok(CompressionLibrary::Gzip { level })
        }
        BROTLI => {
            let o = tc.typed(
                &url(BROTLI),
                &[
                    "quality",
                    "encoder_mode",
                    "window_bits",
                    "input_block_bits",
                    "chunk_size",
                    "disable_literal_context_modeling",
                ],
                &[],
            )?;
            check_u64(&o, "window_bits", 10, 24)?;
            check_u64(&o, "input_block_bits", 16, 24)?;
            check_u64(&o, "chunk_size", 4096, 65536)?;
            o.opt_bool("disable_literal_context_modeling")?;
            if let Some(m) = o.get("encoder_mode") {
                match m.as_str()? {
                    "DEFAULT" | "GENERIC" | "TEXT" | "FONT" => {}
                    other => return Err(m.err(format!("unknown encoder mode \"{other}\""))),
                }
            }
            let quality = match o.get("quality") {
                Some(q) => q.as_u64_in(0, 11)? as u32,
                None => 3,
            };
            Ok(CompressionLibrary::Brotli { quality })
        }
        ZSTD => {
            let o = tc.typed(
                &url(ZSTD),
                &[
                    "compression_level",
                    "enable_checksum",
                    "strategy",
                    "chunk_size",
                ],
                &["dictionary"],
            )?;
            o.opt_bool("enable_checksum")?;
            check_u64(&o, "chunk_size", 4096, 65536)?;
            if let Some(s) = o.get("strategy") {
                s.as_str()?;
            }
            let level = match o.get("compression_level") {
                Some(l) => l.as_u64_in(1, 22)? as i32,
                None => 3,
            };
            Ok(CompressionLibrary::Zstd { level })
        }
        other => Err(crate::ConfigError::invalid(
            tc.path.clone() + ".@type",
            format!(
                "unknown compressor library {other} (supported: envoy.compression.gzip.compressor, \
                 envoy.compression.brotli.compressor, envoy.compression.zstd.compressor)"
            ),
        )),
    }
}

fn check_u64(o: &Obj<'_>, key: &str, lo: u64, hi: u64) -> Result<()> {
    if let Some(n) = o.get(key) {
        n.as_u64_in(lo, hi)?;
    }
    Ok(())
}
