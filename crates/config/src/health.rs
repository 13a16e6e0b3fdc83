//! A cluster's upstream health settings: `health_checks[]` (HTTP and TCP checks),
//! `outlier_detection` (consecutive 5xx and gateway failures) and
//! `common_lb_config.healthy_panic_threshold`. Envoy's defaults and bounds; the fields of the
//! checks and detectors quickshake does not run are "not supported yet".

use std::time::Duration;

use crate::duration::duration;
use crate::model::{HealthCheck, HealthCheckKind, OutlierDetection};
use crate::source::base64_decode;
use crate::walk::{Node, Obj, Result};

const DEFAULT_NO_TRAFFIC_INTERVAL: Duration = Duration::from_secs(60);

/// `health_checks[]`: at most one entry.
pub(crate) fn health_checks(node: &Node<'_>) -> Result<Option<HealthCheck>> {
    let items = node.items();
    match items.as_slice() {
        [] => Ok(None),
        [one] => health_check(one).map(Some),
        [_, second, ..] => Err(second.unsupported(Some("only one health check per cluster"))),
    }
}

fn positive(o: &Obj<'_>, key: &str) -> Result<Duration> {
    let n = o.req(key)?;
    let d = duration(&n)?;
    if d.is_zero() {
        return Err(n.err("must be greater than zero"));
    }
    Ok(d)
}

fn opt_duration(o: &Obj<'_>, key: &str, default: Duration) -> Result<Duration> {
    o.get(key)
        .map(|n| duration(&n))
        .transpose()
        .map(|d| d.unwrap_or(default))
}

fn health_check(node: &Node<'_>) -> Result<HealthCheck> {
    let o = node.obj_with(
        &[
            "timeout",
            "interval",
            "initial_jitter",
            "interval_jitter",
            "unhealthy_threshold",
            "healthy_threshold",
            "http_health_check",
            "tcp_health_check",
            "no_traffic_interval",
            "reuse_connection",
            "always_log_health_check_failures",
            "always_log_health_check_success",
        ],
        &[
            "alt_port",
            "interval_jitter_percent",
            "grpc_health_check",
            "custom_health_check",
            "no_traffic_healthy_interval",
            "unhealthy_interval",
            "unhealthy_edge_interval",
            "healthy_edge_interval",
            "event_log_path",
            "event_logger",
            "event_service",
            "tls_options",
            "transport_socket_match_criteria",
        ],
    )?;
    let threshold = |key: &str| -> Result<u32> {
        let n = o.req(key)?;
        // `UInt32Value`: a bare number, or `{value: N}`.
        let v = match n.v {
            serde_json::Value::Object(_) => n
                .obj(&["value"])?
                .req("value")?
                .as_u64_in(0, u64::from(u32::MAX))?,
            _ => n.as_u64_in(0, u64::from(u32::MAX))?,
        };
        Ok(v as u32)
    };
    for key in [
        "reuse_connection",
        "always_log_health_check_failures",
        "always_log_health_check_success",
    ] {
        if let Some(b) = o.get(key) {
            if b.v.is_object() {
                b.obj(&["value"])?.req("value")?.as_bool()?;
            } else {
                b.as_bool()?;
            }
        }
    }
    let kinds = o.present(&["http_health_check", "tcp_health_check"]);
    let kind = match kinds.as_slice() {
        ["http_health_check"] => http_health_check(&o.req("http_health_check")?)?,
        ["tcp_health_check"] => tcp_health_check(&o.req("tcp_health_check")?)?,
        [] => {
            return Err(node.err(
                "needs one of http_health_check, tcp_health_check (grpc_health_check and \
                 custom_health_check are not supported yet)",
            ))
        }
        _ => return Err(node.err("only one of http_health_check, tcp_health_check may be set")),
    };
    Ok(HealthCheck {
        timeout: positive(&o, "timeout")?,
        interval: positive(&o, "interval")?,
        no_traffic_interval: match o.get("no_traffic_interval") {
            Some(_) => positive(&o, "no_traffic_interval")?,
            None => DEFAULT_NO_TRAFFIC_INTERVAL,
        },
        unhealthy_threshold: threshold("unhealthy_threshold")?,
        healthy_threshold: threshold("healthy_threshold")?,
        interval_jitter: opt_duration(&o, "interval_jitter", Duration::ZERO)?,
        initial_jitter: opt_duration(&o, "initial_jitter", Duration::ZERO)?,
        kind,
    })
}

