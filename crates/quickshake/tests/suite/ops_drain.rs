//! The admin endpoints control planes call on shutdown, side by side with Envoy 1.39.3 on one
//! bootstrap: `/healthcheck/fail` and `/healthcheck/ok` (`/ready`, `server.live`, the
//! `health_check` filter, connections drain-closed, new ones still accepted), and
//! `/drain_listeners` with `inboundonly`, `graceful` and `skip_exit` (Envoy Gateway's shutdown
//! manager and pilot-agent call it): which listeners stop and when, and the process running on.

use std::time::{Duration, Instant};

use crate::ops_admin::call as admin;
use crate::support::envoy::Envoy;
use crate::support::{self, curl, free_port, render, Gateway};

/// An HTTP connection manager answering `body` (and `/healthz` through a `health_check`
/// filter when `health_check`).
fn hcm(body: &str, health_check: bool) -> String {
    let hc = if health_check {
        "          - name: envoy.filters.http.health_check\n            typed_config:\n              \
         \"@type\": type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck\n              \
         pass_through_mode: false\n              headers: [{ name: ':path', string_match: { exact: /healthz } }]\n"
    } else {
        ""
    };
    format!(
        r#"      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {body}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                direct_response: {{ status: 200, body: {{ inline_string: {body} }} }}
          http_filters:
{hc}          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#
    )
}

/// An INBOUND listener (with a `health_check` filter) on `{{PORT}}` and an OUTBOUND one on
/// `{{PORT2}}`.
fn bootstrap() -> String {
    format!(
        r#"
static_resources:
  listeners:
  - name: inbound
    traffic_direction: INBOUND
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{PORT}}}} }} }}
    filter_chains:
    - filters:
{}  - name: outbound
    traffic_direction: OUTBOUND
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{PORT2}}}} }} }}
    filter_chains:
    - filters:
{}admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{ADMIN}}}} }} }}
"#,
        hcm("in", true),
        hcm("out", false)
    )
}

const ARGS: &[&str] = &["--drain-time-s", "2", "--drain-strategy", "immediate"];

/// One side: its name, admin port, inbound and outbound listener ports.
type Side = (&'static str, u16, u16, u16);

/// One request on a new connection: the status (0: refused) and the headers that matter here.
fn request(port: u16, path: &str) -> (u16, Vec<String>) {
    let url = format!("http://127.0.0.1:{port}{path}");
    let out = curl(&[
        "-s",
        "-m",
        "3",
        "-o",
        "/dev/null",
        "-D",
        "-",
        "-w",
        "%{http_code}",
        &url,
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_lowercase();
    let code = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0);
    let mut marks: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            l.starts_with("connection:") || l.starts_with("x-envoy-immediate-health-check-fail")
        })
        .map(str::to_owned)
        .collect();
    marks.sort();
    (code, marks)
}

fn gauge(admin_port: u16, name: &str) -> String {
    let (_, body) = admin(admin_port, "GET", &format!("/stats?filter=^{name}$"));
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or("")
        .to_owned()
}

