//! OCSP stapling (`tls_certificates[].ocsp_staple`, `ocsp_staple_policy`) side by side with
//! Envoy 1.39.3: the same bootstrap runs on both, `openssl s_client -status` asks each listener
//! for a staple, and what it gets (staple, none, failed handshake), the `ssl.ocsp_staple_*`
//! counters and `/certs`' `ocsp_details` must be the same. Configurations Envoy refuses
//! (`--mode validate`) quickshake refuses at start, naming the field. A rewritten staple file is
//! served without a restart (quickshake only: Envoy does not watch it outside SDS).
//!
//! The CA, certificates and responses are made at run time with the `openssl` CLI
//! (`support/ocsp_pki.rs`). An expired response is made two ways: without
//! `-ndays` (no nextUpdate, which Envoy treats as expired) and by rewriting a good response's
//! nextUpdate to 2020 in place: neither server checks the responder's signature (Envoy trusts
//! the operator's staple), so no clock faking is needed.

use std::path::Path;
use std::process::Command;

use crate::support;
use crate::support::envoy::{self, Envoy};
use crate::support::ocsp_pki::{pki, respond};
use crate::support::{
    cert, direct_response_hcm, eventually, free_port, s_client, start_expect_failure, Gateway,
};

/// A `tls_certificates` entry: a certificate of the PKI (or `rsa` for the repository's RSA
/// one) and an optional staple file of the PKI.
fn cert_entry(name: &str, staple: Option<&str>) -> String {
    let p = pki();
    let (crt, key) = match name {
        "rsa" => (cert("rsa2048.cert.pem"), cert("rsa2048.key.pem")),
        n => (p.file(&format!("{n}.pem")), p.file(&format!("{n}.key"))),
    };
    let mut e = format!(
        "            - certificate_chain: {{ filename: {crt} }}\n              private_key: {{ filename: {key} }}\n"
    );
    if let Some(s) = staple {
        e.push_str(&format!(
            "              ocsp_staple: {{ filename: {} }}\n",
            p.file(s)
        ));
    }
    e
}

/// `common_tls_context` lines: `tls_certificates` of [`cert_entry`]s.
fn inline_certs(entries: &str) -> String {
    format!("            tls_certificates:\n{entries}")
}

/// `common_tls_context` lines: the PKI's `srv` certificate from an SDS secret file, its staple
/// (a file of the PKI) inline as `inline_bytes`.
fn sds_cert(staple: &str) -> String {
    let p = pki();
    let b64 = Command::new("openssl")
        .args(["base64", "-A", "-in", &p.file(staple)])
        .output()
        .expect("openssl base64");
    let secret = p.file(&format!("sds-{staple}.yaml"));
    let text = format!(
        r#"resources:
- "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
  name: srv
  tls_certificate:
    certificate_chain: {{ filename: {} }}
    private_key: {{ filename: {} }}
    ocsp_staple: {{ inline_bytes: "{}" }}
"#,
        p.file("srv.pem"),
        p.file("srv.key"),
        String::from_utf8_lossy(&b64.stdout).trim()
    );
    std::fs::write(&secret, text).expect("secret file");
    format!(
        "            tls_certificate_sds_secret_configs:\n            - name: srv\n              sds_config: {{ path_config_source: {{ path: {secret} }} }}\n"
    )
}

/// One TLS listener with a direct response; `context` is its `common_tls_context`
/// ([`inline_certs`], [`sds_cert`]).
fn listener(name: &str, port: u16, policy: &str, context: &str) -> String {
    let hcm = direct_response_hcm(
        "ingress_http",
        "{ status: 200, body: { inline_string: ok } }",
        "",
    );
    format!(
        r#"  - name: {name}
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          ocsp_staple_policy: {policy}
          common_tls_context:
{context}      filters:
{hcm}"#
    )
}

/// A bootstrap of `listeners`, admin on `admin` (a port, or `{{ADMIN}}` for [`Gateway`]). The
/// node names are there for Envoy's SDS.
fn bootstrap(listeners: &[String], admin: &str) -> String {
    format!(
        "node: {{ id: ocsp-test, cluster: ocsp-test }}\nstatic_resources:\n  listeners:\n{}admin:\n  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {admin} }} }}\n",
        listeners.concat()
    )
}

/// What one `openssl s_client` connection saw.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    handshake: bool,
    stapled: bool,
    /// "Server public key is N bit".
    key_bits: Option<String>,
    /// The staple's "Next Update" line.
    next_update: Option<String>,
}

