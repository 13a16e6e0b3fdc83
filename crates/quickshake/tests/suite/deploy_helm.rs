//! The Helm chart (`deploy/helm/quickshake`): `helm lint`, then `helm template` with every values
//! file of the test matrix (`ci/*-values.yaml`), parsed and checked: workers = CPU limit,
//! requests = limits, probes on the admin port, the certificate Secret mounted 0400, the NFD
//! AVX-512 IFMA node affinity of the seeds, QAT resources, and a bootstrap the real binary
//! accepts (`--mode validate`) and serves.
//!
//! Needs helm (`scripts/setup-helm`); `QUICKSHAKE_SKIP_HELM=1` skips these tests.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml::Value;

use crate::support;

/// The test matrix: `deploy/helm/quickshake/ci/<name>-values.yaml`.
const MATRIX: [&str; 5] = ["default", "ifma-required", "ifma-preferred", "qat", "cpu4"];

/// Seed 003 (Envoy Gateway, "Change EnvoyProxy configuration for CryptoMB"): the node affinity
/// that schedules a CryptoMB gateway on AVX-512 IFMA nodes labelled by node-feature-discovery,
/// in the seed's order.
const IFMA_NFD_KEYS: [&str; 5] = [
    "feature.node.kubernetes.io/cpu-cpuid.AVX512F",
    "feature.node.kubernetes.io/cpu-cpuid.AVX512DQ",
    "feature.node.kubernetes.io/cpu-cpuid.AVX512BW",
    "feature.node.kubernetes.io/cpu-cpuid.AVX512IFMA",
    "feature.node.kubernetes.io/cpu-cpuid.AVX512VBMI2",
];

/// Where the chart mounts the certificate Secret (values `tls.mountPath`).
const CERT_MOUNT: &str = "/etc/quickshake/certs";

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/helm/quickshake")
}

fn values_file(name: &str) -> PathBuf {
    chart().join("ci").join(format!("{name}-values.yaml"))
}

/// The helm binary, or `None` when `QUICKSHAKE_SKIP_HELM=1`. Looks on PATH, then where
/// `go install` puts it (`$GOBIN`, `$GOPATH/bin`, `~/go/bin`).
fn helm() -> Option<PathBuf> {
    if support::skip::opted_out("helm", "QUICKSHAKE_SKIP_HELM") {
        return None;
    }
    let mut candidates = vec![PathBuf::from("helm")];
    if let Some(d) = std::env::var_os("GOBIN") {
        candidates.push(PathBuf::from(d).join("helm"));
    }
    if let Some(gopath) = std::env::var_os("GOPATH") {
        for d in std::env::split_paths(&gopath) {
            candidates.push(d.join("bin/helm"));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join("go/bin/helm"));
    }
    for c in candidates {
        let ok = Command::new(&c)
            .args(["version", "--short"])
            .output()
            .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).starts_with("v3."))
            .unwrap_or(false);
        if ok {
            return Some(c);
        }
    }
    panic!(
        "helm (v3) is not installed: run scripts/setup-helm (or set QUICKSHAKE_SKIP_HELM=1 to skip the chart tests)"
    );
}

/// `helm template` with extra arguments: (success, stdout, stderr).
fn template_raw(helm: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(helm)
        .args(["template", "qs", &chart().display().to_string()])
        .args(["--namespace", "gateway"])
        .args(args)
        .output()
        .expect("run helm template");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Every object `helm template` renders for a values file of the matrix.
fn render(helm: &Path, name: &str) -> Vec<Value> {
    render_args(helm, &["-f", &values_file(name).display().to_string()])
}

fn render_args(helm: &Path, args: &[&str]) -> Vec<Value> {
    let (ok, stdout, stderr) = template_raw(helm, args);
    assert!(ok, "helm template {args:?} failed:\n{stderr}");
    // helm separates documents with `---` lines.
    let mut docs = Vec::new();
    for part in format!("\n{stdout}").split("\n---") {
        let v: Value = serde_yaml::from_str(part)
            .unwrap_or_else(|e| panic!("helm template {args:?}: invalid YAML ({e}):\n{part}"));
        if !v.is_null() {
            docs.push(v);
        }
    }
    assert!(!docs.is_empty(), "helm template {args:?} rendered nothing");
    docs
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> Option<&'a Value> {
    docs.iter().find(|d| d["kind"].as_str() == Some(kind))
}

fn one<'a>(docs: &'a [Value], k: &str, what: &str) -> &'a Value {
    kind(docs, k).unwrap_or_else(|| panic!("{what}: no {k} rendered"))
}

