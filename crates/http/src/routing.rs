//! Envoy's route matching: virtual host by `Host`/`:authority`, then the first route whose
//! `prefix` or `path` matches (`case_sensitive`) and whose `headers` all match (pseudo-headers
//! `:method`, `:path`, `:authority`, `:scheme` included). Pure functions, no I/O.

use std::borrow::Cow;

use http::HeaderMap;
use quickshake_config::{Route, RouteConfig, RouteMatch, VirtualHost};

/// What route matching looks at in a request.
pub(crate) struct RequestView<'a> {
    /// The path without the query.
    pub path: &'a str,
    /// `:path`: path and query.
    pub path_and_query: &'a str,
    pub method: &'a str,
    pub authority: &'a str,
    pub scheme: &'a str,
    pub headers: &'a HeaderMap,
}

impl<'a> RequestView<'a> {
    /// The view of `req`, whose `Host` / `:authority` is `authority`, on a connection with
    /// (`tls`) or without TLS.
    pub(crate) fn of<B>(req: &'a http::Request<B>, authority: &'a str, tls: bool) -> Self {
        RequestView {
            path: req.uri().path(),
            path_and_query: req.uri().path_and_query().map_or("/", |p| p.as_str()),
            method: req.method().as_str(),
            authority,
            scheme: if tls { "https" } else { "http" },
            headers: req.headers(),
        }
    }

    /// A header's value as Envoy's header matchers see it: pseudo-headers from the request
    /// line, others with all their values joined by `,`; `None` when absent.
    pub(crate) fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        match name {
            ":path" => return Some(Cow::Borrowed(self.path_and_query)),
            ":method" => return Some(Cow::Borrowed(self.method)),
            ":authority" | "host" => return Some(Cow::Borrowed(self.authority)),
            ":scheme" => return Some(Cow::Borrowed(self.scheme)),
            _ => {}
        }
        let mut values = self.headers.get_all(name).iter();
        let first = values.next()?;
        let mut out = String::from_utf8_lossy(first.as_bytes()).into_owned();
        for v in values {
            out.push(',');
            out.push_str(&String::from_utf8_lossy(v.as_bytes()));
        }
        Some(Cow::Owned(out))
    }

    /// The query, without its `?` (empty when there is none).
    pub(crate) fn query(&self) -> &str {
        self.path_and_query
            .split_once('?')
            .map_or("", |(_, q)| q.split('#').next().unwrap_or(q))
    }

    /// Whether every matcher matches.
    pub(crate) fn matches_all(&self, matchers: &[quickshake_config::HeaderMatcher]) -> bool {
        matchers
            .iter()
            .all(|m| m.matches(self.header(&m.name).as_deref()))
    }
}

