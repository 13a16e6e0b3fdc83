//! Envoy's request path normalization, applied before routing and forwarded as is: escaped
//! slashes (`path_with_escaped_slashes_action`) first, then RFC 3986 normalization
//! (`normalize_path`), then `merge_slashes`. The query is left alone. Pure functions, no I/O.

use quickshake_config::{EscapedSlashesAction, PathNormalization};

/// What to do with a request after normalization.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Normalized {
    /// Carry on with this `:path` (path and query), changed or not.
    Continue(String),
    /// `UNESCAPE_AND_REDIRECT` found escaped slashes: answer 307 to this `:path`.
    Redirect(String),
    /// `REJECT_REQUEST` found escaped slashes: answer 400.
    Reject,
}

/// Normalize `path_and_query` (an origin-form `:path`) as `cfg` says.
pub(crate) fn normalize(path_and_query: &str, cfg: &PathNormalization) -> Normalized {
    let (path, query) = match path_and_query.find('?') {
        Some(i) => path_and_query.split_at(i),
        None => (path_and_query, ""),
    };
    if !path.starts_with('/') {
        return Normalized::Continue(path_and_query.to_owned());
    }
    let mut path = path.to_owned();
    let mut redirect = false;
    if cfg.escaped_slashes != EscapedSlashesAction::KeepUnchanged {
        if let Some(unescaped) = unescape_slashes(&path) {
            match cfg.escaped_slashes {
                EscapedSlashesAction::RejectRequest => return Normalized::Reject,
                EscapedSlashesAction::UnescapeAndRedirect => redirect = true,
                _ => {}
            }
            path = unescaped;
        }
    }
    if cfg.normalize_path {
        path = canonical_path(&path);
    }
    if cfg.merge_slashes {
        path = merge_slashes(&path);
    }
    let out = path + query;
    if redirect {
        Normalized::Redirect(out)
    } else {
        Normalized::Continue(out)
    }
}

/// `%2F`/`%2f` to `/` and `%5C`/`%5c` to `\`; `None` when there were none.
fn unescape_slashes(path: &str) -> Option<String> {
    let b = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut found = false;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let code = [b[i + 1].to_ascii_uppercase(), b[i + 2].to_ascii_uppercase()];
            let c = match &code {
                b"2F" => Some('/'),
                b"5C" => Some('\\'),
                _ => None,
            };
            if let Some(c) = c {
                out.push(c);
                found = true;
                i += 3;
                continue;
            }
        }
        let ch_len = utf8_len(b[i]);
        out.push_str(&path[i..(i + ch_len).min(path.len())]);
        i += ch_len;
    }
    found.then_some(out)
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// RFC 3986 section 6.2.2 normalization of an absolute path: percent-encoded unreserved
/// characters decoded, other percent-encodings in upper case, `\` as `/` (as Envoy's URL
/// library reads it), and dot segments removed (section 5.2.4; `..` never climbs above `/`).
fn canonical_path(path: &str) -> String {
    let b = path.as_bytes();
    let mut decoded = String::with_capacity(path.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                let v = h * 16 + l;
                if v.is_ascii_alphanumeric() || matches!(v, b'-' | b'.' | b'_' | b'~') {
                    decoded.push(char::from(v));
                } else {
                    decoded.push('%');
                    decoded.push(char::from(b[i + 1].to_ascii_uppercase()));
                    decoded.push(char::from(b[i + 2].to_ascii_uppercase()));
                }
                i += 3;
                continue;
            }
        }
        if c == b'\\' {
            decoded.push('/');
            i += 1;
            continue;
        }
        let n = utf8_len(c).min(b.len() - i);
        decoded.push_str(&path[i..i + n]);
        i += n;
    }
    remove_dot_segments(&decoded)
}

fn hex(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// RFC 3986 section 5.2.4 for a path starting with `/`.
fn remove_dot_segments(path: &str) -> String {
    let segs: Vec<&str> = path[1..].split('/').collect();
    let mut out: Vec<&str> = Vec::with_capacity(segs.len());
    let last = segs.len().saturating_sub(1);
    for (i, s) in segs.iter().enumerate() {
        match *s {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                out.pop();
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

/// Runs of `/` become one.
fn merge_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(
        normalize_path: bool,
        merge_slashes: bool,
        a: EscapedSlashesAction,
    ) -> PathNormalization {
        PathNormalization {
            normalize_path,
            merge_slashes,
            escaped_slashes: a,
        }
    }

    fn go(p: &str, c: &PathNormalization) -> Normalized {
        normalize(p, c)
    }

    fn cont(s: &str) -> Normalized {
        Normalized::Continue(s.to_owned())
    }

    #[test]
    fn rfc3986() {
        let c = cfg(true, false, EscapedSlashesAction::KeepUnchanged);
        assert_eq!(go("/a/b/../c", &c), cont("/a/c"));
        assert_eq!(go("/a/./b/.", &c), cont("/a/b/"));
        assert_eq!(go("/../../x", &c), cont("/x"));
        assert_eq!(go("/a/..", &c), cont("/"));
        assert_eq!(go("/%7euser/%41%2e%2E/b", &c), cont("/~user/A../b"));
        assert_eq!(go("/a/%2e%2E/b", &c), cont("/b"));
        assert_eq!(go("/a%2fb%3a?q=/../x", &c), cont("/a%2Fb%3A?q=/../x"));
        assert_eq!(go("/a\\b", &c), cont("/a/b"));
        assert_eq!(go("/a//b", &c), cont("/a//b"));
        assert_eq!(go("/caf%C3%A9/é", &c), cont("/caf%C3%A9/é"));
        assert_eq!(go("/trail%", &c), cont("/trail%"));
        assert_eq!(go("*", &c), cont("*"));
    }

    #[test]
    fn merge() {
        let c = cfg(false, true, EscapedSlashesAction::KeepUnchanged);
        assert_eq!(go("//a///b/?x=//", &c), cont("/a/b/?x=//"));
        let both = cfg(true, true, EscapedSlashesAction::KeepUnchanged);
        // Normalization runs before merging, as in Envoy.
        assert_eq!(go("//a/.//../b", &both), cont("/a/b"));
    }

    #[test]
    fn escaped_slashes() {
        let keep = cfg(false, false, EscapedSlashesAction::KeepUnchanged);
        assert_eq!(go("/a%2Fb", &keep), cont("/a%2Fb"));
        let fwd = cfg(false, false, EscapedSlashesAction::UnescapeAndForward);
        assert_eq!(go("/a%2fb%5Cc", &fwd), cont("/a/b\\c"));
        let rej = cfg(false, false, EscapedSlashesAction::RejectRequest);
        assert_eq!(go("/a%2Fb", &rej), Normalized::Reject);
        assert_eq!(go("/a/b", &rej), cont("/a/b"));
        // Envoy Gateway's rendering: the redirect goes to the fully normalized path.
        let eg = cfg(true, true, EscapedSlashesAction::UnescapeAndRedirect);
        assert_eq!(
            go("/a%2F%2Fb/..%5Cc?q", &eg),
            Normalized::Redirect("/a/c?q".to_owned())
        );
        assert_eq!(go("/a//b", &eg), cont("/a/b"));
        assert_eq!(go("/a%2", &eg), cont("/a%2"));
    }
}
