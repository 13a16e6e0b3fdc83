//! `quickshake doctor`: what this machine offers for handshake acceleration, and with `-c`,
//! which engine each provider-held key gets and why. Text for people, `--json` for scripts.

use std::path::Path;
use std::process::ExitCode;

use quickshake_keyprovider::engine::crypto_mb;
use quickshake_keyprovider::engines::{cpu_info, qat_functions, QatFunction};
use quickshake_keyprovider::{Engines, ProviderOptions, Providers};
use quickshake_stats::Store;
use serde_json::{json, Value};

/// CPU flags that matter for multi-buffer RSA/ECDSA, as /proc/cpuinfo names them.
const FLAGS: [&str; 10] = [
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512ifma",
    "avx512_vbmi2",
    "avx_ifma",
    "vaes",
    "avx2",
    "adx",
    "bmi2",
];

/// The configuration doctor checks: `-c` and/or `--config-yaml`, as the gateway loads them.
#[derive(Clone, Copy)]
pub struct ConfigArgs<'a> {
    pub path: Option<&'a Path>,
    pub yaml: Option<&'a str>,
}

pub fn run(
    config: ConfigArgs<'_>,
    json_out: bool,
    concurrency: usize,
    options: ProviderOptions,
) -> ExitCode {
    let report = build(config, concurrency, options);
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print_text(&report);
    }
    ExitCode::SUCCESS
}

fn build(config: ConfigArgs<'_>, concurrency: usize, options: ProviderOptions) -> Value {
    let (model, flags) = cpu();
    let probe = crypto_mb::probe(&options.engines);
    let cpus_online = cpu_info().processors;
    let store = Store::new();
    // PKCS#11 tokens: measure signatures per second while their keys are checked.
    let options = ProviderOptions {
        measure_tokens: true,
        ..options
    };
    let providers = Providers::new(store.clone(), options);
    let cpuset = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut report = json!({
        "cpu": { "model": model, "flags": flags },
        "crypto_mb": {
            "from": probe.source.to_string(),
            "installed": probe.installed.as_ref().map(|p| p.display().to_string()),
            "loaded": probe.loaded,
            "applicable": probe.applicable,
            "version": probe.version,
            "usable": probe.reason.is_none(),
            "why": probe.reason,
        },
        "engines": engines(providers.engines()),
        "qat": qat(providers.engines()),
        "workers": { "concurrency": concurrency, "cpuset": cpuset, "cpus_online": cpus_online,
            "note": if concurrency > cpuset { "more workers than CPUs this process may run on" } else { "ok" } },
    });
    let given = config.path.is_some() || config.yaml.is_some();
    if let (true, Some(obj)) = (given, report.as_object_mut()) {
        obj.insert("config".into(), config_report(config, &store, &providers));
    }
    report
}

/// Every accelerated engine this build knows, in the order `engine: auto` and `cryptomb` try
/// them on this CPU (the committed ranking), and whether each is usable here.
fn engines(engines: &Engines) -> Value {
    let list: Vec<Value> = engines
        .accelerated()
        .iter()
        .map(|s| match &s.engine {
            Ok(e) => {
                let c = e.capabilities();
                json!({ "name": s.name, "usable": true, "lanes": c.lanes, "rsa_bits": c.rsa_bits,
                        "ecdsa_p256": c.ecdsa_p256, "rsa_min_batch": c.rsa_min_batch,
                        "x25519": c.x25519_min_batch != usize::MAX })
            }
            Err(why) => json!({ "name": s.name, "usable": false, "why": why.to_string() }),
        })
        .collect();
    json!({
        "auto_order": quickshake_keyprovider::engines::ranking(),
        "ranking_source": "committed table keyed by CPU features (crates/keyprovider/src/engines.rs), from bench/engine runs",
        "vendor": cpu_info().vendor,
        "accelerated": list,
    })
}

fn cpu() -> (String, Value) {
    let info = cpu_info();
    let flags = FLAGS
        .iter()
        .map(|f| (f.to_string(), json!(info.has(f))))
        .collect();
    (info.model.clone(), Value::Object(flags))
}

fn qat(engines: &Engines) -> Value {
    let functions = qat_functions();
    let entry =
        |f: &QatFunction| json!({ "address": f.address, "device": f.device, "driver": f.driver });
    json!({
        "physical_functions": functions.iter().filter(|f| !f.virtual_function).map(entry).collect::<Vec<_>>(),
        "virtual_functions": functions.iter().filter(|f| f.virtual_function).map(entry).collect::<Vec<_>>(),
        "dev_vfio": Path::new("/dev/vfio").exists(),
        "usable": false,
        "why": engines.qat_status(),
    })
}

