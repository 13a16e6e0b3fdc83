//! Envoy's route matching for direct responses: virtual host by `Host`/`:authority`, then the
//! first route whose `prefix` or `path` matches. Pure functions, no I/O.

use quickshake_config::{Route, RouteMatch, VirtualHost};

/// Pick the virtual host for an authority. Envoy's order: exact domain, then the longest
/// `*.suffix`/`*suffix` wildcard, then the longest `prefix*`, then `*`.
pub fn select_virtual_host<'a>(
    hosts: &'a [VirtualHost],
    authority: &str,
) -> Option<&'a VirtualHost> {
    let host = strip_port(authority).to_ascii_lowercase();
    let mut best: Option<(u8, usize, &VirtualHost)> = None;
    for vh in hosts {
        for domain in &vh.domains {
            let d = domain.to_ascii_lowercase();
            let rank = if d == "*" {
                Some((0, 0))
            } else if let Some(suffix) = d.strip_prefix('*') {
                (host.len() > suffix.len() && host.ends_with(suffix)).then_some((2, suffix.len()))
            } else if let Some(prefix) = d.strip_suffix('*') {
                (host.len() > prefix.len() && host.starts_with(prefix)).then_some((1, prefix.len()))
            } else {
                (d == host || strip_port(&d) == host && d.contains(':') == authority.contains(':'))
                    .then_some((3, d.len()))
            };
            if let Some((class, len)) = rank {
                if best.is_none_or(|(c, l, _)| (class, len) > (c, l)) {
                    best = Some((class, len, vh));
                }
            }
        }
    }
    best.map(|(_, _, vh)| vh)
}

/// The first matching route, if any. `path` is the request path without query.
pub fn select_route<'a>(vh: &'a VirtualHost, path: &str) -> Option<&'a Route> {
    vh.routes.iter().find(|r| match &r.matcher {
        RouteMatch::Prefix(p) => path.starts_with(p.as_str()),
        RouteMatch::Path(p) => path == p,
    })
}

/// The prefix a route matched on (for `prefix_rewrite`).
pub fn matched_prefix(route: &Route) -> Option<&str> {
    match &route.matcher {
        RouteMatch::Prefix(p) => Some(p.as_str()),
        RouteMatch::Path(_) => None,
    }
}

fn strip_port(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .split(']')
            .next()
            .map_or(authority, |h| &authority[..h.len() + 1]);
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => authority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickshake_config::{Route, RouteAction};

    fn vh(name: &str, domains: &[&str], routes: Vec<Route>) -> VirtualHost {
        VirtualHost {
            name: name.into(),
            domains: domains.iter().map(|d| d.to_string()).collect(),
            routes,
        }
    }
    fn direct(m: RouteMatch, status: u16) -> Route {
        Route {
            matcher: m,
            action: RouteAction::DirectResponse { status, body: None },
        }
    }

    #[test]
    fn picks_most_specific_host() {
        let hosts = vec![
            vh("any", &["*"], vec![]),
            vh("wild", &["*.example.com"], vec![]),
            vh("exact", &["api.example.com"], vec![]),
            vh("pre", &["api.*"], vec![]),
        ];
        let name = |a: &str| select_virtual_host(&hosts, a).map(|v| v.name.clone());
        assert_eq!(name("api.example.com:9000").as_deref(), Some("exact"));
        assert_eq!(name("www.example.com").as_deref(), Some("wild"));
        assert_eq!(name("api.other.org").as_deref(), Some("pre"));
        assert_eq!(name("localhost").as_deref(), Some("any"));
        assert_eq!(name("[::1]:9000").as_deref(), Some("any"));
        assert!(select_virtual_host(&hosts[1..3], "nope").is_none());
    }

    #[test]
    fn first_matching_route_wins() {
        let v = vh(
            "v",
            &["*"],
            vec![
                direct(RouteMatch::Path("/exact".into()), 201),
                direct(RouteMatch::Prefix("/api".into()), 202),
                direct(RouteMatch::Prefix("/".into()), 200),
            ],
        );
        let status = |p: &str| match select_route(&v, p).map(|r| &r.action) {
            Some(RouteAction::DirectResponse { status, .. }) => *status,
            _ => 0,
        };
        assert_eq!(status("/exact"), 201);
        assert_eq!(status("/exact/x"), 200);
        assert_eq!(status("/api/v1"), 202);
        assert_eq!(status("/"), 200);
        let empty = vh(
            "e",
            &["*"],
            vec![direct(RouteMatch::Prefix("/x".into()), 200)],
        );
        assert!(select_route(&empty, "/y").is_none());
    }
}
