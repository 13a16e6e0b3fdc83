//! Upstream TLS against a tokio-boring acceptor with the rsa2048 test certificate.

use std::sync::atomic::Ordering;

use quickshake_stats::Store;
use quickshake_upstream::{ClusterManager, ClusterSpec, Discovery, UpstreamError, UpstreamTlsSpec};

use crate::common::*;

fn tls_spec(
    name: &str,
    addr: std::net::SocketAddr,
    tls: UpstreamTlsSpec,
) -> quickshake_upstream::ClusterSpec {
    let mut s = static_spec(name, &[addr]);
    s.tls = Some(tls);
    s
}

#[tokio::test]
async fn verified_tls_with_sni() {
    let (a, seen) = upstream(Kind::TlsH1).await;
    let store = Store::new();
    let tls = UpstreamTlsSpec {
        sni: Some("localhost".into()),
        trusted_ca_pem: Some(read_cert("rsa2048.cert.pem")),
        alpn: vec!["http/1.1".into()],
        ..Default::default()
    };
    let cm = ClusterManager::new(vec![tls_spec("tls", a, tls)], &store).expect("manager");
    let c = cm.cluster("tls").expect("cluster");
    assert!(c.is_tls());
    for _ in 0..3 {
        let (status, body) = fetch(&c, "/secure").await.expect("response");
        assert_eq!(status, 200);
        assert!(body.contains("path=/secure"), "{body}");
    }
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
    assert_eq!(
        seen.sni.lock().expect("sni").clone(),
        vec![Some("localhost".to_string())]
    );
    assert_eq!(
        store.counter_value("cluster.tls.upstream_cx_total"),
        Some(1)
    );

    // A raw stream is TLS too.
    let raw = tokio::time::timeout(BOUND, c.connect())
        .await
        .expect("bound")
        .expect("raw TLS stream");
    assert!(raw.is_tls());
    assert_eq!(raw.alpn_protocol(), None, "server did not select ALPN");
}

#[tokio::test]
async fn untrusted_ca_fails() {
    let (a, _) = upstream(Kind::TlsH1).await;
    let store = Store::new();
    let tls = UpstreamTlsSpec {
        sni: Some("localhost".into()),
        trusted_ca_pem: Some(read_cert("other.cert.pem")),
        ..Default::default()
    };
    let cm = ClusterManager::new(vec![tls_spec("bad", a, tls)], &store).expect("manager");
    let err = fetch(&cm.cluster("bad").expect("cluster"), "/")
        .await
        .expect_err("verification must fail");
    assert!(matches!(err, UpstreamError::Tls(_)), "{err:?}");
    assert!(err.is_retriable_connect_failure());
    assert_eq!(
        store.counter_value("cluster.bad.upstream_cx_connect_fail"),
        Some(1)
    );
    assert_eq!(store.gauge_value("cluster.bad.upstream_cx_active"), Some(0));
}

#[tokio::test]
async fn wrong_sni_fails_hostname_check() {
    let (a, seen) = upstream(Kind::TlsH1).await;
    let store = Store::new();
    let tls = UpstreamTlsSpec {
        sni: Some("wrong.example".into()),
        trusted_ca_pem: Some(read_cert("rsa2048.cert.pem")),
        ..Default::default()
    };
    let cm = ClusterManager::new(vec![tls_spec("sni", a, tls)], &store).expect("manager");
    let err = fetch(&cm.cluster("sni").expect("cluster"), "/")
        .await
        .expect_err("hostname check must fail");
    assert!(matches!(err, UpstreamError::Tls(_)), "{err:?}");
    assert_eq!(seen.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn no_validation_context_does_not_verify() {
    let (a, seen) = upstream(Kind::TlsH1).await;
    let store = Store::new();
    let cm = ClusterManager::new(vec![tls_spec("nov", a, UpstreamTlsSpec::default())], &store)
        .expect("manager");
    let (status, _) = fetch(&cm.cluster("nov").expect("cluster"), "/")
        .await
        .expect("unverified TLS works, as in Envoy");
    assert_eq!(status, 200);
    assert_eq!(seen.sni.lock().expect("sni").clone(), vec![None]);
}

#[test]
fn bad_tls_config() {
    let store = Store::new();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 1));
    let only_cert = UpstreamTlsSpec {
        client_cert_pem: Some(read_cert("client.cert.pem")),
        ..Default::default()
    };
    assert!(matches!(
        ClusterManager::new(vec![tls_spec("a", addr, only_cert)], &store),
        Err(UpstreamError::Config { .. })
    ));
    let bad_ca = UpstreamTlsSpec {
        trusted_ca_pem: Some(b"not a pem".to_vec()),
        ..Default::default()
    };
    assert!(ClusterManager::new(vec![tls_spec("b", addr, bad_ca)], &store).is_err());
    let mismatch = UpstreamTlsSpec {
        client_cert_pem: Some(read_cert("client.cert.pem")),
        client_key_pem: Some(read_cert("other.key.pem")),
        ..Default::default()
    };
    assert!(ClusterManager::new(vec![tls_spec("c", addr, mismatch)], &store).is_err());
    let ok = UpstreamTlsSpec {
        client_cert_pem: Some(read_cert("client.cert.pem")),
        client_key_pem: Some(read_cert("client.key.pem")),
        ..Default::default()
    };
    assert!(ClusterManager::new(vec![tls_spec("d", addr, ok)], &store).is_ok());
}

