//! `quickshake-http` owns Envoy's HTTP connection manager as quickshake runs it, on a stream
//! it is handed: hyper serving HTTP/1.1 and HTTP/2 until done, idle or drained (`serve`), one
//! request through the route table with direct responses and redirects (`request`), the
//! per-chain runtime and its route table, installed inline or by RDS (`runtime`), the HTTP
//! filters (health check, compressor: `filters`; CORS: `cors`; fault injection: `fault`; gRPC
//! stats: `grpc_stats`; local rate limit: `local_ratelimit`, on the token bucket every local
//! rate limit shares, the listener's included: `token_bucket`; run with `require_tls` between
//! routing and the router in `decode`, with the per-route overrides and per-route enabling of
//! filters installed `disabled` in `per_filter`), forwarding to upstream clusters with retries
//! and WebSocket upgrades (`proxy`, `upgrade`), `x-forwarded-client-cert` (`xfcc`), and
//! access logs (`access_log`, with its clock in `time`).
//!
//! Its policy is pure and testable without sockets: route and virtual-host selection
//! (`routing`), Envoy's path normalization (`path_normalize`), header mutation
//! (`header_mutation`), access-log formatting (`access_log::format`).
//!
//! It must not accept, bind or own sockets, run TLS handshakes or choose filter chains (that
//! is `quickshake-listener`, `quickshake-server` and `quickshake-quic`), nor parse
//! configuration (`quickshake-config`). HTTP/3 framing is `quickshake-quic`'s: it sends each
//! request through [`handle_request`] as TCP connections do.
#![forbid(unsafe_code)]

mod access_log;
mod body;
mod cors;
mod decode;
mod error;
mod fault;
mod filters;
mod grpc_stats;
mod grpc_web;
mod hash_policy;
mod header_mutation;
mod header_policy;
mod local_ratelimit;
mod mirror;
mod path_normalize;
mod per_filter;
mod proxy;
mod request;
mod rewrite;
mod routing;
mod runtime;
mod serve;
mod stream_idle;
pub mod time;
mod token_bucket;
mod upgrade;
mod xfcc;

pub use access_log::{open_access_logs, AccessLogger, LogRecord};
pub use body::{Body, RequestBody};
pub use error::HttpError;
pub use request::handle_request;
pub use runtime::{ConnInfo, HttpRuntime, HttpStats, RouteTable};
pub use serve::serve_http;
pub use token_bucket::{BucketRegistry, TokenBucket};
pub use xfcc::TlsPeer;
