//! A route's `request_mirror_policies`: a copy of the request (headers as forwarded, the body
//! when it was buffered) goes to each mirror cluster its `runtime_fraction` picks, fire and
//! forget, with `-shadow` appended to the host unless `disable_shadow_host_suffix_append`.
//! The answer is read and dropped; the client gets the primary cluster's.

use http::request::Parts;
use http::Request;
use quickshake_config::RequestMirror;
use quickshake_upstream::Cluster;

use crate::body::Body;
use crate::fault::draw;
use crate::rewrite::set_authority;

/// The mirrors of one request: their configuration and cluster.
pub(crate) type Mirrors<'a> = Vec<(&'a RequestMirror, Cluster)>;

/// Send the copies; `body` makes each copy's body (`None`: the request's body was too large
/// to keep, and nothing is mirrored).
pub(crate) fn send(parts: &Parts, body: Option<&dyn Fn() -> Body>, mirrors: &Mirrors<'_>) {
    let Some(body) = body else {
        return;
    };
    for (m, cluster) in mirrors {
        if draw(m.fraction) >= m.fraction.numerator {
            continue;
        }
        let mut copy = clone_parts(parts);
        if !m.disable_shadow_host_suffix_append {
            let host = copy
                .uri
                .authority()
                .map(|a| a.as_str().to_owned())
                .or_else(|| {
                    copy.headers
                        .get(http::header::HOST)
                        .and_then(|h| h.to_str().ok())
                        .map(str::to_owned)
                });
            if let Some(h) = host {
                set_authority(&mut copy, &shadow_host(&h), false);
            }
        }
        let req = Request::from_parts(copy, body());
        let cluster = cluster.clone();
        // The cluster's stats count the copy's answer or failure; nothing else looks at it.
        tokio::spawn(async move {
            let _ = cluster.send(req).await;
        });
    }
}

/// Envoy's shadow host: `-shadow` after the host name, before any port.
fn shadow_host(authority: &str) -> String {
    match authority.rfind(':') {
        Some(c) if authority.rfind(']').is_none_or(|end| end < c) => {
            format!("{}-shadow{}", &authority[..c], &authority[c..])
        }
        _ => format!("{authority}-shadow"),
    }
}

fn clone_parts(p: &Parts) -> Parts {
    let (mut copy, ()) = Request::new(()).into_parts();
    copy.method = p.method.clone();
    copy.uri = p.uri.clone();
    copy.version = p.version;
    copy.headers = p.headers.clone();
    copy
}

#[cfg(test)]
mod tests {
    use super::shadow_host;

    #[test]
    fn shadow_suffix_goes_before_the_port() {
        assert_eq!(shadow_host("a.example"), "a.example-shadow");
        assert_eq!(shadow_host("a.example:8080"), "a.example-shadow:8080");
        assert_eq!(shadow_host("[::1]:80"), "[::1]-shadow:80");
    }
}