fn config_report(config: ConfigArgs<'_>, store: &Store, providers: &Providers) -> Value {
    let path = match (config.path, config.yaml) {
        (Some(p), None) => p.display().to_string(),
        (Some(p), Some(_)) => format!("{} + --config-yaml", p.display()),
        (None, _) => "--config-yaml".to_owned(),
    };
    let cfg = match quickshake_config::load(config.path, config.yaml) {
        Ok(c) => c,
        Err(e) => return json!({ "path": path, "error": e.to_string() }),
    };
    let result = quickshake_control::clusters::cluster_manager(&cfg.clusters, store)
        .and_then(|clusters| quickshake_server::build_listeners(&cfg, store, providers, &clusters));
    json!({
        "path": path,
        "starts": result.is_ok(),
        "error": result.err().map(|e| e.to_string()),
        "keys": providers.reports().iter().map(|r| r.to_json()).collect::<Vec<_>>(),
    })
}

fn print_text(r: &Value) {
    println!("CPU: {}", r["cpu"]["model"].as_str().unwrap_or("?"));
    if let Some(flags) = r["cpu"]["flags"].as_object() {
        let line: Vec<String> = flags
            .iter()
            .map(|(k, v)| format!("{k}{}", if v.as_bool() == Some(true) { "+" } else { "-" }))
            .collect();
        println!("  flags: {}", line.join(" "));
    }
    let cmb = &r["crypto_mb"];
    println!(
        "crypto_mb: {} (from: {}, installed: {}, loaded: {}, applicable: {}{})",
        if cmb["usable"].as_bool() == Some(true) {
            "usable"
        } else {
            "not usable"
        },
        cmb["from"].as_str().unwrap_or("?"),
        cmb["installed"].as_str().unwrap_or("no"),
        cmb["loaded"],
        cmb["applicable"],
        cmb["version"]
            .as_str()
            .map(|v| format!(", version {v}"))
            .unwrap_or_default()
    );
    if let Some(why) = cmb["why"].as_str() {
        println!("  why: {why}");
    }
    let order: Vec<&str> = r["engines"]["auto_order"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let shown = if order.is_empty() {
        "none: no engine measured faster than BoringSSL on this CPU".to_string()
    } else {
        order.join(" > ")
    };
    println!("engines (auto order on this CPU: {shown}):");
    for e in r["engines"]["accelerated"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().unwrap_or("?");
        let ranked = if order.contains(&name) {
            ""
        } else {
            "; not picked by auto on this CPU"
        };
        match e["usable"].as_bool() {
            Some(true) => println!(
                "  {name}: usable (min batch {}{}{ranked})",
                e["rsa_min_batch"],
                if e["x25519"].as_bool() == Some(true) {
                    "; batches the X25519 key exchange"
                } else {
                    ""
                }
            ),
            _ => println!(
                "  {}: not usable: {}",
                e["name"].as_str().unwrap_or("?"),
                e["why"].as_str().unwrap_or("")
            ),
        }
    }
    println!("QAT: {}", r["qat"]["why"].as_str().unwrap_or("?"));
    let w = &r["workers"];
    println!(
        "workers: {} (CPUs this process may run on: {}, online: {}) {}",
        w["concurrency"],
        w["cpuset"],
        w["cpus_online"],
        w["note"].as_str().unwrap_or("")
    );
    let Some(cfg) = r.get("config") else { return };
    println!("config {}:", cfg["path"].as_str().unwrap_or("?"));
    if let Some(err) = cfg["error"].as_str() {
        println!("  does not start: {err}");
    }
    for k in cfg["keys"].as_array().into_iter().flatten() {
        let engine = k["engine"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| "none: key in-process (fallback)".into());
        println!(
            "  {}: provider {} -> engine {engine}",
            k["field"].as_str().unwrap_or("?"),
            k["provider_name"]
        );
        println!("    why: {}", k["why"].as_str().unwrap_or(""));
        if let Some(t) = k.get("pkcs11").filter(|t| !t.is_null()) {
            println!(
                "    pkcs11: {} key, {}",
                t["key_type"].as_str().unwrap_or("?"),
                match t["signatures_per_s"].as_f64() {
                    Some(r) => format!("{r:.0} signatures/s measured on one session"),
                    None => "signatures/s not measured".into(),
                }
            );
        }
    }
}