#[tokio::test]
async fn h2_over_tls_via_alpn() {
    let (a, seen) = upstream(Kind::TlsAlpnH2).await;
    let store = Store::new();
    let tls = UpstreamTlsSpec {
        sni: Some("localhost".into()),
        trusted_ca_pem: Some(read_cert("rsa2048.cert.pem")),
        ..Default::default()
    };
    let mut spec = tls_spec("h2tls", a, tls);
    spec.protocol = quickshake_upstream::Protocol::Http2;
    let cm = ClusterManager::new(vec![spec], &store).expect("manager");
    let c = cm.cluster("h2tls").expect("cluster");
    for _ in 0..3 {
        let (status, body) = fetch(&c, "/h2").await.expect("response");
        assert_eq!(status, 200);
        assert!(body.contains("version=HTTP/2.0"), "{body}");
        assert!(body.contains("host=upstream.test"), "{body}");
    }
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
    assert_eq!(
        seen.alpn.lock().expect("alpn").clone(),
        vec![Some(b"h2".to_vec())]
    );
}

#[tokio::test]
async fn client_certificate() {
    let (a, seen) = upstream(Kind::Mtls).await;
    let store = Store::new();
    let with_cert = UpstreamTlsSpec {
        sni: Some("localhost".into()),
        trusted_ca_pem: Some(read_cert("rsa2048.cert.pem")),
        client_cert_pem: Some(read_cert("client.cert.pem")),
        client_key_pem: Some(read_cert("client.key.pem")),
        ..Default::default()
    };
    let without = UpstreamTlsSpec {
        sni: Some("localhost".into()),
        trusted_ca_pem: Some(read_cert("rsa2048.cert.pem")),
        ..Default::default()
    };
    let cm = ClusterManager::new(
        vec![tls_spec("m", a, with_cert), tls_spec("n", a, without)],
        &store,
    )
    .expect("manager");
    let (status, _) = fetch(&cm.cluster("m").expect("cluster"), "/")
        .await
        .expect("mTLS response");
    assert_eq!(status, 200);
    assert_eq!(
        seen.client_subject.lock().expect("subject").clone(),
        vec![Some("trusted client".to_string())]
    );
    // Without a certificate the server refuses: a handshake error (TLS 1.2) or
    // a reset when the server's alert arrives after the TLS 1.3 handshake.
    let err = fetch(&cm.cluster("n").expect("cluster"), "/")
        .await
        .expect_err("refused without a client certificate");
    assert!(
        matches!(err, UpstreamError::Tls(_) | UpstreamError::Reset(_)),
        "{err:?}"
    );
}

#[tokio::test]
async fn handshake_timeout() {
    let (a, _) = upstream(Kind::Silent).await;
    let store = Store::new();
    let mut spec = tls_spec("slow", a, UpstreamTlsSpec::default());
    spec.connect_timeout = std::time::Duration::from_millis(200);
    let cm = ClusterManager::new(vec![spec], &store).expect("manager");
    let err = fetch(&cm.cluster("slow").expect("cluster"), "/")
        .await
        .expect_err("timeout");
    assert!(matches!(err, UpstreamError::ConnectTimeout(_)), "{err:?}");
    assert_eq!(
        store.counter_value("cluster.slow.upstream_cx_connect_timeout"),
        Some(1)
    );
    assert_eq!(
        store.counter_value("cluster.slow.upstream_cx_connect_fail"),
        Some(1)
    );
    assert_eq!(
        store.gauge_value("cluster.slow.upstream_cx_active"),
        Some(0)
    );
}

