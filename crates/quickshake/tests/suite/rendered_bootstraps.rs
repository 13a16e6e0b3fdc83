//! The bootstraps Envoy Gateway and Istio render for Envoy load and run in quickshake, launched
//! with the command lines their launchers use: our own fixtures in the shape of Envoy Gateway's
//! `internal/xds/bootstrap/testdata/render/enable-prometheus.yaml` and Istio's
//! `pkg/bootstrap/testdata/default_golden.json` (`testdata/bootstraps/`). Their control planes
//! are not there: the xDS stream retries in the background while the static listeners serve.

use std::process::Command;

use crate::support;
use crate::support::*;

const EG: &str = include_str!("../../../../testdata/bootstraps/envoy-gateway.yaml");
const ISTIO: &str = include_str!("../../../../testdata/bootstraps/istio-sidecar.json");

/// The SDS files Envoy Gateway mounts for the xDS cluster's mTLS.
fn eg_sds_files() -> [(&'static str, String); 2] {
    let pem = |f: &str| std::fs::read_to_string(certs_dir().join(f)).expect("test certificate");
    let cert = serde_json::json!({"resources": [{
        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
        "name": "xds_certificate",
        "tls_certificate": {
            "certificate_chain": {"inline_string": pem("rsa2048.cert.pem")},
            "private_key": {"inline_string": pem("rsa2048.key.pem")}
        }
    }]});
    let ca = serde_json::json!({"resources": [{
        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
        "name": "xds_trusted_ca",
        "validation_context": {"trusted_ca": {"inline_string": pem("rsa2048.cert.pem")}}
    }]});
    [
        ("xds-certificate.json", cert.to_string()),
        ("xds-trusted-ca.json", ca.to_string()),
    ]
}

const EG_FLAGS: [&str; 8] = [
    "--service-cluster",
    "envoy-gateway-system/eg",
    "--service-node",
    "envoy-default-eg-5f6d8-abcde",
    "--log-level",
    "info",
    "--cpuset-threads",
    "--drain-time-s",
];

const PILOT_AGENT_FLAGS: [&str; 14] = [
    "--drain-time-s",
    "45",
    "--drain-strategy",
    "immediate",
    "--local-address-ip-version",
    "v4",
    "--file-flush-interval-msec",
    "1000",
    "--disable-hot-restart",
    "--allow-unknown-static-fields",
    "--log-format",
    "%Y-%m-%dT%T.%fZ\t%l\tenvoy %n %g:%#\t%v\tthread=%t",
    "--component-log-level",
    "misc:error",
];

fn validate(files: &[(&str, String)], config_args: &[String], flags: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fill = |t: &str| render(t, free_port(), free_port(), free_port(), dir.path());
    for (name, text) in files {
        std::fs::write(dir.path().join(name), fill(text)).expect("write file");
    }
    let args: Vec<String> = config_args.iter().map(|a| fill(a)).collect();
    let out = Command::new(binary())
        .args(&args)
        .args(flags)
        .args(["--mode", "validate"])
        .output()
        .expect("run quickshake");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "--mode validate failed:\n{text}");
    assert!(text.contains("OK"), "{text}");
}

#[test]
fn envoy_gateway_bootstrap_validates_and_runs() {
    let _lock = support::shared();
    let files = eg_sds_files();
    let mut flags = EG_FLAGS.to_vec();
    flags.push("5");
    validate(&files, &["--config-yaml".into(), EG.into()], &flags);

    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let mut argv = vec!["--config-yaml", EG];
    argv.extend(flags.iter().copied());
    // initial_fetch_timeout 0s and no control plane: INITIALIZING for ever, as Envoy would be.
    let gw = Gateway::start_argv_initializing(&files, &argv);
    // The stats listener: normalize_path, a `:method` matcher, proxied to the admin endpoint.
    let (code, body) = http_get(gw.port, "/stats/../stats/prometheus").expect("stats listener");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("# TYPE"), "{body}");
    let (code, _) = http_request(gw.port, "POST", "/stats/prometheus").expect("stats listener");
    assert_eq!(code, 404, "a POST does not match the GET route");
    let log = gw.log_text();
    assert!(log.contains("accepted with no effect"), "{log}");
    assert!(log.contains("stats_config"), "{log}");
}

#[test]
fn istio_sidecar_bootstrap_validates_and_runs() {
    let _lock = support::shared();
    validate(
        &[("bootstrap.json", ISTIO.into())],
        &["-c".into(), "{{DIR}}/bootstrap.json".into()],
        &PILOT_AGENT_FLAGS,
    );
    let mut argv = vec!["-c", "{{DIR}}/bootstrap.json"];
    argv.extend(PILOT_AGENT_FLAGS.iter().copied());
    let gw = Gateway::start_argv_initializing(&[("bootstrap.json", ISTIO)], &argv);
    // Istio's prometheus listener compresses the stats (brotli, zstd, gzip filters in order).
    let out = curl(&[
        "-s",
        "-H",
        "Accept-Encoding: gzip",
        "-D",
        "-",
        "-o",
        "/dev/null",
        &format!("http://127.0.0.1:{}/stats/prometheus", gw.port),
    ]);
    let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(head.contains(" 200"), "{head}");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    // The readiness listener routes to pilot-agent's port, which is not there: 503, not a hang.
    let (code, _) = http_get(gw.port2, "/healthz/ready").expect("ready listener");
    assert_eq!(code, 503);
}