/// Pick the virtual host for an authority, as Envoy's `RouteMatcher::findVirtualHost`: the
/// authority, lower-cased and with its port unless the route configuration says
/// `ignore_port_in_host_matching` (then the port is dropped first), is looked up as an exact
/// domain, then under the longest `*.suffix`/`*suffix` wildcard, then the longest `prefix*`,
/// then `*`. A wildcard matches only a longer host; the port stays part of what it sees, so
/// `*.example.com` does not match `www.example.com:8443` and `api.*` matches `api.x:9`.
pub(crate) fn select_virtual_host<'a>(
    config: &'a RouteConfig,
    authority: &str,
) -> Option<&'a VirtualHost> {
    let authority = if config.ignore_port_in_host_matching {
        strip_port(authority)
    } else {
        authority
    };
    let host = authority.to_ascii_lowercase();
    let mut best: Option<(u8, usize, &VirtualHost)> = None;
    for vh in &config.virtual_hosts {
        for domain in &vh.domains {
            let d = domain.to_ascii_lowercase();
            let rank = if d == "*" {
                Some((0, 0))
            } else if let Some(suffix) = d.strip_prefix('*') {
                (host.len() > suffix.len() && host.ends_with(suffix)).then_some((2, suffix.len()))
            } else if let Some(prefix) = d.strip_suffix('*') {
                (host.len() > prefix.len() && host.starts_with(prefix)).then_some((1, prefix.len()))
            } else {
                (d == host).then_some((3, d.len()))
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

/// The first matching route, if any.
pub(crate) fn select_route<'a>(vh: &'a VirtualHost, req: &RequestView<'_>) -> Option<&'a Route> {
    vh.routes.iter().find(|r| {
        path_matches(r, req.path)
            && req.matches_all(&r.headers)
            && r.query_parameters.iter().all(|q| q.matches(req.query()))
    })
}

fn path_matches(r: &Route, path: &str) -> bool {
    match (&r.matcher, r.case_sensitive) {
        (RouteMatch::Prefix(p), true) => path.starts_with(p.as_str()),
        (RouteMatch::Prefix(p), false) => path
            .get(..p.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(p)),
        (RouteMatch::Path(p), true) => path == p,
        (RouteMatch::Path(p), false) => path.eq_ignore_ascii_case(p),
        (RouteMatch::PathSeparatedPrefix(p), case_sensitive) => {
            path_separated_prefix_matches(p, path, case_sensitive)
        }
    }
}

/// Envoy's `path_separated_prefix`: the path without its query or fragment equals `prefix`, or
/// continues with `/` right after it (`/app` matches `/app`, `/app/`, `/app/x`, not `/apple`).
pub(crate) fn path_separated_prefix_matches(
    prefix: &str,
    path: &str,
    case_sensitive: bool,
) -> bool {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let Some(head) = path.get(..prefix.len()) else {
        return false;
    };
    let same = if case_sensitive {
        head == prefix
    } else {
        head.eq_ignore_ascii_case(prefix)
    };
    same && matches!(path.as_bytes().get(prefix.len()), None | Some(b'/'))
}

/// The prefix a route matched on (for `prefix_rewrite`).
pub(crate) fn matched_prefix(route: &Route) -> Option<&str> {
    match &route.matcher {
        RouteMatch::Prefix(p) | RouteMatch::PathSeparatedPrefix(p) => Some(p.as_str()),
        RouteMatch::Path(_) => None,
    }
}

/// The authority without its port, as Envoy's `HeaderUtility::getPortStart` finds it: from the
/// last `:` unless that is inside an IPv6 literal's brackets (`[::1]` keeps all of itself).
fn strip_port(authority: &str) -> &str {
    match authority.rfind(':') {
        Some(colon) if authority.rfind(']').is_none_or(|end| end < colon) => &authority[..colon],
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
            mutations: Default::default(),
            per_filter: Vec::new(),
            cors: None,
            require_tls: Default::default(),
            include_request_attempt_count: false,
            include_attempt_count_in_response: false,
        }
    }
    fn direct(m: RouteMatch, status: u16) -> Route {
        Route {
            name: String::new(),
            matcher: m,
            case_sensitive: true,
            query_parameters: Vec::new(),
            headers: Vec::new(),
            action: RouteAction::DirectResponse { status, body: None },
            mutations: Default::default(),
            per_filter: Vec::new(),
            cors: None,
        }
    }

    fn view<'a>(path: &'a str, method: &'a str, headers: &'a HeaderMap) -> RequestView<'a> {
        RequestView {
            path,
            path_and_query: path,
            method,
            authority: "example.com",
            scheme: "http",
            headers,
        }
    }

    fn status(v: &VirtualHost, req: &RequestView<'_>) -> u16 {
        match select_route(v, req).map(|r| &r.action) {
            Some(RouteAction::DirectResponse { status, .. }) => *status,
            _ => 0,
        }
    }

    fn matcher(yaml: &str) -> quickshake_config::HeaderMatcher {
        let doc = format!(
            "{{virtual_hosts: [{{name: v, domains: ['*'], routes: [{{match: {{prefix: /, \
             headers: [{yaml}]}}, direct_response: {{status: 200}}}}]}}]}}"
        );
        let json: serde_json::Value = serde_yaml::from_str(&doc).expect("yaml");
        let rc = quickshake_config::route_configuration(&json, "rc").expect("parses");
        rc.virtual_hosts[0].routes[0].headers[0].clone()
    }

    #[test]
    fn header_matchers_as_envoy() {
        let mut h = HeaderMap::new();
        h.append("x-a", "one".parse().expect("v"));
        h.append("x-a", "two".parse().expect("v"));
        h.insert("x-n", "42".parse().expect("v"));
        let req = view("/p", "GET", &h);
        let m = |y: &str| matcher(y).matches(req.header(&matcher(y).name).as_deref());
        assert!(m("{name: ':method', string_match: {exact: GET}}"));
        assert!(!m("{name: ':method', string_match: {exact: get}}"));
        assert!(m(
            "{name: ':method', string_match: {exact: get, ignore_case: true}}"
        ));
        assert!(m("{name: x-a, string_match: {exact: 'one,two'}}"));
        assert!(m("{name: x-a, string_match: {contains: 'e,t'}}"));
        assert!(m(
            "{name: x-a, string_match: {safe_regex: {regex: 'o.*o'}}}"
        ));
        assert!(
            !m("{name: x-a, string_match: {safe_regex: {regex: 'one'}}}"),
            "anchored"
        );
        assert!(m("{name: X-A}"), "no specifier: present");
        assert!(!m("{name: x-missing}"));
        assert!(m("{name: x-missing, present_match: false}"));
        assert!(!m("{name: x-a, present_match: false}"));
        assert!(m(
            "{name: x-missing, present_match: true, invert_match: true}"
        ));
        assert!(!m(
            "{name: x-missing, string_match: {exact: a}, invert_match: true}"
        ));
        assert!(m(
            "{name: x-a, string_match: {exact: a}, invert_match: true}"
        ));
        assert!(m(
            "{name: x-missing, string_match: {exact: ''}, treat_missing_header_as_empty: true}"
        ));
        assert!(m("{name: x-n, range_match: {start: 40, end: 43}}"));
        assert!(!m("{name: x-n, range_match: {start: 43, end: 50}}"));
        assert!(
            m("{name: x-a, exact_match: ''}"),
            "legacy empty exact: any value"
        );
        assert!(m("{name: x-a, prefix_match: 'one'}"));
        assert!(m("{name: ':path', suffix_match: '/p'}"));
        assert!(m("{name: ':authority', exact_match: example.com}"));
    }

    #[test]
    fn case_insensitive_paths() {
        let mut r = direct(RouteMatch::Prefix("/API".into()), 201);
        r.case_sensitive = false;
        let mut p = direct(RouteMatch::Path("/Exact".into()), 202);
        p.case_sensitive = false;
        let v = vh("v", &["*"], vec![r, p]);
        let h = HeaderMap::new();
        assert_eq!(status(&v, &view("/api/x", "GET", &h)), 201);
        assert_eq!(status(&v, &view("/EXACT", "GET", &h)), 202);
        assert_eq!(status(&v, &view("/ap", "GET", &h)), 0);
        assert_eq!(status(&v, &view("/é", "GET", &h)), 0);
    }

    fn table(hosts: Vec<VirtualHost>, ignore_port: bool) -> RouteConfig {
        RouteConfig {
            virtual_hosts: hosts,
            ignore_port_in_host_matching: ignore_port,
            ..RouteConfig::default()
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
        let ignoring = table(hosts.clone(), true);
        let name = |a: &str| select_virtual_host(&ignoring, a).map(|v| v.name.clone());
        assert_eq!(name("api.example.com:9000").as_deref(), Some("exact"));
        assert_eq!(name("www.example.com").as_deref(), Some("wild"));
        assert_eq!(name("api.other.org").as_deref(), Some("pre"));
        assert_eq!(name("localhost").as_deref(), Some("any"));
        assert_eq!(name("[::1]:9000").as_deref(), Some("any"));
        assert!(select_virtual_host(&table(hosts[1..3].to_vec(), true), "nope").is_none());
    }

    /// Envoy 1.39.3's answers (the suite's `proxy_host_match` checks them against stock Envoy).
    #[test]
    fn the_port_is_part_of_the_host_unless_ignored() {
        let hosts = vec![
            vh("plain", &["example.com"], vec![]),
            vh("with_port", &["example.com:8443"], vec![]),
            vh("suffix", &["*.example.org"], vec![]),
            vh("prefix", &["api.*"], vec![]),
            vh("v6", &["[::1]"], vec![]),
        ];
        for (ignore_port, cases) in [
            (
                false,
                [
                    ("example.com", Some("plain")),
                    ("Example.COM:8443", Some("with_port")),
                    ("example.com:80", None),
                    ("www.example.org", Some("suffix")),
                    ("www.example.org:1", None),
                    ("api.x:9", Some("prefix")),
                    ("[::1]", Some("v6")),
                    ("[::1]:80", None),
                ],
            ),
            (
                true,
                [
                    ("example.com", Some("plain")),
                    ("Example.COM:8443", Some("plain")),
                    ("example.com:", Some("plain")),
                    ("www.example.org", Some("suffix")),
                    ("www.example.org:1", Some("suffix")),
                    ("api.x:9", Some("prefix")),
                    ("[::1]", Some("v6")),
                    ("[::1]:80", Some("v6")),
                ],
            ),
        ] {
            let t = table(hosts.clone(), ignore_port);
            for (authority, want) in cases {
                assert_eq!(
                    select_virtual_host(&t, authority).map(|v| v.name.as_str()),
                    want,
                    "{authority}, ignore_port_in_host_matching {ignore_port}"
                );
            }
        }
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
        let h = HeaderMap::new();
        let status = |p: &str| status(&v, &view(p, "GET", &h));
        assert_eq!(status("/exact"), 201);
        assert_eq!(status("/exact/x"), 200);
        assert_eq!(status("/api/v1"), 202);
        assert_eq!(status("/"), 200);
        let empty = vh(
            "e",
            &["*"],
            vec![direct(RouteMatch::Prefix("/x".into()), 200)],
        );
        assert!(select_route(&empty, &view("/y", "GET", &h)).is_none());
    }
    #[test]
    fn path_separated_prefix_matches_the_prefix_then_a_separator() {
        let m = |path: &str| path_separated_prefix_matches("/app", path, true);
        for yes in [
            "/app",
            "/app/",
            "/app/x",
            "/app/x/y",
            "/app?q",
            "/app?q=/x",
            "/app#f",
        ] {
            assert!(m(yes), "{yes}");
        }
        for no in [
            "/apple",
            "/ap",
            "/",
            "",
            "/App",
            "/app.html",
            "/x/app",
            "/appq?/",
        ] {
            assert!(!m(no), "{no}");
        }
        assert!(path_separated_prefix_matches("/app", "/APP/x", false));
        assert!(!path_separated_prefix_matches("/app", "/APPLE", false));
        assert!(path_separated_prefix_matches("/a/b", "/a/b/c", true));
        assert!(!path_separated_prefix_matches("/a/b", "/a/bc", true));
    }

    #[test]
    fn path_separated_prefix_route_in_order_and_its_matched_prefix() {
        let v = vh(
            "v",
            &["*"],
            vec![
                direct(RouteMatch::PathSeparatedPrefix("/app".into()), 201),
                direct(RouteMatch::Prefix("/".into()), 200),
            ],
        );
        let h = HeaderMap::new();
        let status = |p: &str| status(&v, &view(p, "GET", &h));
        assert_eq!(status("/app"), 201);
        assert_eq!(status("/app/index.html"), 201);
        assert_eq!(status("/apple"), 200);
        assert_eq!(matched_prefix(&v.routes[0]), Some("/app"));
    }
}