/// `match_typed_subject_alt_names`: the upstream's certificate (rsa2048: `DNS:localhost`,
/// `IP:127.0.0.1`) must have a SAN a matcher matches, after the chain is verified (Envoy's
/// `DefaultCertValidator`); no SNI, so the hostname check is not what refuses.
#[tokio::test]
async fn san_matchers_accept_a_matching_peer_and_refuse_others() {
    use quickshake_config::{SanMatcher, SanType, StringMatch, StringMatcher};
    let (a, seen) = upstream(Kind::TlsH1).await;
    let store = Store::new();
    let san = |t: SanType, kind: StringMatch| SanMatcher {
        san_type: t,
        matcher: StringMatcher {
            kind,
            ignore_case: false,
        },
    };
    let spec = |matchers: Vec<SanMatcher>| UpstreamTlsSpec {
        trusted_ca_pem: Some(read_cert("rsa2048.cert.pem")),
        san_matchers: matchers,
        ..Default::default()
    };
    let good = spec(vec![
        san(SanType::Dns, StringMatch::Exact("envoy-gateway".into())),
        san(SanType::IpAddress, StringMatch::Exact("127.0.0.1".into())),
    ]);
    let bad = spec(vec![
        san(SanType::Dns, StringMatch::Exact("envoy-gateway".into())),
        // The right name, the wrong type.
        san(SanType::Uri, StringMatch::Exact("localhost".into())),
    ]);
    let cm = ClusterManager::new(
        vec![tls_spec("good", a, good), tls_spec("bad", a, bad)],
        &store,
    )
    .expect("manager");
    let (status, _) = fetch(&cm.cluster("good").expect("cluster"), "/")
        .await
        .expect("a matching SAN is accepted");
    assert_eq!(status, 200);
    let err = fetch(&cm.cluster("bad").expect("cluster"), "/")
        .await
        .expect_err("no matching SAN: refused");
    assert!(matches!(err, UpstreamError::Tls(_)), "{err:?}");
    assert!(
        err.to_string().contains("application verification failure"),
        "{err}"
    );
    assert_eq!(
        store.counter_value("cluster.bad.upstream_cx_connect_fail"),
        Some(1)
    );
    assert_eq!(seen.requests.load(Ordering::SeqCst), 1);
}

/// Envoy's `transport_socket_matches`: one host matched to a TLS socket with SNI, one on the
/// cluster's plaintext socket; both serve, for a static cluster and over EDS.
#[tokio::test]
async fn transport_socket_matches_per_host() {
    let (tls_addr, tls_seen) = upstream(Kind::TlsH1).await;
    let (plain_addr, plain_seen) = upstream(Kind::H1).await;
    let store = Store::new();
    let mut spec = static_spec("mixed", &[tls_addr, plain_addr]);
    spec.socket_matches = vec![Some(UpstreamTlsSpec {
        sni: Some("localhost".into()),
        trusted_ca_pem: Some(read_cert("rsa2048.cert.pem")),
        ..Default::default()
    })];
    spec.host_sockets = vec![(tls_addr, 0)];
    let cm = ClusterManager::new(vec![spec], &store).expect("manager");
    let c = cm.cluster("mixed").expect("cluster");
    assert!(!c.is_tls(), "the cluster's own socket is plaintext");
    let mut ports = Vec::new();
    for _ in 0..4 {
        let (status, body) = fetch(&c, "/m").await.expect("response");
        assert_eq!(status, 200);
        ports.push(body);
    }
    assert!(ports
        .iter()
        .any(|b| b.contains(&format!("port={}", tls_addr.port()))));
    assert!(ports
        .iter()
        .any(|b| b.contains(&format!("port={}", plain_addr.port()))));
    assert_eq!(tls_seen.connections.load(Ordering::SeqCst), 1);
    assert_eq!(plain_seen.connections.load(Ordering::SeqCst), 1);
    assert_eq!(
        tls_seen.sni.lock().expect("sni").clone(),
        vec![Some("localhost".to_string())]
    );

    // EDS: the hosts arrive with the entry each uses.
    let mut eds = ClusterSpec::new("eds", Discovery::Eds, Vec::new());
    eds.socket_matches = vec![Some(UpstreamTlsSpec {
        sni: Some("localhost".into()),
        trusted_ca_pem: Some(read_cert("rsa2048.cert.pem")),
        ..Default::default()
    })];
    let cm = ClusterManager::new(vec![eds], &store).expect("manager");
    let c = cm.cluster("eds").expect("cluster");
    c.set_endpoints_with_sockets(vec![(tls_addr, Some(0)), (plain_addr, None)]);
    for _ in 0..4 {
        let (status, _) = fetch(&c, "/eds").await.expect("response over EDS hosts");
        assert_eq!(status, 200);
    }
    assert_eq!(tls_seen.connections.load(Ordering::SeqCst), 2);
    assert_eq!(plain_seen.connections.load(Ordering::SeqCst), 2);
}
