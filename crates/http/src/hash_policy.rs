//! The request hash of a route's `hash_policy` (Envoy's `HashPolicyImpl`), for clusters that
//! balance by consistent hashing: each entry whose input is present contributes the xxHash64
//! of it, combined as `rotl(hash, 1) ^ new`; a `terminal` entry that produced a hash ends the
//! list. A `cookie` entry with `ttl` whose cookie is absent generates one (Envoy's
//! `addDownstreamSetCookie`: the hex xxHash64 of the connection's remote and local addresses,
//! sent back in `Set-Cookie`) and hashes its value.

use std::borrow::Cow;

use http::{HeaderMap, Method, Uri};
use quickshake_config::model::{CookieHash, HashPolicy, HashSource};
use quickshake_upstream::xxhash64;

/// The parts of a request a hash policy reads.
pub(crate) struct HashInput<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
    /// The client's address (`ip:port`).
    pub peer: &'a str,
    /// The connection's local address (`ip:port`), for a generated cookie.
    pub local: &'a str,
}

/// The hash of `policies` for this request, `None` when no entry applied (the balancer then
/// picks at random); and the `Set-Cookie` values of the cookies it generated.
pub(crate) fn request_hash(
    policies: &[HashPolicy],
    input: &HashInput<'_>,
) -> (Option<u64>, Vec<String>) {
    let mut hash: Option<u64> = None;
    let mut set_cookies = Vec::new();
    for p in policies {
        let new = match &p.source {
            HashSource::Cookie(c) => cookie_hash(c, input, &mut set_cookies),
            other => evaluate(other, input),
        };
        if let Some(new) = new {
            hash = Some(hash.map_or(0, |h| h.rotate_left(1)) ^ new);
        }
        if p.terminal && hash.is_some() {
            break;
        }
    }
    (hash, set_cookies)
}

/// A `cookie` entry: the cookie's value, or (with `ttl`) a generated one.
fn cookie_hash(c: &CookieHash, input: &HashInput<'_>, set: &mut Vec<String>) -> Option<u64> {
    if let Some(v) = cookie(input.headers, &c.name) {
        return Some(xxhash64(v.as_bytes(), 0));
    }
    let ttl = c.ttl?;
    let value = format!(
        "{:016x}",
        xxhash64(format!("{}{}", input.peer, input.local).as_bytes(), 0)
    );
    // Envoy's makeSetCookieValue: the value quoted, Max-Age unless zero, Path, attributes,
    // HttpOnly.
    let mut header = format!("{}=\"{value}\"", c.name);
    if !ttl.is_zero() {
        header.push_str(&format!("; Max-Age={}", ttl.as_secs()));
    }
    if let Some(path) = &c.path {
        header.push_str(&format!("; Path={path}"));
    }
    for (name, v) in &c.attributes {
        match v.is_empty() {
            true => header.push_str(&format!("; {name}")),
            false => header.push_str(&format!("; {name}={v}")),
        }
    }
    header.push_str("; HttpOnly");
    set.push(header);
    Some(xxhash64(value.as_bytes(), 0))
}

fn evaluate(source: &HashSource, parts: &HashInput<'_>) -> Option<u64> {
    match source {
        HashSource::Header(name) => {
            let mut values: Vec<&[u8]> = match name.as_str() {
                ":authority" | "host" => parts
                    .uri
                    .authority()
                    .map(|a| a.as_str().as_bytes())
                    .or_else(|| parts.headers.get("host").map(|v| v.as_bytes()))
                    .into_iter()
                    .collect(),
                ":path" => parts
                    .uri
                    .path_and_query()
                    .map(|p| p.as_str().as_bytes())
                    .into_iter()
                    .collect(),
                ":method" => vec![parts.method.as_str().as_bytes()],
                _ => parts
                    .headers
                    .get_all(name.as_str())
                    .iter()
                    .map(|v| v.as_bytes())
                    .collect(),
            };
            if values.is_empty() {
                return None;
            }
            // Envoy sorts the values and hashes them as one stream.
            values.sort_unstable();
            Some(xxhash64(&values.concat(), 0))
        }
        HashSource::Cookie(c) => cookie(parts.headers, &c.name).map(|v| xxhash64(v.as_bytes(), 0)),
        HashSource::SourceIp => {
            let ip = match parts.peer.parse::<std::net::SocketAddr>() {
                Ok(a) => a.ip().to_string(),
                Err(_) => parts.peer.parse::<std::net::IpAddr>().ok()?.to_string(),
            };
            Some(xxhash64(ip.as_bytes(), 0))
        }
        HashSource::QueryParameter(name) => {
            let query = parts.uri.query()?;
            query.split('&').find_map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (percent_decode(k) == name.as_str())
                    .then(|| xxhash64(percent_decode(v).as_bytes(), 0))
            })
        }
    }
}

