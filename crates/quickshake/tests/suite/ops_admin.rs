//! The operations endpoints `/listeners`, `/logging`, `/runtime` and `/runtime_modify`, side by
//! side with Envoy 1.39.3 on one bootstrap (two listeners, a `layered_runtime` static layer):
//! same status codes, same bodies where quickshake has the same state, and a `/logging` change
//! that takes effect in quickshake's log at once.

use serde_json::{json, Value};

use crate::support::envoy::Envoy;
use crate::support::{self, curl, free_port, render, Gateway};

/// The bootstrap both run: two plaintext listeners answering 200, a static runtime layer.
fn bootstrap() -> String {
    let listener = |name: &str, port: &str| {
        format!(
            "  - name: {name}\n    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}\n    filter_chains:\n    - filters:\n{}",
            support::direct_response_hcm("ops", "{ status: 200 }", "")
        )
    };
    format!(
        r#"
layered_runtime:
  layers:
  - name: static
    static_layer:
      overload: {{ global_downstream_max_connections: 5000 }}
      re2.max_program_size.error_level: 1000
static_resources:
  listeners:
{}{}admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{ADMIN}}}} }} }}
"#,
        listener("one", "{{PORT}}"),
        listener("two", "{{PORT2}}")
    )
}

/// One admin request through curl (Envoy answers chunked): status and body.
pub(crate) fn call(admin: u16, method: &str, path: &str) -> (u16, String) {
    let url = format!("http://127.0.0.1:{admin}{path}");
    let out = curl(&["-X", method, "-w", "\n%{http_code}", &url]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
    (code.parse().unwrap_or(0), body.to_owned())
}

/// `/logging`'s `active loggers:` list as (name, level).
fn loggers(body: &str) -> Vec<(String, String)> {
    let list = body.split_once("active loggers:\n").map_or("", |(_, l)| l);
    list.lines()
        .filter_map(|l| l.trim().split_once(": "))
        .map(|(n, l)| (n.to_owned(), l.to_owned()))
        .collect()
}

#[test]
fn listeners_logging_runtime_match_envoy() {
    let _lock = support::shared();
    let gw = Gateway::start(&bootstrap(), &["--concurrency", "1"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, port2, admin) = (free_port(), free_port(), free_port());
    let envoy = Envoy::start(&render(&bootstrap(), port, port2, admin, dir.path()), admin);
    let sides = [
        ("quickshake", gw.admin, gw.port, gw.port2),
        ("envoy", envoy.admin, port, port2),
    ];

    // /listeners: text and JSON, field by field.
    for (who, admin, p1, p2) in sides {
        let (code, text) = call(admin, "GET", "/listeners");
        assert_eq!(code, 200, "{who}: {text}");
        assert_eq!(
            text,
            format!("one::127.0.0.1:{p1}\ntwo::127.0.0.1:{p2}\n"),
            "{who}"
        );
        let (code, body) = call(admin, "GET", "/listeners?format=json");
        assert_eq!(code, 200, "{who}: {body}");
        let v: Value = serde_json::from_str(&body).expect("listeners JSON");
        let status = |name: &str, port: u16| {
            json!({"name": name, "local_address":
                {"socket_address": {"address": "127.0.0.1", "port_value": port}}})
        };
        assert_eq!(
            v,
            json!({"listener_statuses": [status("one", p1), status("two", p2)]}),
            "{who}"
        );
    }

    // /logging: POST only (a GET changes nothing); the list's shape; quickshake's loggers are
    // Envoy's names.
    let mut lists = Vec::new();
    for (who, admin, ..) in sides {
        for path in ["/logging", "/logging?level=debug"] {
            let (code, body) = call(admin, "GET", path);
            assert_eq!(code, 405, "{who} GET {path}: {body}");
            assert_eq!(body, "Method GET not allowed, POST required.", "{who}");
        }
        let (code, body) = call(admin, "POST", "/logging");
        assert_eq!(code, 200, "{who}: {body}");
        assert!(body.starts_with("active loggers:\n  "), "{who}: {body}");
        assert!(body.ends_with(": info\n\n"), "{who}: {body}");
        let list = loggers(&body);
        assert!(
            list.iter().any(|(n, l)| n == "admin" && l == "info"),
            "{who}: {body}"
        );
        lists.push(list);
    }
    for (name, _) in &lists[0] {
        assert!(
            lists[1].iter().any(|(n, _)| n == name),
            "quickshake's logger {name} is not one of Envoy's"
        );
    }

    // Refusals: the same status and message.
    for (query, message) in [
        ("level=loud", "error: unknown logger level\n\n"),
        ("level=DEBUG", "error: unknown logger level\n\n"),
        ("nope=debug", "error: unknown logger name\n\n"),
        (
            "admin=debug&level=info",
            "error: invalid number of parameters\n\n",
        ),
        (
            "paths=admin",
            "error: empty logger name or empty logger level\n\n",
        ),
    ] {
        for (who, admin, ..) in sides {
            let (code, body) = call(admin, "POST", &format!("/logging?{query}"));
            assert_eq!(code, 400, "{who} {query}: {body}");
            assert!(body.starts_with(message), "{who} {query}: {body}");
            assert!(
                body.contains("\nlevels: trace debug info warning error critical off \n"),
                "{who}: {body}"
            );
            assert!(!body.contains("\n  admin: debug\n"), "{who}: {body}");
        }
    }

    // One logger, several, then all; quickshake's log shows debug lines only while asked.
    for (who, admin, ..) in sides {
        let (code, body) = call(admin, "POST", "/logging?admin=trace");
        assert_eq!(code, 200, "{who}: {body}");
        assert!(body.contains("\n  admin: trace\n"), "{who}: {body}");
        let (_, body) = call(admin, "POST", "/logging?paths=admin:warning,upstream:error");
        assert!(body.contains("\n  admin: warning\n"), "{who}: {body}");
        assert!(body.contains("\n  upstream: error\n"), "{who}: {body}");
        let (code, body) = call(admin, "POST", "/logging?level=info");
        assert_eq!(code, 200, "{who}: {body}");
    }
    let admin_debug_lines = || gw.log_text().matches("admin request").count();
    let seen = admin_debug_lines();
    call(gw.admin, "GET", "/listeners");
    assert_eq!(admin_debug_lines(), seen, "at info: no debug lines");
    for (who, admin, ..) in sides {
        let (code, body) = call(admin, "POST", "/logging?level=debug");
        assert_eq!(code, 200, "{who}: {body}");
        let list = loggers(&body);
        assert!(
            !list.is_empty() && list.iter().all(|(_, l)| l == "debug"),
            "{who}: {body}"
        );
    }
    call(gw.admin, "GET", "/listeners");
    support::eventually("a debug line in quickshake's log", || {
        admin_debug_lines() > seen
    });
    assert!(gw
        .log_text()
        .contains("change all log levels: level='debug'"));
    call(gw.admin, "POST", "/logging?level=info");
    let seen = admin_debug_lines();
    call(gw.admin, "GET", "/listeners");
    assert_eq!(admin_debug_lines(), seen, "back at info: no debug lines");

    // /runtime: the same layers, and the same entry for each key quickshake reads (keys it does
    // not read are Envoy's alone).
    let runtime = |admin| {
        let (code, body) = call(admin, "GET", "/runtime");
        assert_eq!(code, 200, "{body}");
        serde_json::from_str::<Value>(&body).expect("runtime JSON")
    };
    let (ours, theirs) = (runtime(gw.admin), runtime(envoy.admin));
    assert_eq!(ours["layers"], json!(["static"]), "{ours}");
    assert_eq!(ours["layers"], theirs["layers"]);
    let key = "overload.global_downstream_max_connections";
    assert_eq!(
        ours["entries"][key],
        json!({"layer_values": ["5000"], "final_value": "5000"}),
        "{ours}"
    );
    let entries = ours["entries"].as_object().expect("entries");
    for (k, v) in entries {
        assert_eq!(v, &theirs["entries"][k], "{k}: {theirs}");
    }
    assert!(theirs["entries"]["re2.max_program_size.error_level"].is_object());
    assert!(ours["entries"]["re2.max_program_size.error_level"].is_null());

    // /runtime_modify with no admin layer, and /help lines, as Envoy's.
    let (_, ours_help) = call(gw.admin, "GET", "/help");
    let (_, theirs_help) = call(envoy.admin, "GET", "/help");
    for (who, admin, ..) in sides {
        assert_eq!(
            call(admin, "POST", "/runtime_modify?a=b"),
            (503, "No admin layer specified".to_owned()),
            "{who}"
        );
        let (code, body) = call(admin, "POST", "/runtime_modify");
        assert_eq!(code, 400, "{who}");
        assert!(
            body.starts_with("usage: /runtime_modify?key1=value1"),
            "{who}: {body}"
        );
        assert_eq!(call(admin, "GET", "/runtime_modify?a=b").0, 405, "{who}");
    }
    for line in ours_help.lines().filter(|l| {
        ["/listeners", "/logging", "/runtime"]
            .iter()
            .any(|p| l.starts_with(&format!("  {p}")))
    }) {
        assert!(
            theirs_help.contains(&format!("{line}\n")),
            "{line}\n{theirs_help}"
        );
    }
    assert_eq!(
        ours_help
            .lines()
            .filter(|l| l.starts_with("  /runtime"))
            .count(),
        2
    );
}
