//! `/listeners`, `/logging`, `/runtime`, `/runtime_modify` through [`crate::handle`].

use std::collections::BTreeMap;
use std::sync::Mutex;

use hyper::Method;
use quickshake_stats::Store;
use serde_json::json;

use crate::{handle, AdminState, ListenerInfo, LogControl, LogLevel, RuntimeLayer, UnknownLogger};

struct Levels(Mutex<Vec<(String, LogLevel)>>);

impl LogControl for Levels {
    fn loggers(&self) -> Vec<(String, LogLevel)> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
    fn set_all(&self, level: LogLevel) {
        if let Ok(mut l) = self.0.lock() {
            l.iter_mut().for_each(|e| e.1 = level);
        }
    }
    fn set(&self, changes: &[(String, LogLevel)]) -> Result<(), UnknownLogger> {
        let mut l = self.0.lock().map_err(|_| UnknownLogger)?;
        if changes.iter().any(|(n, _)| !l.iter().any(|(m, _)| m == n)) {
            return Err(UnknownLogger);
        }
        for (n, v) in changes {
            l.iter_mut().filter(|(m, _)| m == n).for_each(|e| e.1 = *v);
        }
        Ok(())
    }
}

struct Ops {
    store: Store,
    levels: Levels,
    admin_layer: bool,
}

impl AdminState for Ops {
    fn stats(&self) -> &Store {
        &self.store
    }
    fn server_info(&self) -> serde_json::Value {
        json!({})
    }
    fn certs(&self) -> serde_json::Value {
        json!({})
    }
    fn config_dump(&self) -> serde_json::Value {
        json!({})
    }
    fn is_live(&self) -> bool {
        true
    }
    fn set_health_check_failed(&self, _: bool) {}
    fn quit(&self) {}
    fn listeners(&self) -> Vec<ListenerInfo> {
        vec![
            ListenerInfo {
                name: "a".into(),
                addresses: vec!["127.0.0.1:8443".parse().unwrap_or_else(|_| unreachable!())],
            },
            ListenerInfo {
                name: "b".into(),
                addresses: vec![
                    "[::1]:80".parse().unwrap_or_else(|_| unreachable!()),
                    "10.0.0.1:80".parse().unwrap_or_else(|_| unreachable!()),
                ],
            },
        ]
    }
    fn log_control(&self) -> Option<&dyn LogControl> {
        Some(&self.levels)
    }
    fn runtime_layers(&self) -> Vec<RuntimeLayer> {
        let mut first = BTreeMap::new();
        first.insert("k".to_owned(), "1".to_owned());
        first.insert("only.first".to_owned(), "x".to_owned());
        let mut second = BTreeMap::new();
        second.insert("k".to_owned(), "2".to_owned());
        let mut layers = vec![
            RuntimeLayer {
                name: "base".into(),
                admin: false,
                values: first,
            },
            RuntimeLayer {
                name: "more".into(),
                admin: false,
                values: second,
            },
        ];
        if self.admin_layer {
            layers.push(RuntimeLayer {
                name: "admin".into(),
                admin: true,
                values: BTreeMap::new(),
            });
        }
        layers
    }
}

fn ops() -> Ops {
    Ops {
        store: Store::new(),
        levels: Levels(Mutex::new(vec![
            ("admin".into(), LogLevel::Info),
            ("upstream".into(), LogLevel::Info),
        ])),
        admin_layer: false,
    }
}

#[test]
fn listeners_text_and_json() -> Result<(), serde_json::Error> {
    let s = ops();
    let r = handle(&s, &Method::GET, "/listeners");
    assert_eq!(r.body, "a::127.0.0.1:8443\nb::[::1]:80\nb::10.0.0.1:80\n");
    let r = handle(&s, &Method::GET, "/listeners?format=json");
    let v: serde_json::Value = serde_json::from_str(&r.body)?;
    let sa = |a: &str, p: u16| json!({"socket_address": {"address": a, "port_value": p}});
    assert_eq!(
        v,
        json!({"listener_statuses": [
            {"name": "a", "local_address": sa("127.0.0.1", 8443)},
            {"name": "b", "local_address": sa("::1", 80),
             "additional_local_addresses": [sa("10.0.0.1", 80)]},
        ]})
    );
    Ok(())
}

#[test]
fn logging_lists_and_changes_levels() {
    let s = ops();
    assert_eq!(handle(&s, &Method::GET, "/logging").status, 405);
    let r = handle(&s, &Method::POST, "/logging");
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "active loggers:\n  admin: info\n  upstream: info\n\n")
    );
    let r = handle(&s, &Method::POST, "/logging?upstream=debug");
    assert!(
        r.body.ends_with("  admin: info\n  upstream: debug\n\n"),
        "{}",
        r.body
    );
    let r = handle(&s, &Method::POST, "/logging?paths=admin:trace,upstream:off");
    assert!(
        r.body.ends_with("  admin: trace\n  upstream: off\n\n"),
        "{}",
        r.body
    );
    let r = handle(&s, &Method::POST, "/logging?level=warning");
    assert!(
        r.body
            .ends_with("  admin: warning\n  upstream: warning\n\n"),
        "{}",
        r.body
    );
    // Empty values are dropped, as Envoy's query parsing does.
    assert_eq!(handle(&s, &Method::POST, "/logging?level=").status, 200);
    for (query, error) in [
        ("level=warn", "unknown logger level"),
        ("nope=info", "unknown logger name"),
        ("paths=admin:info,nope:info", "unknown logger name"),
        ("paths=admin", "empty logger name or empty logger level"),
        ("a=info&b=info", "invalid number of parameters"),
    ] {
        let r = handle(&s, &Method::POST, &format!("/logging?{query}"));
        assert_eq!(r.status, 400, "{query}");
        assert!(
            r.body.starts_with(&format!("error: {error}\n\nusage: ")),
            "{}",
            r.body
        );
        assert!(
            r.body
                .ends_with("  admin: warning\n  upstream: warning\n\n"),
            "{}",
            r.body
        );
    }
}

#[test]
fn runtime_layers_and_modify() -> Result<(), serde_json::Error> {
    let mut s = ops();
    let v: serde_json::Value = serde_json::from_str(&handle(&s, &Method::GET, "/runtime").body)?;
    assert_eq!(
        v,
        json!({"layers": ["base", "more"], "entries": {
            "k": {"layer_values": ["1", "2"], "final_value": "2"},
            "only.first": {"layer_values": ["x", ""], "final_value": "x"},
        }})
    );
    let r = handle(&s, &Method::POST, "/runtime_modify?k=3");
    assert_eq!(
        (r.status, r.body.as_str()),
        (503, "No admin layer specified")
    );
    assert_eq!(handle(&s, &Method::POST, "/runtime_modify").status, 400);
    assert_eq!(handle(&s, &Method::GET, "/runtime_modify?k=3").status, 405);
    s.admin_layer = true;
    let r = handle(&s, &Method::POST, "/runtime_modify?k=3");
    assert_eq!(r.status, 503);
    assert!(r.body.contains("not supported"), "{}", r.body);
    let help = handle(&s, &Method::GET, "/help").body;
    assert!(help.contains("\n  /logging (POST): query/change logging levels\n"));
    assert!(help.contains("\n  /listeners: print listener info\n      format: "));
    Ok(())
}