/// The value of cookie `name` (Envoy's `parseCookieValue`: the first, quotes stripped).
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then(|| {
                v.strip_prefix('"')
                    .and_then(|s| s.strip_suffix('"'))
                    .unwrap_or(v)
            })
        })
}

/// `%XX` decoded (Envoy's query parameter parsing; `+` stays).
fn percent_decode(s: &str) -> Cow<'_, str> {
    if !s.contains('%') {
        return Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(uri: &str, headers: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder().uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(())
            .map(|r| r.into_parts().0)
            .unwrap_or_else(|_| unreachable!())
    }

    fn input<'a>(p: &'a http::request::Parts, peer: &'a str) -> HashInput<'a> {
        HashInput {
            method: &p.method,
            uri: &p.uri,
            headers: &p.headers,
            peer,
            local: "127.0.0.1:443",
        }
    }

    fn cookie_source(name: &str, ttl: Option<std::time::Duration>) -> HashSource {
        HashSource::Cookie(CookieHash {
            name: name.into(),
            ttl,
            path: Some("/".into()),
            attributes: vec![("SameSite".into(), "Lax".into())],
        })
    }

    #[test]
    fn absent_cookie_with_ttl_is_generated() {
        let p = parts("/", &[]);
        let input = input(&p, "10.0.0.7:5555");
        let policies = [policy(
            cookie_source("route", Some(std::time::Duration::from_secs(60))),
            false,
        )];
        let (hash, set) = request_hash(&policies, &input);
        let value = format!("{:016x}", xxhash64(b"10.0.0.7:5555127.0.0.1:443", 0));
        assert_eq!(hash, Some(xxhash64(value.as_bytes(), 0)));
        assert_eq!(
            set,
            [format!(
                "route=\"{value}\"; Max-Age=60; Path=/; SameSite=Lax; HttpOnly"
            )]
        );
        // The same client sending it back gets the same hash, and no new cookie.
        let back = format!("route=\"{value}\"");
        let p = parts("/", &[("cookie", back.as_str())]);
        let (again, set) = request_hash(&policies, &super::tests::input(&p, "10.0.0.9:1"));
        assert_eq!((again, set.len()), (hash, 0));
    }

    fn policy(source: HashSource, terminal: bool) -> HashPolicy {
        HashPolicy { source, terminal }
    }

    #[test]
    fn header_cookie_query_and_source_ip() {
        let p = parts(
            "/a?x=1&user=b%6Fb",
            &[("x-user", "alice"), ("cookie", "a=1; session=\"s1\"")],
        );
        let input = input(&p, "10.0.0.7:5555");
        let h = |s: HashSource| request_hash(&[policy(s, false)], &input).0;
        assert_eq!(
            h(HashSource::Header("x-user".into())),
            Some(xxhash64(b"alice", 0))
        );
        assert_eq!(h(HashSource::Header("x-none".into())), None);
        assert_eq!(h(cookie_source("session", None)), Some(xxhash64(b"s1", 0)));
        assert_eq!(h(cookie_source("absent", None)), None);
        assert_eq!(
            h(HashSource::QueryParameter("user".into())),
            Some(xxhash64(b"bob", 0))
        );
        assert_eq!(h(HashSource::SourceIp), Some(xxhash64(b"10.0.0.7", 0)));
    }

    #[test]
    fn combination_and_terminal() {
        let p = parts("/", &[("a", "1"), ("b", "2")]);
        let p = input(&p, "-");
        let (a, b) = (xxhash64(b"1", 0), xxhash64(b"2", 0));
        let both = [
            policy(HashSource::Header("a".into()), false),
            policy(HashSource::Header("b".into()), false),
        ];
        assert_eq!(request_hash(&both, &p).0, Some(a.rotate_left(1) ^ b));
        let terminal = [
            policy(HashSource::Header("a".into()), true),
            policy(HashSource::Header("b".into()), false),
        ];
        assert_eq!(request_hash(&terminal, &p).0, Some(a));
        let missing_first = [
            policy(HashSource::Header("z".into()), true),
            policy(HashSource::Header("b".into()), false),
        ];
        assert_eq!(request_hash(&missing_first, &p).0, Some(b));
    }
}