fn start_both(dir: &std::path::Path) -> (Gateway, Envoy, [Side; 2]) {
    let gw = Gateway::start(&bootstrap(), &[&["--concurrency", "1"], ARGS].concat());
    let (port, port2, admin_port) = (free_port(), free_port(), free_port());
    let envoy = Envoy::start_with_args(
        &render(&bootstrap(), port, port2, admin_port, dir),
        admin_port,
        ARGS,
    );
    let sides = [
        ("quickshake", gw.admin, gw.port, gw.port2),
        ("envoy", envoy.admin, port, port2),
    ];
    (gw, envoy, sides)
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const FAIL: &str = "x-envoy-immediate-health-check-fail: true";

#[test]
fn healthcheck_fail_and_drain_listeners_match_envoy() {
    let _lock = support::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let (_gw, _envoy, sides) = start_both(dir.path());
    for (who, adm, inb, outb) in sides {
        assert_eq!(request(inb, "/healthz"), (200, vec![]), "{who}");
        assert_eq!(gauge(adm, "server.live"), "1", "{who}");

        // /healthcheck/fail: /ready says DRAINING, the health check fails, every response
        // drain-closes its connection, new connections are still accepted.
        assert_eq!(
            admin(adm, "POST", "/healthcheck/fail"),
            (200, "OK\n".into()),
            "{who}"
        );
        assert_eq!(
            admin(adm, "GET", "/ready"),
            (503, "DRAINING\n".into()),
            "{who}"
        );
        assert_eq!(gauge(adm, "server.live"), "0", "{who}");
        let closing = |extra: &[&str]| {
            let mut v: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
            v.push("connection: close".into());
            v.sort();
            v
        };
        assert_eq!(request(inb, "/healthz"), (503, closing(&[FAIL])), "{who}");
        assert_eq!(request(inb, "/"), (200, closing(&[FAIL])), "{who}");
        assert_eq!(request(outb, "/"), (200, closing(&[])), "{who}");

        // /healthcheck/ok undoes it.
        assert_eq!(
            admin(adm, "POST", "/healthcheck/ok"),
            (200, "OK\n".into()),
            "{who}"
        );
        assert_eq!(admin(adm, "GET", "/ready"), (200, "LIVE\n".into()), "{who}");
        assert_eq!(gauge(adm, "server.live"), "1", "{who}");
        assert_eq!(request(inb, "/healthz"), (200, vec![]), "{who}");
        assert_eq!(request(outb, "/"), (200, vec![]), "{who}");

        // skip_exit needs graceful: refused, nothing stops.
        assert_eq!(
            admin(adm, "POST", "/drain_listeners?skip_exit"),
            (400, "skip_exit requires graceful\n".into()),
            "{who}"
        );
        assert_eq!(request(inb, "/").0, 200, "{who}");

        // inboundonly: the INBOUND listener stops at once, the other serves on.
        assert_eq!(
            admin(adm, "POST", "/drain_listeners?inboundonly"),
            (200, "OK\n".into()),
            "{who}"
        );
        until(&format!("{who}: inbound listener stopped"), || {
            request(inb, "/").0 == 0
        });
        assert_eq!(request(outb, "/"), (200, vec![]), "{who}");

        // Without inboundonly: every listener stops; the process runs on, still LIVE.
        assert_eq!(
            admin(adm, "POST", "/drain_listeners"),
            (200, "OK\n".into()),
            "{who}"
        );
        until(&format!("{who}: outbound listener stopped"), || {
            request(outb, "/").0 == 0
        });
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(admin(adm, "GET", "/ready"), (200, "LIVE\n".into()), "{who}");
    }
}

#[test]
fn graceful_drain_stops_listeners_after_the_drain_time_unless_skip_exit() {
    let _lock = support::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let (_gw, _envoy, sides) = start_both(dir.path());
    for (who, adm, inb, outb) in sides {
        // graceful + inboundonly: the INBOUND listener accepts through the drain time (2 s),
        // then stops; the other serves on.
        let started = Instant::now();
        assert_eq!(
            admin(adm, "POST", "/drain_listeners?graceful&inboundonly"),
            (200, "OK\n".into()),
            "{who}"
        );
        assert_eq!(request(inb, "/").0, 200, "{who}: during the drain time");
        until(&format!("{who}: inbound listener stopped"), || {
            request(inb, "/").0 == 0
        });
        assert!(
            started.elapsed() >= Duration::from_millis(1500),
            "{who}: stopped before the drain time"
        );
        assert_eq!(request(outb, "/").0, 200, "{who}");

        // graceful + skip_exit: nothing stops, even after the drain time; the process runs on.
        assert_eq!(
            admin(adm, "POST", "/drain_listeners?graceful&skip_exit"),
            (200, "OK\n".into()),
            "{who}"
        );
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(request(outb, "/").0, 200, "{who}: after the drain time");
        assert_eq!(admin(adm, "GET", "/ready"), (200, "LIVE\n".into()), "{who}");
    }
}
