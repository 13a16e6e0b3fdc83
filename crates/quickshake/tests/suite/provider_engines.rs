//! Every private-key operation a handshake can need, through every engine this machine has:
//! RSA-PSS (TLS 1.3), RSA PKCS#1 (TLS 1.2 ECDHE-RSA), RSA decryption (TLS 1.2 RSA key
//! exchange) and ECDSA P-256, with real clients, counted by the provider's stats.

use crate::support;
use crate::support::providers::{batching_cert, provider_counter};
use crate::support::tls_client::{handshake, ClientOpts};
use crate::support::{direct_response_config, Gateway};

const TLS12_CIPHERS: &str = "            tls_params:\n              cipher_suites: [ECDHE-ECDSA-AES128-GCM-SHA256, ECDHE-RSA-AES128-GCM-SHA256, AES128-GCM-SHA256]\n";

/// Every engine the machine runs: software, auto, portable, and each usable accelerated one.
fn engines() -> Vec<String> {
    let mut e = vec![
        "software".to_string(),
        "auto".to_string(),
        "portable".to_string(),
    ];
    for (name, usable) in support::providers::accelerated_engines() {
        if usable {
            e.push(name);
        } else {
            support::skip::missing(
                &name,
                "not usable on this machine: its engine run is skipped (see quickshake doctor)",
            );
        }
    }
    e
}

fn gateway(engine: &str, rsa: &str) -> Gateway {
    let certs = format!(
        "{}{}",
        batching_cert(rsa, &[("engine", engine), ("batching", "adaptive")]),
        batching_cert(
            "ecdsa-p256",
            &[("engine", engine), ("batching", "adaptive")]
        )
    );
    Gateway::start(
        &direct_response_config(&certs, TLS12_CIPHERS, ""),
        &["--concurrency", "1"],
    )
}

fn ok(gw: &Gateway, opts: ClientOpts, what: &str) {
    let (_, status) =
        handshake(gw.port, &opts).unwrap_or_else(|e| panic!("{what}: {e}\n{}", gw.log_text()));
    assert!(status.contains("200"), "{what}: {status}");
}

#[test]
fn every_operation_on_every_engine() {
    let _lock = support::shared();
    for engine in engines() {
        let engine = engine.as_str();
        let gw = gateway(engine, "rsa2048");
        ok(
            &gw,
            ClientOpts {
                sigalgs: Some("rsa_pss_rsae_sha256".into()),
                ..Default::default()
            },
            "TLS 1.3 RSA-PSS",
        );
        ok(
            &gw,
            ClientOpts {
                tls12: true,
                cipher: Some("ECDHE-RSA-AES128-GCM-SHA256".into()),
                sigalgs: Some("rsa_pkcs1_sha256".into()),
            },
            "TLS 1.2 RSA PKCS#1",
        );
        assert_eq!(provider_counter(&gw, "rsa_sign"), 2, "engine {engine}");
        ok(
            &gw,
            ClientOpts {
                tls12: true,
                cipher: Some("AES128-GCM-SHA256".into()),
                ..Default::default()
            },
            "TLS 1.2 RSA decrypt",
        );
        assert_eq!(provider_counter(&gw, "rsa_decrypt"), 1, "engine {engine}");
        ok(
            &gw,
            ClientOpts {
                sigalgs: Some("ecdsa_secp256r1_sha256".into()),
                ..Default::default()
            },
            "TLS 1.3 ECDSA",
        );
        ok(
            &gw,
            ClientOpts {
                tls12: true,
                cipher: Some("ECDHE-ECDSA-AES128-GCM-SHA256".into()),
                sigalgs: Some("ecdsa_secp256r1_sha256".into()),
            },
            "TLS 1.2 ECDSA",
        );
        assert_eq!(provider_counter(&gw, "ecdsa_sign"), 2, "engine {engine}");
        assert_eq!(provider_counter(&gw, "failed"), 0, "engine {engine}");
        assert_eq!(provider_counter(&gw, "verify_failed"), 0, "engine {engine}");
        let best = support::providers::auto_engine();
        let expected = match (engine, &best) {
            ("auto", Some(b)) => b.as_str(),
            ("auto", None) => "software",
            (e, _) => e,
        };
        assert_eq!(
            gw.counter(&format!(
                "{}cryptomb.engine.{expected}",
                gw.scope("127.0.0.1")
            )),
            1,
            "engine {engine}"
        );
    }
}

#[test]
fn every_rsa_size_on_every_engine() {
    let _lock = support::shared();
    for engine in engines() {
        let engine = engine.as_str();
        for bits in ["rsa1024", "rsa3072", "rsa4096"] {
            let gw = gateway(engine, bits);
            ok(&gw, ClientOpts::default(), &format!("{bits} on {engine}"));
            ok(
                &gw,
                ClientOpts {
                    tls12: true,
                    cipher: Some("AES128-GCM-SHA256".into()),
                    ..Default::default()
                },
                &format!("{bits} decrypt on {engine}"),
            );
            assert_eq!(provider_counter(&gw, "failed"), 0);
        }
    }
}