fn http_health_check(node: &Node<'_>) -> Result<HealthCheckKind> {
    let o = node.obj_with(
        &["host", "path", "expected_statuses"],
        &[
            "send",
            "receive",
            "response_buffer_size",
            "request_headers_to_add",
            "request_headers_to_remove",
            "retriable_statuses",
            "codec_client_type",
            "service_name_matcher",
            "method",
        ],
    )?;
    let path = o.req("path")?.non_empty_str()?.to_owned();
    if !path.starts_with('/') {
        return Err(o.req("path")?.err("must start with '/'"));
    }
    let host = o
        .opt_str("host")?
        .filter(|h| !h.is_empty())
        .map(str::to_owned);
    let mut expected = Vec::new();
    for r in o.items("expected_statuses") {
        let ro = r.obj(&["start", "end"])?;
        // `Int64Range`: numbers or, in protobuf JSON, strings.
        let bound = |key: &str| -> Result<u64> {
            let n = ro.req(key)?;
            match n.v.as_str() {
                Some(s) => s.parse::<u64>().map_err(|_| n.err("expected an integer")),
                None => n.as_u64(),
            }
        };
        let (start, end) = (bound("start")?, bound("end")?);
        if !(100..600).contains(&start) || !(101..=600).contains(&end) || start >= end {
            return Err(r.err("expected start in [100, 600), end in (start, 600]"));
        }
        expected.push((start as u16, end as u16));
    }
    if expected.is_empty() {
        expected.push((200, 201));
    }
    Ok(HealthCheckKind::Http {
        path,
        host,
        expected_statuses: expected,
    })
}

fn tcp_health_check(node: &Node<'_>) -> Result<HealthCheckKind> {
    let o = node.obj_with(&["send", "receive"], &["proxy_protocol_config"])?;
    let send = o
        .get("send")
        .map(|n| payload(&n))
        .transpose()?
        .unwrap_or_default();
    let receive = o
        .items("receive")
        .iter()
        .map(payload)
        .collect::<Result<Vec<_>>>()?;
    Ok(HealthCheckKind::Tcp { send, receive })
}

