//! `quickshake convert`: Istio's `privateKeyProvider` (seed 002's shapes) becomes a
//! `private_key_provider` block that the gateway accepts.

use std::process::Command;

use crate::support;

fn convert(input: &str, key: &str) -> (bool, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("istio.yaml");
    std::fs::write(&file, input).expect("write");
    let out = Command::new(support::binary())
        .args(["convert", "--key-file", key])
        .arg(&file)
        .output()
        .expect("convert");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

const GATEWAY_ANNOTATION: &str = r#"
apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  components:
    ingressGateways:
    - name: istio-ingressgateway
      enabled: true
      k8s:
        podAnnotations:
          proxy.istio.io/config: |
            privateKeyProvider:
              cryptomb:
                pollDelay: 1ms
                fallback: true
"#;

#[test]
fn converted_block_is_accepted_by_the_gateway() {
    let _lock = support::shared();
    let key = support::cert("rsa2048.key.pem");
    let (ok, out, err) = convert(GATEWAY_ANNOTATION, &key);
    assert!(ok, "{err}");
    assert!(
        out.contains("provider_name: cryptomb")
            && out.contains("fallback: true")
            && out.contains("poll_delay: 1ms"),
        "{out}"
    );
    // Splice it into a certificate entry and validate the whole config with the real binary.
    let block: String = out
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| format!("              {l}\n"))
        .collect();
    let entry = format!(
        "            - certificate_chain: {{ filename: {{{{CERTS}}}}/rsa2048.cert.pem }}\n{block}"
    );
    let cfg = support::direct_response_config(&entry, "", "");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("q.yaml");
    std::fs::write(
        &path,
        support::render(
            &cfg,
            support::free_port(),
            0,
            support::free_port(),
            dir.path(),
        ),
    )
    .expect("write");
    let out = Command::new(support::binary())
        .args(["--mode", "validate", "-c"])
        .arg(&path)
        .output()
        .expect("validate");
    assert!(
        out.status.success(),
        "{}\n{cfg}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn mesh_config_default_and_istio_fallback_default() {
    let _lock = support::shared();
    let mesh = "meshConfig:\n  defaultConfig:\n    privateKeyProvider:\n      cryptomb:\n        pollDelay: 10ms\n";
    let (ok, out, _) = convert(mesh, "/k.pem");
    assert!(ok);
    assert!(
        out.contains("fallback: false"),
        "Istio's default is false: {out}"
    );
    let (ok, _, err) = convert("kind: Deployment\n", "/k.pem");
    assert!(!ok && err.contains("no privateKeyProvider"), "{err}");
}