fn container(docs: &[Value], what: &str) -> Value {
    let d = one(docs, "Deployment", what);
    let cs = d["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap_or_else(|| panic!("{what}: Deployment has no containers"));
    assert_eq!(cs.len(), 1, "{what}: one container");
    cs[0].clone()
}

fn pod_spec(docs: &[Value], what: &str) -> Value {
    one(docs, "Deployment", what)["spec"]["template"]["spec"].clone()
}

/// A scalar as text (`2`, `"2"`, `0400` all compare by their text).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

/// The container's args as strings.
fn args(c: &Value) -> Vec<String> {
    c["args"]
        .as_sequence()
        .expect("container args")
        .iter()
        .map(text)
        .collect()
}

fn arg_after(args: &[String], flag: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The bootstrap in the ConfigMap (`data["config.yaml"]`), parsed.
fn bootstrap(docs: &[Value], what: &str) -> (String, Value) {
    let cm = one(docs, "ConfigMap", what);
    let raw = cm["data"]["config.yaml"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: ConfigMap has no config.yaml"))
        .to_string();
    let v: Value = serde_yaml::from_str(&raw)
        .unwrap_or_else(|e| panic!("{what}: config.yaml is not YAML: {e}\n{raw}"));
    (raw, v)
}

/// A container port number by name or number.
fn resolve_port(c: &Value, port: &Value) -> u64 {
    match port {
        Value::Number(n) => n.as_u64().expect("port number"),
        Value::String(name) => c["ports"]
            .as_sequence()
            .expect("container ports")
            .iter()
            .find(|p| p["name"].as_str() == Some(name))
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("no container port named {name}")),
        other => panic!("bad probe port {other:?}"),
    }
}

#[test]
fn helm_lint_passes() {
    let _lock = support::shared();
    let Some(helm) = helm() else { return };
    let chart = chart().display().to_string();
    let mut runs = vec![vec!["lint".to_string(), "--strict".into(), chart.clone()]];
    for name in MATRIX {
        runs.push(vec![
            "lint".into(),
            "--strict".into(),
            chart.clone(),
            "-f".into(),
            values_file(name).display().to_string(),
        ]);
    }
    for run in runs {
        let out = Command::new(&helm).args(&run).output().expect("helm lint");
        assert!(
            out.status.success(),
            "helm {run:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_ci_values_files_are_the_test_matrix() {
    let _lock = support::shared();
    let found: BTreeSet<String> = std::fs::read_dir(chart().join("ci"))
        .expect("deploy/helm/quickshake/ci")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix("-values.yaml"))
                .map(str::to_string)
        })
        .collect();
    let want: BTreeSet<String> = MATRIX.iter().map(|s| s.to_string()).collect();
    assert_eq!(found, want, "ci/*-values.yaml must be exactly the matrix");
}

#[test]
fn every_values_file_renders_the_gateway_objects() {
    let _lock = support::shared();
    let Some(helm) = helm() else { return };
    for name in MATRIX {
        let docs = render(&helm, name);
        let kinds: BTreeSet<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
        for k in ["Deployment", "ConfigMap", "Service", "PodDisruptionBudget"] {
            assert!(kinds.contains(k), "{name}: no {k} in {kinds:?}");
        }
        let pdb = one(&docs, "PodDisruptionBudget", name);
        assert_eq!(pdb["apiVersion"].as_str(), Some("policy/v1"), "{name}");
        let d = one(&docs, "Deployment", name);
        assert_eq!(
            pdb["spec"]["selector"]["matchLabels"], d["spec"]["selector"]["matchLabels"],
            "{name}: the PDB selects the gateway pods"
        );
        let svc = one(&docs, "Service", name);
        assert_eq!(
            svc["spec"]["selector"], d["spec"]["selector"]["matchLabels"],
            "{name}: the Service selects the gateway pods"
        );
        assert_eq!(
            text(&svc["spec"]["ports"][0]["targetPort"]),
            "https",
            "{name}: the Service targets the TLS listener"
        );
        let c = container(&docs, name);
        assert!(
            text(&c["image"]).starts_with("quickshake:"),
            "{name}: image from image.repository/tag: {:?}",
            c["image"]
        );
    }
    // Service type and autoscaling are values.
    let default = render(&helm, "default");
    assert_eq!(
        one(&default, "Service", "default")["spec"]["type"].as_str(),
        Some("LoadBalancer")
    );
    let hpa = one(&default, "HorizontalPodAutoscaler", "default");
    assert_eq!(hpa["apiVersion"].as_str(), Some("autoscaling/v2"));
    assert_eq!(
        hpa["spec"]["scaleTargetRef"]["kind"].as_str(),
        Some("Deployment")
    );
    let m = &hpa["spec"]["metrics"][0]["resource"];
    assert_eq!(m["name"].as_str(), Some("cpu"), "HPA on CPU: {hpa:?}");
    assert_eq!(m["target"]["type"].as_str(), Some("Utilization"));
    assert!(
        one(&default, "Deployment", "default")["spec"]["replicas"].is_null(),
        "with the HPA on, the Deployment leaves replicas to it"
    );
    let preferred = render(&helm, "ifma-preferred");
    assert_eq!(
        one(&preferred, "Service", "ifma-preferred")["spec"]["type"].as_str(),
        Some("ClusterIP")
    );
    let cpu4 = render(&helm, "cpu4");
    assert!(
        kind(&cpu4, "HorizontalPodAutoscaler").is_none(),
        "cpu4: HPA off"
    );
    assert_eq!(
        one(&cpu4, "Deployment", "cpu4")["spec"]["replicas"].as_u64(),
        Some(3)
    );
    assert_eq!(
        one(&cpu4, "Service", "cpu4")["spec"]["type"].as_str(),
        Some("NodePort")
    );
}

#[test]
fn concurrency_equals_the_cpu_limit_and_requests_equal_limits() {
    let _lock = support::shared();
    let Some(helm) = helm() else { return };
    for (name, cpus) in [
        ("default", 2),
        ("ifma-required", 2),
        ("ifma-preferred", 2),
        ("qat", 1),
        ("cpu4", 4),
    ] {
        let docs = render(&helm, name);
        let c = container(&docs, name);
        let a = args(&c);
        assert_eq!(
            arg_after(&a, "-c").as_deref(),
            Some("/etc/quickshake/config.yaml"),
            "{name}: {a:?}"
        );
        let limits = &c["resources"]["limits"];
        let requests = &c["resources"]["requests"];
        let limit_cpu = text(&limits["cpu"]);
        let n: u64 = limit_cpu
            .parse()
            .unwrap_or_else(|_| panic!("{name}: CPU limit {limit_cpu:?} is not whole cores"));
        assert_eq!(n, cpus, "{name}: CPU limit");
        assert_eq!(
            arg_after(&a, "--concurrency").as_deref(),
            Some(limit_cpu.as_str()),
            "{name}: --concurrency must equal the CPU limit: {a:?}"
        );
        assert!(!limits["memory"].is_null(), "{name}: memory limit");
        assert_eq!(
            requests, limits,
            "{name}: requests must equal limits (Guaranteed QoS for the static CPU manager)"
        );
    }
    // The chart refuses CPU values that cannot be whole cores.
    for bad in ["1.5", "500m"] {
        let (ok, _, stderr) = template_raw(&helm, &["--set", &format!("resources.cpu={bad}")]);
        assert!(!ok, "resources.cpu={bad} must be refused");
        assert!(stderr.contains("whole number of cores"), "{bad}: {stderr}");
    }
}

#[test]
fn probes_and_scrape_annotations_use_the_admin_port() {
    let _lock = support::shared();
    let Some(helm) = helm() else { return };
    for name in MATRIX {
        let docs = render(&helm, name);
        let c = container(&docs, name);
        let (_, cfg) = bootstrap(&docs, name);
        let admin = &cfg["admin"]["address"]["socket_address"];
        assert_eq!(
            admin["address"].as_str(),
            Some("0.0.0.0"),
            "{name}: admin must listen on all pod addresses"
        );
        let admin_port = admin["port_value"].as_u64().expect("admin port");
        assert_eq!(admin_port, 9901, "{name}");
        let ready = &c["readinessProbe"]["httpGet"];
        assert_eq!(ready["path"].as_str(), Some("/ready"), "{name}: {c:?}");
        assert_eq!(
            resolve_port(&c, &ready["port"]),
            admin_port,
            "{name}: readiness on the admin port"
        );
        let live = &c["livenessProbe"]["httpGet"];
        assert!(live["path"].as_str().is_some(), "{name}: liveness httpGet");
        assert_eq!(
            resolve_port(&c, &live["port"]),
            admin_port,
            "{name}: liveness on the admin port"
        );
        // The TLS listener is the container's https port.
        let listener = &cfg["static_resources"]["listeners"][0]["address"]["socket_address"];
        assert_eq!(listener["address"].as_str(), Some("0.0.0.0"), "{name}");
        assert_eq!(
            Some(resolve_port(&c, &Value::String("https".into()))),
            listener["port_value"].as_u64(),
            "{name}: container port https = the listener"
        );
        let ann = &one(&docs, "Deployment", name)["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(ann["prometheus.io/scrape"].as_str(), Some("true"), "{name}");
        assert_eq!(ann["prometheus.io/port"].as_str(), Some("9901"), "{name}");
        assert_eq!(
            ann["prometheus.io/path"].as_str(),
            Some("/stats/prometheus"),
            "{name}"
        );
    }
}

#[test]
fn certificate_secret_is_mounted_read_only_0400() {
    let _lock = support::shared();
    let Some(helm) = helm() else { return };
    for name in MATRIX {
        let docs = render(&helm, name);
        let spec = pod_spec(&docs, name);
        let c = container(&docs, name);
        let vols = spec["volumes"].as_sequence().expect("volumes");
        let secret_vol = vols
            .iter()
            .find(|v| !v["secret"].is_null())
            .unwrap_or_else(|| panic!("{name}: no Secret volume"));
        assert_eq!(
            secret_vol["secret"]["secretName"].as_str(),
            Some("quickshake-tls"),
            "{name}"
        );
        // 0400 octal; the chart writes it in decimal (256), which YAML 1.1 (Kubernetes) and 1.2
        // readers agree on, where a literal `0400` is octal to one and decimal 400 to the other.
        let mode = secret_vol["secret"]["defaultMode"].as_u64();
        assert_eq!(mode, Some(0o400), "{name}: defaultMode 0400 (256)");
        let mount = c["volumeMounts"]
            .as_sequence()
            .expect("volumeMounts")
            .iter()
            .find(|m| m["name"] == secret_vol["name"])
            .unwrap_or_else(|| panic!("{name}: Secret volume not mounted"));
        assert_eq!(mount["mountPath"].as_str(), Some(CERT_MOUNT), "{name}");
        assert_eq!(mount["readOnly"].as_bool(), Some(true), "{name}");
        // The bootstrap reads the certificate and key from that mount.
        let (raw, _) = bootstrap(&docs, name);
        assert!(
            raw.contains(&format!("{CERT_MOUNT}/tls.crt"))
                && raw.contains(&format!("{CERT_MOUNT}/tls.key")),
            "{name}: the config reads tls.crt/tls.key from {CERT_MOUNT}:\n{raw}"
        );
    }
}

fn match_expressions(exprs: &Value) -> Vec<(String, String)> {
    exprs
        .as_sequence()
        .expect("matchExpressions")
        .iter()
        .map(|e| (text(&e["key"]), text(&e["operator"])))
        .collect()
}

fn seed_expressions() -> Vec<(String, String)> {
    IFMA_NFD_KEYS
        .iter()
        .map(|k| (k.to_string(), "Exists".to_string()))
        .collect()
}

#[test]
fn ifma_values_carry_the_seed_nfd_node_affinity() {
    let _lock = support::shared();
    let Some(helm) = helm() else { return };
    let docs = render(&helm, "ifma-required");
    let na = &pod_spec(&docs, "ifma-required")["affinity"]["nodeAffinity"];
    assert!(
        na["preferredDuringSchedulingIgnoredDuringExecution"].is_null(),
        "required mode: {na:?}"
    );
    let terms = na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .as_sequence()
        .unwrap_or_else(|| panic!("required mode: no nodeSelectorTerms: {na:?}"));
    assert_eq!(terms.len(), 1, "one term: all five labels together");
    assert_eq!(
        match_expressions(&terms[0]["matchExpressions"]),
        seed_expressions()
    );

    let docs = render(&helm, "ifma-preferred");
    let na = &pod_spec(&docs, "ifma-preferred")["affinity"]["nodeAffinity"];
    assert!(
        na["requiredDuringSchedulingIgnoredDuringExecution"].is_null(),
        "preferred mode: {na:?}"
    );
    let prefs = na["preferredDuringSchedulingIgnoredDuringExecution"]
        .as_sequence()
        .unwrap_or_else(|| panic!("preferred mode: {na:?}"));
    assert_eq!(prefs.len(), 1);
    let w = prefs[0]["weight"].as_u64().expect("weight");
    assert!((1..=100).contains(&w), "weight {w}");
    assert_eq!(
        match_expressions(&prefs[0]["preference"]["matchExpressions"]),
        seed_expressions()
    );

    for name in ["default", "qat", "cpu4"] {
        let docs = render(&helm, name);
        assert!(
            pod_spec(&docs, name)["affinity"]["nodeAffinity"].is_null(),
            "{name}: no IFMA node affinity unless asked"
        );
    }
    let (ok, _, stderr) = template_raw(&helm, &["--set", "acceleration.ifma.nodeAffinity=always"]);
    assert!(
        !ok && stderr.contains("none, required or preferred"),
        "{stderr}"
    );
}

#[test]
fn qat_values_request_qat_crypto_instances() {
    let _lock = support::shared();
    let Some(helm) = helm() else { return };
    let docs = render(&helm, "qat");
    let c = container(&docs, "qat");
    for side in ["requests", "limits"] {
        assert_eq!(
            text(&c["resources"][side]["qat.intel.com/cy"]),
            "1",
            "qat: {side} carry qat.intel.com/cy: {:?}",
            c["resources"]
        );
    }
    for name in ["default", "ifma-required", "ifma-preferred", "cpu4"] {
        let docs = render(&helm, name);
        let c = container(&docs, name);
        assert!(
            c["resources"]["limits"]["qat.intel.com/cy"].is_null()
                && c["resources"]["requests"]["qat.intel.com/cy"].is_null(),
            "{name}: no QAT unless asked"
        );
    }
}

/// A Secret volume as the kubelet lays it out: the files in a timestamped directory, `..data` a
/// symlink to it, and `tls.crt`/`tls.key` symlinks through `..data`; files mode 0400.
fn secret_volume(dir: &Path, cert: &str) {
    std::fs::create_dir_all(dir).expect("secret dir");
    for name in ["tls.crt", "tls.key"] {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).expect("symlink");
        }
    }
    update_secret_volume(dir, cert, "..2026_01_01_00_00_00.000000001");
}