/// `Payload`: `text` (hex) or `binary` (base64).
fn payload(node: &Node<'_>) -> Result<Vec<u8>> {
    let o = node.obj(&["text", "binary"])?;
    match o.present(&["text", "binary"]).as_slice() {
        ["text"] => {
            let t = o.req("text")?;
            hex(t.as_str()?).ok_or_else(|| t.err("expected hex digits (an even number)"))
        }
        ["binary"] => {
            let b = o.req("binary")?;
            base64_decode(b.as_str()?).ok_or_else(|| b.err("invalid base64"))
        }
        _ => Err(node.err("needs exactly one of text, binary")),
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

/// `outlier_detection` with Envoy's defaults.
pub(crate) fn outlier_detection(node: &Node<'_>) -> Result<OutlierDetection> {
    let o = node.obj_with(
        &[
            "consecutive_5xx",
            "interval",
            "base_ejection_time",
            "max_ejection_percent",
            "enforcing_consecutive_5xx",
            "consecutive_gateway_failure",
            "enforcing_consecutive_gateway_failure",
            "max_ejection_time",
            "enforcing_success_rate",
        ],
        &[
            "success_rate_minimum_hosts",
            "success_rate_request_volume",
            "success_rate_stdev_factor",
            "split_external_local_origin_errors",
            "consecutive_local_origin_failure",
            "enforcing_consecutive_local_origin_failure",
            "enforcing_local_origin_success_rate",
            "failure_percentage_threshold",
            "enforcing_failure_percentage",
            "enforcing_failure_percentage_local_origin",
            "failure_percentage_minimum_hosts",
            "failure_percentage_request_volume",
            "max_ejection_time_jitter",
            "successful_active_health_check_uneject_host",
            "monitors",
            "always_eject_one_host",
            "detector",
        ],
    )?;
    let d = OutlierDetection::default();
    let num = |key: &str, default: u32, max: u64| -> Result<u32> {
        match o.get(key) {
            None => Ok(default),
            Some(n) => {
                let v = match n.v {
                    serde_json::Value::Object(_) => {
                        n.obj(&["value"])?.req("value")?.as_u64_in(0, max)?
                    }
                    _ => n.as_u64_in(0, max)?,
                };
                Ok(v as u32)
            }
        }
    };
    let pos = |key: &str, default: Duration| -> Result<Duration> {
        match o.get(key) {
            None => Ok(default),
            Some(_) => positive(&o, key),
        }
    };
    // Success-rate ejection is a detector quickshake does not have: `enforcing_success_rate: 0`
    // (Istio sets it on every cluster with outlier detection) turns it off, which is exact;
    // any other value stays refused.
    if num("enforcing_success_rate", 0, 100)? != 0 {
        return Err(o.req("enforcing_success_rate")?.unsupported(Some(
            "success-rate ejection is not implemented; only 0 (off) is accepted",
        )));
    }
    let u32max = u64::from(u32::MAX);
    Ok(OutlierDetection {
        consecutive_5xx: num("consecutive_5xx", d.consecutive_5xx, u32max)?,
        consecutive_gateway_failure: num(
            "consecutive_gateway_failure",
            d.consecutive_gateway_failure,
            u32max,
        )?,
        enforcing_consecutive_5xx: num(
            "enforcing_consecutive_5xx",
            d.enforcing_consecutive_5xx,
            100,
        )?,
        enforcing_consecutive_gateway_failure: num(
            "enforcing_consecutive_gateway_failure",
            d.enforcing_consecutive_gateway_failure,
            100,
        )?,
        interval: pos("interval", d.interval)?,
        base_ejection_time: pos("base_ejection_time", d.base_ejection_time)?,
        max_ejection_time: pos("max_ejection_time", d.max_ejection_time)?,
        max_ejection_percent: num("max_ejection_percent", d.max_ejection_percent, 100)?,
    })
}

/// `common_lb_config`: `healthy_panic_threshold` (`{value: percent}`, default 50).
pub(crate) fn common_lb_config(node: &Node<'_>) -> Result<f64> {
    let o = node.obj_with(
        &["healthy_panic_threshold"],
        &[
            "update_merge_window",
            "zone_aware_lb_config",
            "locality_weighted_lb_config",
            "ignore_new_hosts_until_first_hc",
            "close_connections_on_host_set_change",
            "consistent_hashing_lb_config",
            "override_host_status",
        ],
    )?;
    let Some(t) = o.get("healthy_panic_threshold") else {
        return Ok(50.0);
    };
    let to = t.obj(&["value"])?;
    let Some(v) = to.get("value") else {
        return Ok(0.0);
    };
    let pct = v.v.as_f64().ok_or_else(|| v.err("expected a number"))?;
    if !(0.0..=100.0).contains(&pct) {
        return Err(v.err("must be between 0 and 100"));
    }
    Ok(pct)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(yaml: &str) -> serde_json::Value {
        serde_yaml::from_str(yaml).expect("yaml")
    }

    #[test]
    fn http_check_with_defaults() {
        let v = node(
            "[{timeout: 1s, interval: 2s, unhealthy_threshold: 3, healthy_threshold: 2, \
             http_health_check: {path: /healthz}}]",
        );
        let hc = health_checks(&Node::new(&v, "c.health_checks"))
            .expect("ok")
            .expect("some");
        assert_eq!(hc.no_traffic_interval, Duration::from_secs(60));
        assert_eq!(
            hc.kind,
            HealthCheckKind::Http {
                path: "/healthz".into(),
                host: None,
                expected_statuses: vec![(200, 201)]
            }
        );
    }

    #[test]
    fn errors_name_the_field() {
        let v = node("[{timeout: 1s, interval: 2s, unhealthy_threshold: 3, healthy_threshold: 2}]");
        let e = health_checks(&Node::new(&v, "c.health_checks")).expect_err("no kind");
        assert!(e.to_string().contains("c.health_checks[0]"), "{e}");
        let v = node(
            "[{timeout: 1s, interval: 2s, unhealthy_threshold: 3, healthy_threshold: 2, \
             grpc_health_check: {}}]",
        );
        let e = health_checks(&Node::new(&v, "c.health_checks")).expect_err("grpc");
        assert!(e.to_string().contains("grpc_health_check"), "{e}");
        let v = node("{max_ejection_percent: 101}");
        assert!(outlier_detection(&Node::new(&v, "c.outlier_detection")).is_err());
    }

    #[test]
    fn tcp_payloads_and_outlier_defaults() {
        let v = node(
            "[{timeout: 1s, interval: 2s, unhealthy_threshold: 3, healthy_threshold: 2, \
             tcp_health_check: {send: {text: '50494E47'}, receive: [{binary: UE9ORw==}]}}]",
        );
        let hc = health_checks(&Node::new(&v, "h"))
            .expect("ok")
            .expect("some");
        assert_eq!(
            hc.kind,
            HealthCheckKind::Tcp {
                send: b"PING".to_vec(),
                receive: vec![b"PONG".to_vec()]
            }
        );
        let v = node("{consecutive_5xx: 3}");
        let od = outlier_detection(&Node::new(&v, "o")).expect("ok");
        assert_eq!(od.consecutive_5xx, 3);
        assert_eq!(od.enforcing_consecutive_gateway_failure, 0);
        assert_eq!(od.max_ejection_percent, 10);
        let v = node("{healthy_panic_threshold: {value: 25}}");
        assert_eq!(common_lb_config(&Node::new(&v, "l")).expect("ok"), 25.0);
    }
}