fn connect(port: u16, extra: &[&str]) -> (Seen, String) {
    let target = format!("127.0.0.1:{port}");
    let mut args = vec!["-connect", target.as_str(), "-servername", "localhost"];
    args.extend(extra);
    let out = s_client(&args, "");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::to_string)
    };
    let seen = Seen {
        handshake: text.contains("Cipher is ") && !text.contains("Cipher is (NONE)"),
        stapled: text.contains("OCSP Response Status: successful"),
        key_bits: line("Server public key is "),
        next_update: line("Next Update: "),
    };
    (seen, text)
}

/// An RFC 3339 time in seconds since the epoch (GNU `date`).
fn epoch(rfc3339: &str) -> i64 {
    let out = Command::new("date")
        .args(["-u", "+%s", "-d", rfc3339])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a time: {rfc3339}"))
}

/// The `ssl.*` counters this module compares, of the listener on `port`.
fn ocsp_counters(stats: &std::collections::HashMap<String, String>, port: u16) -> Vec<u64> {
    [
        "ocsp_staple_requests",
        "ocsp_staple_responses",
        "ocsp_staple_omitted",
        "ocsp_staple_failed",
        "handshake",
        "connection_error",
    ]
    .iter()
    .map(|n| {
        stats
            .get(&format!("listener.127.0.0.1_{port}.ssl.{n}"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX)
    })
    .collect()
}

/// A listener of the side-by-side run and what a `-status` client must see there.
struct Case {
    name: &'static str,
    policy: &'static str,
    /// (certificate, staple); certificate `sds`: the `srv` one through an SDS secret file.
    certs: Vec<(&'static str, Option<&'static str>)>,
    handshake: bool,
    stapled: bool,
    /// requests, responses, omitted, failed, handshake, connection_error after the one
    /// `-status` connection.
    counters: [u64; 6],
}

fn cases() -> Vec<Case> {
    let ok_staple = [1, 1, 0, 0, 1, 0];
    let ok_none = [1, 0, 1, 0, 1, 0];
    let failed = [1, 0, 0, 1, 0, 1];
    let case = |name, policy, certs, handshake, stapled, counters| Case {
        name,
        policy,
        certs,
        handshake,
        stapled,
        counters,
    };
    vec![
        case(
            "lenient_valid",
            "LENIENT_STAPLING",
            vec![("srv", Some("srv.der"))],
            true,
            true,
            ok_staple,
        ),
        case(
            "lenient_expired",
            "LENIENT_STAPLING",
            vec![("srv", Some("srv-past.der"))],
            true,
            false,
            ok_none,
        ),
        case(
            "strict_expired",
            "STRICT_STAPLING",
            vec![("srv", Some("srv-past.der"))],
            false,
            false,
            failed,
        ),
        case(
            "strict_absent",
            "STRICT_STAPLING",
            vec![("srv", None)],
            true,
            false,
            ok_none,
        ),
        case(
            "must_expired",
            "MUST_STAPLE",
            vec![("srv", Some("srv-nonext.der"))],
            false,
            false,
            failed,
        ),
        case(
            "must_valid",
            "must_staple",
            vec![("srv", Some("srv.der"))],
            true,
            true,
            ok_staple,
        ),
        // The must-staple certificate is served as under MUST_STAPLE whatever the policy.
        case(
            "feature_valid",
            "LENIENT_STAPLING",
            vec![("must", Some("must.der"))],
            true,
            true,
            ok_staple,
        ),
        case(
            "feature_expired",
            "LENIENT_STAPLING",
            vec![("must", Some("must-nonext.der"))],
            false,
            false,
            failed,
        ),
        // From an SDS secret file, the staple inline.
        case(
            "sds_valid",
            "STRICT_STAPLING",
            vec![("sds", Some("srv.der"))],
            true,
            true,
            ok_staple,
        ),
        // The ECDSA certificate's expired staple fails STRICT: the RSA one with a valid staple
        // serves instead (a client that does not ask gets the ECDSA one).
        case(
            "strict_two_certs",
            "STRICT_STAPLING",
            vec![("srv", Some("srv-past.der")), ("rsa", Some("rsa.der"))],
            true,
            true,
            ok_staple,
        ),
    ]
}

#[test]
fn stapling_matches_envoy() {
    let _lock = support::shared();
    let cases = cases();
    let qs_ports: Vec<u16> = cases.iter().map(|_| free_port()).collect();
    let envoy_ports: Vec<u16> = cases.iter().map(|_| free_port()).collect();
    let contexts: Vec<String> = cases
        .iter()
        .map(|c| match c.certs.as_slice() {
            [("sds", Some(staple))] => sds_cert(staple),
            certs => inline_certs(
                &certs
                    .iter()
                    .map(|(n, s)| cert_entry(n, *s))
                    .collect::<String>(),
            ),
        })
        .collect();
    let listeners = |ports: &[u16]| -> Vec<String> {
        cases
            .iter()
            .zip(ports)
            .zip(&contexts)
            .map(|((c, &port), context)| listener(c.name, port, c.policy, context))
            .collect()
    };
    let gw = Gateway::start(
        &bootstrap(&listeners(&qs_ports), "{{ADMIN}}"),
        &["--concurrency", "1"],
    );
    let envoy_admin = free_port();
    let envoy = Envoy::start(
        &bootstrap(&listeners(&envoy_ports), &envoy_admin.to_string()),
        envoy_admin,
    );

    let two = cases.len() - 1;
    for (i, c) in cases.iter().enumerate() {
        let (qs, qs_text) = connect(qs_ports[i], &["-status"]);
        let (ev, ev_text) = connect(envoy_ports[i], &["-status"]);
        assert_eq!(
            (qs.handshake, qs.stapled),
            (c.handshake, c.stapled),
            "{}: quickshake saw {qs_text}",
            c.name
        );
        assert_eq!(qs, ev, "{}: quickshake {qs_text}\nenvoy {ev_text}", c.name);
        if i == two {
            assert_eq!(
                qs.key_bits.as_deref(),
                Some("2048 bit"),
                "the RSA certificate"
            );
        }
    }
    for port in [qs_ports[two], envoy_ports[two]] {
        let (plain, text) = connect(port, &[]);
        assert_eq!(plain.key_bits.as_deref(), Some("256 bit"), "{text}");
    }
    // A client that does not ask gets no staple: in TLS 1.2 no CertificateStatus message.
    for port in [qs_ports[0], envoy_ports[0]] {
        let (asked, text) = connect(port, &["-tls1_2", "-msg", "-status"]);
        assert!(
            asked.stapled && text.contains("CertificateStatus"),
            "{text}"
        );
        let (plain, text) = connect(port, &["-tls1_2", "-msg"]);
        assert!(
            plain.handshake && !text.contains("CertificateStatus"),
            "{text}"
        );
    }

    // The counters, with the extra connections above: lenient_valid one more asking and one
    // plain, strict_two_certs one plain.
    let mut want: Vec<[u64; 6]> = cases.iter().map(|c| c.counters).collect();
    want[0] = [2, 2, 0, 0, 3, 0];
    want[two] = [1, 1, 0, 0, 2, 0];
    eventually("quickshake and Envoy count the same", || {
        let (q, e) = (gw.stats(), envoy.stats());
        cases.iter().enumerate().all(|(i, _)| {
            let qc = ocsp_counters(&q, qs_ports[i]);
            qc == ocsp_counters(&e, envoy_ports[i]) && qc == want[i]
        })
    });
    // A handshake the policy fails is a connection error, not a verification failure.
    let (q, e) = (gw.stats(), envoy.stats());
    for (i, c) in cases.iter().enumerate() {
        let fve = |stats: &std::collections::HashMap<String, String>, port: u16| {
            stats
                .get(&format!("listener.127.0.0.1_{port}.ssl.fail_verify_error"))
                .cloned()
        };
        assert_eq!(
            fve(&q, qs_ports[i]),
            fve(&e, envoy_ports[i]),
            "{}: ssl.fail_verify_error",
            c.name
        );
    }

    // `/certs`: the same ocsp_details. A staple without nextUpdate shows the time of the request
    // as its expiration (Envoy's `getNextUpdate`), shown here as "now".
    let details = |certs: serde_json::Value| -> Vec<String> {
        let mut v = certs["certificates"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["cert_chain"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c.get("ocsp_details").cloned())
            .map(|d| {
                let from = d["valid_from"].as_str().unwrap_or_default().to_string();
                let to = d["expiration"].as_str().unwrap_or_default();
                let ahead = epoch(to) - epoch(&from);
                let to = if (0..43_200).contains(&ahead) {
                    "now"
                } else {
                    to
                };
                format!("{from} .. {to}")
            })
            .collect::<Vec<_>>();
        v.sort();
        v
    };
    let (_, qs_certs) = gw.admin_get("/certs");
    let qs_details = details(serde_json::from_str(&qs_certs).expect("/certs JSON"));
    let envoy_details =
        details(serde_json::from_str(&envoy.admin_get("/certs")).expect("envoy /certs JSON"));
    // Ten staples: one per listener but strict_absent, two on strict_two_certs.
    assert_eq!(qs_details.len(), 10, "{qs_details:?}");
    assert_eq!(qs_details.iter().filter(|d| d.ends_with("now")).count(), 2);
    assert_eq!(qs_details, envoy_details);
}

#[test]
fn refused_configurations_match_envoy() {
    let _lock = support::shared();
    let path = "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.common_tls_context.tls_certificates[0]";
    for (what, policy, cert, staple, quickshake_says, envoy_says) in [
        (
            "MUST_STAPLE without a staple",
            "MUST_STAPLE",
            "srv",
            None,
            "Required OCSP response is missing",
            "Required OCSP response is missing from TLS context",
        ),
        (
            "a response for another certificate",
            "LENIENT_STAPLING",
            "srv",
            Some("other.der"),
            "OCSP response does not match its TLS certificate",
            "OCSP response does not match its TLS certificate",
        ),
        (
            "garbage",
            "LENIENT_STAPLING",
            "srv",
            Some("garbage.der"),
            "not a usable DER OCSP response",
            // Envoy's message for bytes that are no response at all.
            "Data contained more than a single OCSP response",
        ),
        (
            "a must-staple certificate without a staple",
            "LENIENT_STAPLING",
            "must",
            None,
            "OCSP response is required for must-staple certificate",
            "OCSP response is required for must-staple certificate",
        ),
    ] {
        let port = free_port();
        let one = [listener(
            "main",
            port,
            policy,
            &inline_certs(&cert_entry(cert, staple)),
        )];
        let (code, stderr) = start_expect_failure(&bootstrap(&one, "{{ADMIN}}"), &[], &[]);
        assert_ne!(code, 0, "{what}: quickshake must refuse; {stderr}");
        assert!(
            stderr.contains(&format!("{path}.ocsp_staple")),
            "{what}: field path missing: {stderr}"
        );
        assert!(stderr.contains(quickshake_says), "{what}: {stderr}");
        let (accepted, out) = envoy::validate(&bootstrap(&one, &free_port().to_string()));
        assert!(!accepted, "{what}: Envoy must refuse too: {out}");
        assert!(out.contains(envoy_says), "{what}: Envoy said {out}");
    }
}

#[test]
fn a_rewritten_staple_is_served_without_restart() {
    let _lock = support::shared();
    let p = pki();
    let dir = tempfile::tempdir().expect("tempdir");
    let staple = dir.path().join("staple.der");
    std::fs::copy(p.dir.join("srv.der"), &staple).expect("staple");
    // The same certificate, a response with another nextUpdate.
    respond(&p.dir, "srv.pem", "srv-2days.der", Some("2"));
    let entry = cert_entry("srv", None)
        + &format!(
            "              ocsp_staple: {{ filename: {} }}\n",
            staple.display()
        );
    let port = free_port();
    let gw = Gateway::start_with_env(
        &bootstrap(
            &[listener(
                "main",
                port,
                "LENIENT_STAPLING",
                &inline_certs(&entry),
            )],
            "{{ADMIN}}",
        ),
        &["--concurrency", "1"],
        &[("QUICKSHAKE_RELOAD_INTERVAL_MS", "100")],
    );
    let scope = format!("listener.127.0.0.1_{port}.ssl.");
    let next_update = |file: &Path| {
        let out = Command::new("openssl")
            .args(["ocsp", "-noverify", "-resp_text", "-respin"])
            .arg(file)
            .output()
            .expect("openssl ocsp -respin");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.trim().strip_prefix("Next Update: ").map(str::to_string))
            .expect("a Next Update")
    };
    let first = next_update(&p.dir.join("srv.der"));
    let second = next_update(&p.dir.join("srv-2days.der"));
    assert_ne!(first, second);
    assert_eq!(connect(port, &["-status"]).0.next_update, Some(first));

    std::fs::copy(p.dir.join("srv-2days.der"), &staple).expect("rewrite the staple");
    eventually("reload", || {
        gw.counter(&format!("{scope}context_reload_success")) >= 1
    });
    assert_eq!(
        connect(port, &["-status"]).0.next_update,
        Some(second.clone()),
        "new handshakes get the new staple"
    );

    // A staple that does not load (another certificate's) is rejected; the last one serves.
    std::fs::copy(p.dir.join("other.der"), &staple).expect("rewrite the staple");
    eventually("rejection", || {
        gw.counter(&format!("{scope}context_reload_rejected")) >= 1
    });
    assert_eq!(connect(port, &["-status"]).0.next_update, Some(second));
    assert!(
        gw.log_text().contains("does not match its TLS certificate"),
        "{}",
        gw.log_text()
    );
}