/// The kubelet's atomic update: a new timestamped directory, then `..data` renamed over.
fn update_secret_volume(dir: &Path, cert: &str, stamp: &str) {
    use std::os::unix::fs::PermissionsExt;
    let data = dir.join(stamp);
    std::fs::create_dir_all(&data).expect("data dir");
    for (name, src) in [
        ("tls.crt", format!("{cert}.cert.pem")),
        ("tls.key", format!("{cert}.key.pem")),
    ] {
        let to = data.join(name);
        std::fs::copy(support::certs_dir().join(src), &to).expect("copy");
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o400)).expect("chmod");
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(stamp, &tmp).expect("symlink ..data_tmp");
    std::fs::rename(&tmp, dir.join("..data")).expect("swap ..data");
}

/// The rendered bootstrap made runnable here: the certificate mount moved to `certs` (a
/// `secret_volume`), the listener and admin ports to the given ones. Fails on a file outside the
/// mount.
fn localize(cfg: &Value, certs: &Path, listener: u16, admin: u16) -> Value {
    fn moved(path: &str, certs: &Path) -> Value {
        let rest = path
            .strip_prefix(CERT_MOUNT)
            .unwrap_or_else(|| panic!("unexpected file in the config: {path}"));
        Value::String(format!("{}{rest}", certs.display()))
    }
    fn walk(v: &mut Value, certs: &Path, listener: u16, admin: u16, in_admin: bool) {
        match v {
            Value::Mapping(m) => {
                for (k, val) in m.iter_mut() {
                    let key = k.as_str().unwrap_or("");
                    if key == "port_value" {
                        let port = if in_admin { admin } else { listener };
                        *val = Value::Number(port.into());
                    } else if key == "filename" {
                        *val = moved(val.as_str().expect("filename is a string"), certs);
                    } else if key == "watched_directory" {
                        let p = val["path"].as_str().expect("watched_directory.path");
                        val["path"] = moved(p, certs);
                    } else {
                        walk(val, certs, listener, admin, in_admin || key == "admin");
                    }
                }
            }
            Value::Sequence(s) => {
                for x in s {
                    walk(x, certs, listener, admin, in_admin);
                }
            }
            _ => {}
        }
    }
    let mut out = cfg.clone();
    walk(&mut out, certs, listener, admin, false);
    out
}

