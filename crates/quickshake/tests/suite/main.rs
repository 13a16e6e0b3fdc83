//! Integration tests of the `quickshake` binary with real clients, in one test binary: each
//! test binary links BoringSSL, so one binary instead of one per file saves CI that many links.
//! Each module was a test binary of its own (`tests/<name>.rs`); its tests are now named
//! `<name>::<test>`, and `cargo test -p quickshake --profile ci --test suite <name>::` runs
//! one module.
//!
//! The modules share one process and run side by side: every test takes
//! [`support::shared`] or [`support::exclusive`] first (see there for which and why).

mod support;

mod audit_h2spec;
mod audit_tls;
mod bench_h3;
mod convert;
mod deploy_dashboard;
mod deploy_helm;
mod eg_backend_tls;
mod eg_features;
mod eg_fields;
mod eg_routes;
mod envoy_cli;
mod gateway_basic;
mod gateway_config_errors;
mod gateway_http3;
mod gateway_http3_io;
mod gateway_http3_tls;
mod gateway_resumption;
mod gateway_robustness;
mod gateway_tls;
mod handshake_priority;
mod http_features;
mod ops_access_log;
mod ops_admin;
mod ops_drain;
mod ops_health;
mod provider_batching;
mod provider_crypto_mb_dir;
mod provider_engines;
mod provider_faults;
mod provider_key_exchange;
mod provider_pkcs11;
mod provider_seed;
mod proxy_consistent_hash;
mod proxy_envoy_options;
mod proxy_grpc_ws;
mod proxy_host_match;
mod proxy_http;
mod proxy_istio_http;
mod proxy_local_ratelimit;
mod proxy_origin_form;
mod proxy_tcp;
mod reliability_faults;
mod reliability_hostile;
mod reliability_overload;
mod reliability_secrets;
mod reliability_storms;
mod rendered_bootstraps;
mod rotation;
mod sds_secrets;
mod tls_flood;
mod tls_ocsp;
mod tls_tickets;
#[macro_use]
mod xds;
mod xds_host_removal;
mod xds_http3;
mod xds_initial_metadata;
mod xds_partial;
mod xds_static_sds;
