//! Loader tests: the seed config, every supported feature, shorthand shapes, data sources,
//! the connection limit and redaction in the config dump.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use quickshake_config::*;
use serde_json::{json, Value};

mod common;
use common::*;

#[test]
fn seed_config_parses() {
    let b = load_file(&fixture("seed.yaml")).unwrap();
    assert_eq!(b.listeners.len(), 1);
    let l = &b.listeners[0];
    assert_eq!(l.name, "listener_0");
    assert_eq!(l.path, "static_resources.listeners[0]");
    assert_eq!(l.address, "0.0.0.0:9000".parse::<SocketAddr>().unwrap());
    assert_eq!(l.filter_chains.len(), 1);
    let fc = &l.filter_chains[0];
    assert_eq!(fc.path, "static_resources.listeners[0].filter_chains[0]");
    assert!(fc.server_names.is_empty());
    let tls = fc.tls.as_ref().unwrap();
    assert_eq!(
        tls.path,
        "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config"
    );
    assert_eq!(tls.certificates.len(), 1);
    let cert = &tls.certificates[0];
    assert_eq!(
        cert.path,
        "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.common_tls_context.tls_certificates[0]"
    );
    assert_eq!(
        cert.certificate_chain,
        DataSource::Filename("/etc/ssl/cert.pem".into())
    );
    assert!(cert.private_key.is_none());
    let p = cert.private_key_provider.as_ref().unwrap();
    assert_eq!(p.path, format!("{}.private_key_provider", cert.path));
    assert_eq!(p.provider_name, "cryptomb");
    assert_eq!(
        p.type_url,
        "type.googleapis.com/envoy.extensions.private_key_providers.cryptomb.v3alpha.CryptoMbPrivateKeyMethodConfig"
    );
    assert!(!p.fallback);
    assert_eq!(p.typed_config.get("poll_delay"), Some(&json!("0.01s")));
    assert_eq!(
        p.typed_config.get("private_key"),
        Some(&json!({"filename": "/etc/ssl/key.pem"}))
    );
    assert!(!p.typed_config.contains_key("@type"));
    let poll = parse_duration(&p.typed_config["poll_delay"], "x").unwrap();
    assert_eq!(poll, Duration::from_millis(10));

    let h = fc.http().unwrap();
    assert_eq!(
        h.path,
        "static_resources.listeners[0].filter_chains[0].filters[0].typed_config"
    );
    assert_eq!(h.stat_prefix, "ingress_http");
    assert_eq!(h.codec_type, CodecType::Auto);
    assert_eq!(h.max_request_headers_kb, 60);
    assert_eq!(h.idle_timeout, None);
    assert!(h.access_logs.is_empty());
    assert_eq!(h.virtual_hosts().len(), 1);
    assert_eq!(h.virtual_hosts()[0].name, "backend");
    assert_eq!(h.virtual_hosts()[0].domains, vec!["*"]);
    let r = &h.virtual_hosts()[0].routes[0];
    assert_eq!(r.matcher, RouteMatch::Prefix("/".into()));
    assert!(matches!(
        r.action,
        RouteAction::DirectResponse {
            status: 200,
            body: None
        }
    ));
    assert_eq!(
        b.admin.as_ref().unwrap().address,
        "0.0.0.0:9001".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(b.global_downstream_max_connections, None);
}

#[test]
fn seed_as_json_file_loads_too() {
    let dir = std::env::temp_dir().join(format!("qs-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("seed.json");
    std::fs::write(&path, fixture_json("seed.yaml").to_string()).unwrap();
    let b = load_file(&path).unwrap();
    assert_eq!(b.listeners[0].address.port(), 9000);
    std::fs::write(&path, "{ nope").unwrap();
    let e = load_file(&path).unwrap_err();
    assert!(e.path().is_none());
    assert!(e.to_string().contains("invalid JSON"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
    let e = load_file(Path::new("/nonexistent/quickshake.yaml")).unwrap_err();
    assert!(e
        .to_string()
        .starts_with("cannot read config file /nonexistent/quickshake.yaml"));
}

#[test]
fn full_config_parses() {
    let b = load_file(&fixture("full.yaml")).unwrap();
    assert_eq!(b.global_downstream_max_connections, Some(50000));
    assert_eq!(
        b.admin.unwrap().address,
        "127.0.0.1:9901".parse::<SocketAddr>().unwrap()
    );
    let l = &b.listeners[0];
    assert_eq!(l.name, "https");
    assert_eq!(l.address, "[::]:8443".parse::<SocketAddr>().unwrap());
    assert_eq!(l.per_connection_buffer_limit_bytes, Some(32768));
    let fc = &l.filter_chains[0];
    assert_eq!(fc.server_names, vec!["a.example.com", "*.a.example.com"]);
    assert_eq!(
        fc.transport_socket_connect_timeout,
        Some(Duration::from_secs(5))
    );
    let tls = fc.tls.as_ref().unwrap();
    assert_eq!(tls.alpn_protocols, vec!["h2", "http/1.1"]);
    assert_eq!(tls.params.min_version, Some(TlsVersion::Tls1_2));
    assert_eq!(tls.params.max_version, Some(TlsVersion::Tls1_3));
    assert_eq!(tls.params.cipher_suites.len(), 2);
    assert_eq!(tls.params.ecdh_curves, vec!["X25519", "P-256"]);
    assert!(tls.require_client_certificate);
    assert_eq!(
        tls.trusted_ca,
        Some(DataSource::Filename("/nonexistent/ca.pem".into()))
    );
    assert_eq!(tls.session_ticket_keys.len(), 2);
    assert!(!tls.disable_stateless_session_resumption);
    assert!(tls.disable_stateful_session_resumption);
    assert_eq!(tls.certificates.len(), 2);
    assert_eq!(
        tls.certificates[1].certificate_chain,
        DataSource::InlineBytes(b"-----BEGIN".to_vec())
    );
    assert_eq!(
        tls.certificates[1].private_key,
        Some(DataSource::InlineBytes(b"TOPSECRETECDSA".to_vec()))
    );
    let p = tls.certificates[1].private_key_provider.as_ref().unwrap();
    assert!(p.fallback);
    // Debug output of the model never shows inline key material.
    let dbg = format!("{b:?}", b = load_file(&fixture("full.yaml")).unwrap());
    for secret in ["TOPSECRET", "PROVIDERSECRETKEY", "0123456789"] {
        assert!(!dbg.contains(secret), "{secret} in Debug output");
    }

    let h = fc.http().unwrap();
    assert_eq!(h.codec_type, CodecType::Http2);
    assert_eq!(h.max_request_headers_kb, 96);
    assert_eq!(h.idle_timeout, Some(Duration::from_secs(60)));
    assert_eq!(h.server_name.as_deref(), Some("quickshake"));
    assert_eq!(h.access_logs.len(), 4);
    assert_eq!(
        h.access_logs[0].sink,
        AccessLogSink::File("/tmp/access.log".into())
    );
    let text = |f: &str| LogFormat::Text(parse_format(f).unwrap());
    assert_eq!(h.access_logs[0].format, text("%START_TIME% %PROTOCOL%\n"));
    assert_eq!(h.access_logs[1].sink, AccessLogSink::Stdout);
    assert_eq!(h.access_logs[1].format, text(DEFAULT_ACCESS_LOG_FORMAT));
    assert_eq!(h.access_logs[2].sink, AccessLogSink::Stderr);
    assert_eq!(h.access_logs[3].format, text("legacy %RESPONSE_CODE%\n"));
    assert_eq!(h.virtual_hosts()[0].routes[0].name, "health");
    let routes = &h.virtual_hosts()[0].routes;
    assert_eq!(routes[0].matcher, RouteMatch::Path("/healthz".into()));
    assert!(matches!(
        &routes[1].action,
        RouteAction::DirectResponse { status: 200, body: Some(b) } if b == "hello\n"
    ));

    let plain = &l.filter_chains[1];
    assert!(plain.tls.is_none());
    assert_eq!(plain.http().unwrap().codec_type, CodecType::Http1);
    assert_eq!(plain.http().unwrap().virtual_hosts()[0].domains, vec!["*"]);
    assert_eq!(
        plain.http().unwrap().virtual_hosts()[0].routes[0].action_status(),
        404
    );

    let local = &b.listeners[1];
    assert_eq!(local.name, "listener_1");
    assert_eq!(
        local.address,
        "127.0.0.1:8080".parse::<SocketAddr>().unwrap()
    );
}

trait Status {
    fn action_status(&self) -> u16;
}
impl Status for Route {
    fn action_status(&self) -> u16 {
        match self.action {
            RouteAction::DirectResponse { status, .. } => status,
            _ => panic!("not a direct response"),
        }
    }
}

#[test]
fn seed_shorthands() {
    // A single mapping where a list is expected, and `typed_config: {}` on the router.
    let b = load_file(&fixture("seed.yaml")).unwrap();
    assert_eq!(b.listeners[0].filter_chains.len(), 1);
    // A single listener mapping too.
    let mut v = fixture_json("seed.yaml");
    let l = v["static_resources"]["listeners"][0].clone();
    v["static_resources"]["listeners"] = l;
    let b = parse_json(&v).unwrap();
    assert_eq!(b.listeners[0].path, "static_resources.listeners[0]");
    // Ports as strings; `localhost`; bracketed IPv6.
    let mut v = fixture_json("seed.yaml");
    v["admin"]["address"]["socket_address"] = json!({"address": "[::1]", "port_value": "9901"});
    v["static_resources"]["listeners"][0]["address"]["socket_address"]["address"] =
        json!("localhost");
    let b = parse_json(&v).unwrap();
    assert_eq!(
        b.admin.unwrap().address,
        "[::1]:9901".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(
        b.listeners[0].address,
        "127.0.0.1:9000".parse::<SocketAddr>().unwrap()
    );
}

#[test]
fn connection_limit_forms() {
    let om = |n: Value| {
        json!({"resource_monitors": [{
            "name": "envoy.resource_monitors.global_downstream_max_connections",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig",
                "max_active_downstream_connections": n
            }
        }]})
    };
    let mut v = fixture_json("seed.yaml");
    v["overload_manager"] = om(json!(1000));
    assert_eq!(
        parse_json(&v).unwrap().global_downstream_max_connections,
        Some(1000)
    );

    let mut v = fixture_json("seed.yaml");
    v["layered_runtime"] = json!({"layers": [{"name": "s", "static_layer": {"overload.global_downstream_max_connections": 77}}]});
    assert_eq!(
        parse_json(&v).unwrap().global_downstream_max_connections,
        Some(77)
    );
    v["overload_manager"] = om(json!(78));
    assert!(err(&v).to_string().contains("disagrees"));

    let mut v = fixture_json("seed.yaml");
    // Runtime keys quickshake does not read (Istio and Envoy Gateway set re2 limits and
    // reloadable features) are accepted and listed as having no effect.
    v["layered_runtime"] =
        json!({"layers": [{"name": "s", "static_layer": {"re2": {"max_program_size": 1}}}]});
    let b = parse_json(&v).unwrap();
    assert_eq!(
        b.ignored,
        ["layered_runtime.layers[0].static_layer.re2.max_program_size"]
    );

    let mut v = fixture_json("seed.yaml");
    v["overload_manager"] = om(json!(0));
    assert!(err(&v)
        .path()
        .unwrap()
        .ends_with("max_active_downstream_connections"));
    v["overload_manager"]["resource_monitors"][0]["name"] =
        json!("envoy.resource_monitors.fixed_heap");
    assert_eq!(
        err(&v).to_string(),
        "overload_manager.resource_monitors[0].name: not supported yet (only envoy.resource_monitors.global_downstream_max_connections)"
    );
}

#[test]
fn config_dump_redacts_keys() {
    let b = load_file(&fixture("full.yaml")).unwrap();
    let dump = b.config_dump();
    assert_eq!(
        dump["configs"][0]["@type"],
        "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump"
    );
    let boot = &dump["configs"][0]["bootstrap"];
    assert_eq!(
        boot["admin"]["address"]["socket_address"]["port_value"],
        9901
    );
    let text = serde_json::to_string(&dump).unwrap();
    for secret in [
        "TOPSECRETRSA",
        "VE9QU0VDUkVURUNEU0E=",
        "PROVIDERSECRETKEY",
        "01234567890123456789",
    ] {
        assert!(!text.contains(secret), "{secret} appears in the dump");
    }
    let tls = &boot["static_resources"]["listeners"][0]["filter_chains"][0]["transport_socket"]
        ["typed_config"];
    let certs = &tls["common_tls_context"]["tls_certificates"];
    assert_eq!(certs[0]["private_key"]["inline_string"], "[redacted]");
    assert_eq!(certs[1]["private_key"]["inline_bytes"], "[redacted]");
    assert_eq!(
        certs[1]["private_key_provider"]["typed_config"]["private_key"]["inline_string"],
        "[redacted]"
    );
    assert_eq!(
        certs[0]["certificate_chain"]["filename"],
        "/nonexistent/rsa.pem"
    );
    assert_eq!(
        tls["session_ticket_keys"]["keys"][0]["inline_string"],
        "[redacted]"
    );
    assert_eq!(
        tls["session_ticket_keys"]["keys"][1]["filename"],
        "/nonexistent/ticket.key"
    );

    let seed = load_file(&fixture("seed.yaml")).unwrap().config_dump();
    let key = &seed["configs"][0]["bootstrap"]["static_resources"]["listeners"][0]["filter_chains"]
        ["transport_socket"]["typed_config"]["common_tls_context"]["tls_certificates"]
        ["private_key_provider"]["typed_config"]["private_key"];
    assert_eq!(key["filename"], "/etc/ssl/key.pem");
    assert!(!format!("{:?}", load_file(&fixture("full.yaml")).unwrap()).contains("TOPSECRET"));
}

#[test]
fn durations_public_api() {
    assert_eq!(
        parse_duration(&json!("0.01s"), "p").unwrap(),
        Duration::from_millis(10)
    );
    assert_eq!(
        parse_duration(&json!("1m"), "p").unwrap(),
        Duration::from_secs(60)
    );
    assert_eq!(
        parse_duration(&json!({"seconds": 1, "nanos": 5}), "p").unwrap(),
        Duration::new(1, 5)
    );
    let e = parse_duration(&json!("ten"), "a.b").unwrap_err();
    assert_eq!(e.path(), Some("a.b"));
}

#[test]
fn read_data_source_errors_name_path_and_file() {
    let path = format!("{TLS}.common_tls_context.tls_certificates[0].private_key");
    let e = read_data_source(&DataSource::Filename("/x/key.pem".into()), &path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{path}.filename: cannot read /x/key.pem: No such file or directory (os error 2)")
    );
    assert_eq!(e.path(), Some(format!("{path}.filename").as_str()));
    assert_eq!(
        read_data_source(&DataSource::InlineString("abc".into()), "p").unwrap(),
        b"abc"
    );
    let own = fixture("seed.yaml");
    let bytes = read_data_source(&DataSource::Filename(own.clone()), "p").unwrap();
    assert_eq!(bytes, std::fs::read(own).unwrap());
}

#[test]
fn data_source_rules() {
    let set = |ds: Value| {
        let mut v = fixture_json("seed.yaml");
        seed_tls(&mut v)["common_tls_context"]["tls_certificates"]["certificate_chain"] = ds;
        parse_json(&v)
    };
    let chain = |b: Bootstrap| {
        b.listeners[0].filter_chains[0]
            .tls
            .as_ref()
            .unwrap()
            .certificates[0]
            .certificate_chain
            .clone()
    };
    let p = format!("{TLS}.common_tls_context.tls_certificates[0].certificate_chain");
    let e = set(json!({"filename": "/a", "inline_string": "b"})).unwrap_err();
    assert_eq!(e.path(), Some(p.as_str()));
    assert!(e.to_string().contains("only one of"), "{e}");
    assert_eq!(set(json!({})).unwrap_err().path(), Some(p.as_str()));
    let e = set(json!({"inline_bytes": "@@@"})).unwrap_err();
    assert_eq!(e.path(), Some(format!("{p}.inline_bytes").as_str()));
    std::env::set_var("QS_CONFIG_TEST_CERT", "PEMDATA");
    assert_eq!(
        chain(set(json!({"environment_variable": "QS_CONFIG_TEST_CERT"})).unwrap()),
        DataSource::InlineString("PEMDATA".into())
    );
    let e = set(json!({"environment_variable": "QS_CONFIG_TEST_UNSET_VAR"})).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{p}.environment_variable: environment variable QS_CONFIG_TEST_UNSET_VAR is not set"
        )
    );
}

#[test]
fn ocsp_staple_and_policy() {
    let parse = |policy: Option<Value>, staple: Option<Value>| {
        let mut v = fixture_json("seed.yaml");
        if let Some(p) = policy {
            seed_tls(&mut v)["ocsp_staple_policy"] = p;
        }
        if let Some(s) = staple {
            seed_tls(&mut v)["common_tls_context"]["tls_certificates"]["ocsp_staple"] = s;
        }
        parse_json(&v)
    };
    let tls = |b: Bootstrap| b.listeners[0].filter_chains[0].tls.clone().unwrap();
    let t = tls(parse(None, None).unwrap());
    assert_eq!(t.ocsp_staple_policy, OcspStaplePolicy::LenientStapling);
    assert_eq!(t.certificates[0].ocsp_staple, None);
    // Envoy's JSON parser takes enum names in any case, and numbers.
    for (p, want) in [
        (json!("LENIENT_STAPLING"), OcspStaplePolicy::LenientStapling),
        (json!("strict_stapling"), OcspStaplePolicy::StrictStapling),
        (json!("MUST_STAPLE"), OcspStaplePolicy::MustStaple),
        (json!(2), OcspStaplePolicy::MustStaple),
        (json!(0), OcspStaplePolicy::LenientStapling),
    ] {
        let t = tls(parse(Some(p.clone()), None).unwrap());
        assert_eq!(t.ocsp_staple_policy, want, "{p}");
    }
    let path = format!("{TLS}.ocsp_staple_policy");
    for bad in [json!("STAPLE_SOMETIMES"), json!(3), json!(true)] {
        let e = parse(Some(bad.clone()), None).unwrap_err();
        assert_eq!(e.path(), Some(path.as_str()), "{bad}: {e}");
        assert!(e.to_string().contains("MUST_STAPLE"), "{e}");
    }
    let t = tls(parse(None, Some(json!({"filename": "/etc/staple.der"}))).unwrap());
    assert_eq!(
        t.certificates[0].ocsp_staple,
        Some(DataSource::Filename("/etc/staple.der".into()))
    );
    let t = tls(parse(None, Some(json!({"inline_bytes": "MAMKAQA="}))).unwrap());
    assert_eq!(
        t.certificates[0].ocsp_staple,
        Some(DataSource::InlineBytes(vec![0x30, 0x03, 0x0a, 0x01, 0x00]))
    );
    let e = parse(None, Some(json!({"inline_bytes": "@@@"}))).unwrap_err();
    assert_eq!(
        e.path(),
        Some(
            format!("{TLS}.common_tls_context.tls_certificates[0].ocsp_staple.inline_bytes")
                .as_str()
        )
    );
}

#[test]
fn access_log_formats() {
    const FILE: &str = "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog";
    const AT: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.access_log[0].typed_config";
    let fmt = std::env::temp_dir().join(format!("qs-access-format-{}.txt", std::process::id()));
    std::fs::write(&fmt, "%RESPONSE_CODE% %UPSTREAM_CLUSTER%\n").unwrap();
    let with = |typed: Value| {
        let mut v = fixture_json("seed.yaml");
        let mut typed = typed;
        typed["@type"] = json!(FILE);
        typed["path"] = json!("/tmp/x.log");
        seed_hcm(&mut v)["access_log"] = json!([{ "typed_config": typed }]);
        v
    };
    let log = |typed: Value| {
        parse_json(&with(typed)).unwrap().listeners[0].filter_chains[0]
            .http()
            .unwrap()
            .access_logs[0]
            .clone()
    };
    let l = log(
        json!({"log_format": {"text_format_source": {"filename": fmt}, "omit_empty_values": true}}),
    );
    assert_eq!(
        l.format,
        LogFormat::Text(parse_format("%RESPONSE_CODE% %UPSTREAM_CLUSTER%\n").unwrap())
    );
    assert!(l.omit_empty_values);
    let l =
        log(json!({"log_format": {"text_format_source": {"inline_bytes": "JVBST1RPQ09MJQ=="}}}));
    assert_eq!(
        l.format,
        LogFormat::Text(parse_format("%PROTOCOL%").unwrap())
    );
    let json_fmt = json!({"code": "%RESPONSE_CODE%", "nested": {"m": "%REQ(:METHOD)%", "n": 1}});
    let l = log(
        json!({"log_format": {"json_format": json_fmt, "content_type": "application/json",
        "json_format_options": {"sort_properties": true}}}),
    );
    assert_eq!(
        l.format,
        LogFormat::Json(parse_json_format(&json_fmt).unwrap())
    );
    // The deprecated FileAccessLog fields Envoy 1.39.3 still accepts.
    for legacy in ["json_format", "typed_json_format"] {
        assert_eq!(log(json!({ legacy: json_fmt })).format, l.format);
    }

    let e = err(&with(
        json!({"log_format": {"json_format": {"a": {"b": "%NOPE%"}}}}),
    ));
    assert_eq!(e.path(), Some(&*format!("{AT}.log_format.json_format.a.b")));
    assert!(
        e.to_string()
            .contains("Not supported field in StreamInfo: NOPE"),
        "{e}"
    );
    let e = err(&with(json!({"log_format": {"text_format": "a % b"}})));
    assert!(
        e.to_string()
            .contains("Couldn't find valid command at position 2"),
        "{e}"
    );
    let e = err(&with(
        json!({"log_format": {"text_format_source": {"filename": "/nonexistent/f"}}}),
    ));
    assert_eq!(
        e.path(),
        Some(&*format!("{AT}.log_format.text_format_source.filename"))
    );
    let e = err(&with(
        json!({"log_format": {"json_format": {}, "formatters": []}}),
    ));
    assert!(e.to_string().contains("not supported yet"), "{e}");
    let e = err(&with(
        json!({"log_format": {"json_format": {}, "text_format": "x"}}),
    ));
    assert!(e.to_string().contains("only one of"), "{e}");
    let e = err(&with(json!({"format": "x", "json_format": {}})));
    assert!(e.to_string().contains("only one of"), "{e}");
    let e = err(&with(
        json!({"log_format": {"json_format": "%RESPONSE_CODE%"}}),
    ));
    assert!(e.to_string().contains("expected a mapping"), "{e}");
    let _ = std::fs::remove_file(&fmt);
}
