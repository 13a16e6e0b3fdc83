//! A route's rewrites of the request line, shared by forwarding and redirects: the path
//! (`prefix_rewrite` of the matched prefix, or `regex_rewrite` of the path without its query)
//! and the authority (`host_rewrite_literal`).

use http::header::{HeaderName, HeaderValue, HOST};
use http::request::Parts;
use http::uri::{Authority, Uri};
use quickshake_config::RegexRewrite;

const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// `pq` (path and query) after the rewrite, or `None` when there is none to apply.
pub(crate) fn rewritten(
    pq: &str,
    prefix_rewrite: Option<&str>,
    regex_rewrite: Option<&RegexRewrite>,
    matched_prefix: Option<&str>,
) -> Option<String> {
    if let (Some(rewrite), Some(prefix)) = (prefix_rewrite, matched_prefix) {
        // The route matched, so the prefix is there (possibly in another case).
        let rest = pq.get(prefix.len()..)?;
        return Some(format!("{rewrite}{rest}"));
    }
    let re = regex_rewrite?;
    let (path, query) = pq.split_at(pq.find('?').unwrap_or(pq.len()));
    Some(format!("{}{query}", re.apply(path)))
}

/// The request's authority becomes `host`: the URI's, when it has one (HTTP/2, absolute-form),
/// and `Host`. With `append_forwarded`, the original goes at the end of `x-forwarded-host`
/// unless it is its last value already (Envoy's `append_x_forwarded_host`).
pub(crate) fn set_authority(parts: &mut Parts, host: &str, append_forwarded: bool) {
    let Ok(value) = HeaderValue::from_str(host) else {
        return;
    };
    let original = match parts.uri.authority() {
        Some(a) => Some(a.as_str().to_owned()),
        None => parts
            .headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned),
    };
    if let (true, Some(o)) = (append_forwarded, original) {
        let list = parts
            .headers
            .get(X_FORWARDED_HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if list.rsplit(',').next().map(str::trim) != Some(o.as_str()) {
            let joined = if list.is_empty() {
                o
            } else {
                format!("{list},{o}")
            };
            if let Ok(v) = HeaderValue::from_str(&joined) {
                parts.headers.insert(X_FORWARDED_HOST, v);
            }
        }
    }
    if parts.uri.authority().is_some() {
        if let Ok(a) = Authority::try_from(host) {
            let mut p = std::mem::take(&mut parts.uri).into_parts();
            p.authority = Some(a);
            parts.uri = Uri::from_parts(p).unwrap_or_default();
        }
    }
    parts.headers.insert(HOST, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(pattern: &str, replacement: &str) -> RegexRewrite {
        RegexRewrite {
            pattern: regex::Regex::new(pattern).unwrap(),
            substitution: String::new(),
            replacement: replacement.to_owned(),
        }
    }

    #[test]
    fn prefix_then_regex() {
        assert_eq!(
            rewritten("/app/x?q=1", Some("/v2"), None, Some("/app")).as_deref(),
            Some("/v2/x?q=1")
        );
        assert_eq!(rewritten("/app", Some("/"), None, None), None);
        // The query is kept out of the match and put back.
        let full = re("^/.*$", "/full");
        assert_eq!(
            rewritten("/a/b?x=/y", None, Some(&full), None).as_deref(),
            Some("/full?x=/y")
        );
        let groups = re("^/svc/([^/]+)/", "/${1}/");
        assert_eq!(
            rewritten("/svc/a/b", None, Some(&groups), None).as_deref(),
            Some("/a/b")
        );
    }

    #[test]
    fn authority_in_uri_and_host() {
        let (mut p, ()) = http::Request::get("https://a.example:8443/x")
            .body(())
            .unwrap()
            .into_parts();
        set_authority(&mut p, "b.example", true);
        assert_eq!(p.uri.to_string(), "https://b.example/x");
        assert_eq!(p.headers[HOST], "b.example");
        assert_eq!(p.headers[X_FORWARDED_HOST], "a.example:8443");
        set_authority(&mut p, "c.example", true);
        assert_eq!(p.headers[X_FORWARDED_HOST], "a.example:8443,b.example");
    }
}