fn provider_name(cfg: &Value) -> Option<String> {
    let cert = &cfg["static_resources"]["listeners"][0]["filter_chains"][0]["transport_socket"]
        ["typed_config"]["common_tls_context"]["tls_certificates"][0];
    cert["private_key_provider"]["provider_name"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn rendered_configs_pass_quickshake_validate() {
    let _lock = support::shared();
    let Some(helm) = helm() else { return };
    for (name, provider) in [
        ("default", Some("quickshake.batching")),
        ("ifma-required", Some("cryptomb")),
        ("ifma-preferred", Some("quickshake.batching")),
        ("qat", Some("quickshake.batching")),
        ("cpu4", None),
    ] {
        let docs = render(&helm, name);
        let (_, cfg) = bootstrap(&docs, name);
        assert_eq!(provider_name(&cfg).as_deref(), provider, "{name}: provider");
        let dir = tempfile::tempdir().expect("tempdir");
        let certs = dir.path().join("certs");
        secret_volume(&certs, "rsa2048");
        let path = dir.path().join("config.yaml");
        let local = localize(&cfg, &certs, support::free_port(), support::free_port());
        std::fs::write(&path, serde_yaml::to_string(&local).expect("yaml")).expect("write");
        let out = Command::new(support::binary())
            .args(["--mode", "validate", "-c"])
            .arg(&path)
            .output()
            .expect("run quickshake --mode validate");
        assert!(
            out.status.success(),
            "{name}: quickshake --mode validate rejected the chart's config:\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            serde_yaml::to_string(&local).unwrap_or_default()
        );
    }
    // The provider fields reach the config.
    let docs = render(&helm, "ifma-preferred");
    let (raw, _) = bootstrap(&docs, "ifma-preferred");
    for want in ["engine: auto", "batching: timer", "poll_delay: 0.002s"] {
        assert!(raw.contains(want), "ifma-preferred: {want}:\n{raw}");
    }
    let docs = render(&helm, "ifma-required");
    let (raw, _) = bootstrap(&docs, "ifma-required");
    for want in [
        "poll_delay: 0.001s",
        "fallback: true",
        "CryptoMbPrivateKeyMethodConfig",
    ] {
        assert!(raw.contains(want), "ifma-required: {want}:\n{raw}");
    }
}

fn curl_status(args: &[&str]) -> String {
    let mut all = vec!["-o", "/dev/null", "-w", "%{http_code}"];
    all.extend_from_slice(args);
    String::from_utf8_lossy(&support::curl(&all).stdout).to_string()
}

#[test]
fn default_config_serves_https_rotates_the_secret_and_exports_provider_stats() {
    let _lock = support::shared();
    let Some(helm) = helm() else { return };
    let docs = render(&helm, "default");
    let (_, cfg) = bootstrap(&docs, "default");
    assert!(
        !cfg["static_resources"]["listeners"][0]["filter_chains"][0]["transport_socket"]
            ["typed_config"]["common_tls_context"]["tls_certificates"][0]["watched_directory"]
            .is_null(),
        "the default config watches the Secret mount"
    );
    let secret = tempfile::tempdir().expect("tempdir");
    let certs = secret.path().join("certs");
    secret_volume(&certs, "rsa2048");
    // Sentinel ports, swapped for the harness's `{{PORT}}`/`{{ADMIN}}` placeholders.
    let local = serde_yaml::to_string(&localize(&cfg, &certs, 61111, 62222)).expect("yaml");
    let template = local
        .replace("61111", "{{PORT}}")
        .replace("62222", "{{ADMIN}}");
    let c = container(&docs, "default");
    let a = args(&c);
    let concurrency = arg_after(&a, "--concurrency").expect("--concurrency");
    let gw = support::Gateway::start_with_env(
        &template,
        &["--concurrency", &concurrency],
        &[("QUICKSHAKE_RELOAD_INTERVAL_MS", "100")],
    );
    let out = support::curl(&["--cacert", &support::cert("rsa2048.cert.pem"), &gw.url("/")]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("hello from quickshake"),
        "curl: {}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        gw.log_text()
    );
    // What the probes and the scrape ask for.
    let (code, body) = gw.admin_get("/ready");
    assert_eq!((code, body.trim()), (200, "LIVE"));
    let (code, _) = gw.admin_get("/server_info");
    assert_eq!(code, 200, "liveness path");
    let (code, prom) = gw.admin_get("/stats/prometheus");
    assert_eq!(code, 200);
    assert!(
        prom.contains("envoy_listener_cryptomb_rsa_sign{envoy_listener_address=\"0.0.0.0_"),
        "the provider's stats under the listener:\n{prom}"
    );
    assert!(
        prom.contains(&format!("envoy_server_concurrency{{}} {concurrency}")),
        "workers = --concurrency:\n{prom}"
    );

    // The kubelet updates the Secret: the new certificate is served without a restart.
    update_secret_volume(&certs, "other", "..2026_01_02_00_00_00.000000002");
    let other = format!("other.test:{}:127.0.0.1", gw.port);
    let url = format!("https://other.test:{}/", gw.port);
    let other_ca = support::cert("other.cert.pem");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let status = curl_status(&["--resolve", &other, "--cacert", &other_ca, &url]);
        if status == "200" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the rotated certificate was not served within 10 s (last status {status}):\n{}",
            gw.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_ne!(
        curl_status(&["--cacert", &support::cert("rsa2048.cert.pem"), &gw.url("/")]),
        "200",
        "the old certificate is no longer served"
    );
}

#[test]
fn config_value_replaces_the_generated_bootstrap() {
    let _lock = support::shared();
    let Some(helm) = helm() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let own = dir.path().join("own.yaml");
    std::fs::write(
        &own,
        "# mine\nadmin:\n  address: { socket_address: { address: 0.0.0.0, port_value: {{ .Values.admin.port }} } }\n",
    )
    .expect("write");
    let docs = render_args(&helm, &["--set-file", &format!("config={}", own.display())]);
    let (raw, cfg) = bootstrap(&docs, "config value");
    assert!(raw.starts_with("# mine"), "used as written:\n{raw}");
    assert_eq!(
        cfg["admin"]["address"]["socket_address"]["port_value"].as_u64(),
        Some(9901),
        "passed through tpl:\n{raw}"
    );
}
