//! Reads the descriptor set that the `envoy-types` crate ships beside its generated code
//! (`src/generated/types.bin`: every Envoy, xDS and Google message it was generated from; a copy
//! in `descriptors/`, see its README), keeps the files that define the messages quickshake's
//! configuration accepts and the files they import, and writes that smaller set into OUT_DIR for
//! the bridge to decode resources by reflection. (The whole set costs ~45 MiB of heap once
//! decoded; a resource of a type left out is refused with its type URL, as the configuration
//! would refuse it anyway.) The crate does not export the file, and asking `cargo metadata` for
//! its source directory fails on a fresh cargo home (it wants every platform's packages), hence
//! the copy, which also serves offline and vendored builds.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use prost::Message;
use prost_types::FileDescriptorSet;

/// Every message a resource or a `typed_config` in one may be: the xDS resource types and the
/// extensions the configuration crate implements.
const ROOTS: &[&str] = &[
    "envoy.config.listener.v3.Listener",
    "envoy.config.route.v3.RouteConfiguration",
    "envoy.config.cluster.v3.Cluster",
    "envoy.config.endpoint.v3.ClusterLoadAssignment",
    "envoy.extensions.transport_sockets.tls.v3.Secret",
    "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
    "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
    "envoy.extensions.transport_sockets.quic.v3.QuicDownstreamTransport",
    "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
    "envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
    "envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol",
    "envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector",
    "envoy.extensions.filters.listener.local_ratelimit.v3.LocalRateLimit",
    "envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit",
    "envoy.extensions.filters.http.router.v3.Router",
    "envoy.extensions.filters.http.health_check.v3.HealthCheck",
    "envoy.extensions.filters.http.compressor.v3.Compressor",
    "envoy.extensions.compression.gzip.compressor.v3.Gzip",
    "envoy.extensions.compression.brotli.compressor.v3.Brotli",
    "envoy.extensions.compression.zstd.compressor.v3.Zstd",
    "envoy.extensions.access_loggers.file.v3.FileAccessLog",
    "envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
    "envoy.extensions.access_loggers.stream.v3.StderrAccessLog",
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
    "envoy.extensions.upstreams.tcp.v3.TcpProtocolOptions",
    "envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin",
    "envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest",
    // Envoy Gateway's retry policies name it; a GRPCRoute adds the gRPC-Web filter.
    "envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate",
    "envoy.extensions.filters.http.grpc_web.v3.GrpcWeb",
    // Envoy Gateway's FQDN backends: `cluster_type` `envoy.cluster.dns`.
    "envoy.extensions.clusters.dns.v3.DnsCluster",
    // The HTTP filters istiod always emits, their per-route configurations, and its
    // connection managers' request-id extension.
    "envoy.extensions.filters.http.grpc_stats.v3.FilterConfig",
    "envoy.extensions.filters.http.cors.v3.Cors",
    "envoy.extensions.filters.http.cors.v3.CorsPolicy",
    "envoy.extensions.filters.http.fault.v3.HTTPFault",
    "envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig",
    // Tracer providers in an HCM's `tracing` (accepted with no effect: Istio's and Envoy
    // Gateway's defaults name one), so that its `typed_config` decodes.
    "envoy.config.trace.v3.ZipkinConfig",
    "envoy.config.trace.v3.OpenTelemetryConfig",
    "google.protobuf.Struct",
    "google.protobuf.Duration",
    // Istio's own HTTP filters in every gateway listener istiod sends (accepted with no
    // effect); their descriptors come from `descriptors/istio.bin`.
    "istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig",
    "stats.PluginConfig",
];

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let bin = manifest.join("descriptors/envoy-types.bin");
    let bytes =
        std::fs::read(&bin).unwrap_or_else(|e| panic!("cannot read {}: {e}", bin.display()));
    let mut set = FileDescriptorSet::decode(bytes.as_slice()).expect("envoy-types' descriptor set");
    // Istio's filter configurations (istio.io/api; written by tests/istio-harness
    // -write-descriptors), after Envoy's files, whose google/protobuf ones they import.
    let istio = manifest.join("descriptors/istio.bin");
    let istio_bytes =
        std::fs::read(&istio).unwrap_or_else(|e| panic!("cannot read {}: {e}", istio.display()));
    set.file.extend(
        FileDescriptorSet::decode(istio_bytes.as_slice())
            .expect("Istio's descriptor set")
            .file,
    );
    let pruned = prune(set);
    std::fs::write(out.join("envoy_types.bin"), pruned.encode_to_vec())
        .expect("cannot write the descriptor set");
    println!("cargo:rerun-if-changed={}", bin.display());
    println!("cargo:rerun-if-changed={}", istio.display());
    println!("cargo:rerun-if-changed=build.rs");
}

/// The files defining [`ROOTS`] and everything they import, in the set's order.
fn prune(set: FileDescriptorSet) -> FileDescriptorSet {
    let mut defined: HashMap<String, String> = HashMap::new();
    for f in &set.file {
        let package = f.package.clone().unwrap_or_default();
        for m in &f.message_type {
            defined.insert(
                format!("{package}.{}", m.name.clone().unwrap_or_default()),
                f.name.clone().unwrap_or_default(),
            );
        }
    }
    let imports: HashMap<String, Vec<String>> = set
        .file
        .iter()
        .map(|f| (f.name.clone().unwrap_or_default(), f.dependency.clone()))
        .collect();
    let mut keep = BTreeSet::new();
    let mut todo: Vec<String> = ROOTS
        .iter()
        .map(|m| {
            defined
                .get(*m)
                .unwrap_or_else(|| panic!("{m} is not in envoy-types' descriptor set"))
                .clone()
        })
        .collect();
    while let Some(f) = todo.pop() {
        if keep.insert(f.clone()) {
            todo.extend(imports.get(&f).cloned().unwrap_or_default());
        }
    }
    FileDescriptorSet {
        file: set
            .file
            .into_iter()
            .filter(|f| keep.contains(f.name.as_deref().unwrap_or_default()))
            .collect(),
    }
}
