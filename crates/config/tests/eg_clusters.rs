//! Envoy Gateway's cluster forms: an FQDN backend as `cluster_type` `envoy.cluster.dns`
//! (`DnsCluster`), a GRPCRoute backend with HTTP/2 windows.

use quickshake_config::*;
use serde_json::json;

fn dns_cluster(typed: serde_json::Value) -> serde_json::Value {
    json!({
        "name": "fqdn",
        "connect_timeout": "10s",
        "dns_lookup_family": "V4_ONLY",
        "cluster_type": {
            "name": "envoy.cluster.dns",
            "typed_config": typed,
        },
        "load_assignment": {
            "cluster_name": "fqdn",
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                "address": "backend.example", "port_value": 443}}}}]}],
        },
    })
}

#[test]
fn envoy_gateways_dns_cluster_type_is_strict_dns() {
    let c = cluster_resource(
        &dns_cluster(json!({
            "@type": "type.googleapis.com/envoy.extensions.clusters.dns.v3.DnsCluster",
            "dns_lookup_family": "V4_PREFERRED",
            "dns_refresh_rate": "30s",
            "respect_dns_ttl": true,
        })),
        "clusters[0]",
    )
    .expect("cluster");
    assert_eq!(c.discovery, ClusterDiscovery::StrictDns);
    // The DnsCluster's family wins over the cluster's.
    assert_eq!(c.dns_lookup_family, Some(DnsLookupFamily::V4Preferred));
    assert_eq!(c.dns_refresh_rate, std::time::Duration::from_secs(30));

    let logical = cluster_resource(
        &dns_cluster(json!({
            "@type": "type.googleapis.com/envoy.extensions.clusters.dns.v3.DnsCluster",
            "all_addresses_in_single_endpoint": true,
        })),
        "clusters[0]",
    )
    .expect("cluster");
    assert_eq!(logical.discovery, ClusterDiscovery::LogicalDns);
    assert_eq!(logical.dns_lookup_family, Some(DnsLookupFamily::V4Only));

    let mut both = dns_cluster(json!({
        "@type": "type.googleapis.com/envoy.extensions.clusters.dns.v3.DnsCluster",
    }));
    both["type"] = json!("STRICT_DNS");
    let e = cluster_resource(&both, "clusters[0]").expect_err("type and cluster_type");
    assert!(
        e.to_string().contains("only one of type, cluster_type"),
        "{e}"
    );
}

#[test]
fn grpc_backend_windows_are_kept() {
    let c = cluster_resource(
        &json!({
            "name": "grpc",
            "type": "STATIC",
            "typed_extension_protocol_options": {
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    "explicit_http_config": {"http2_protocol_options": {
                        "initial_stream_window_size": 65536,
                        "initial_connection_window_size": 1048576,
                    }},
                },
            },
            "load_assignment": {"cluster_name": "grpc", "endpoints": [{"lb_endpoints": [
                {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9}}}}]}]},
        }),
        "clusters[0]",
    )
    .expect("cluster");
    assert_eq!(c.protocol, UpstreamProtocol::Http2);
    assert_eq!(c.http2.initial_stream_window_size, Some(65536));
    assert_eq!(c.http2.initial_connection_window_size, Some(1_048_576));
}
