//! Envoy's matchers as they evaluate: `HeaderMatcher`, `StringMatcher` and a route's
//! `QueryParameterMatcher` (shared by routes, filters and certificate SAN checks).

/// Envoy's `HeaderMatcher` as it evaluates it: the request's values of `name` (several joined
/// with `,`) are tested by `rule`; the outcome is flipped by `invert_match`. A missing header
/// does not match unless `treat_missing_header_as_empty` (then it is tested as ""), except that
/// `present_match: false` matches it (and `present_match: true` with `invert_match`).
#[derive(Debug, Clone)]
pub struct HeaderMatcher {
    /// Lowercased; may be a pseudo-header (`:method`, `:path`, `:authority`, `:scheme`).
    pub name: String,
    pub rule: HeaderRule,
    pub invert_match: bool,
    pub treat_missing_header_as_empty: bool,
}

#[derive(Debug, Clone)]
pub enum HeaderRule {
    /// `present_match` (or no match specifier at all: present).
    Present(bool),
    /// `string_match`, or the legacy `exact_match` / `prefix_match` / `suffix_match` /
    /// `contains_match` / `safe_regex_match`.
    String(StringMatcher),
    /// Legacy `exact_match: ""`: any value matches.
    AnyValue,
    /// `range_match`: `start <= value < end` for an integer value.
    Range { start: i64, end: i64 },
}

/// Envoy's `StringMatcher`.
#[derive(Debug, Clone)]
pub struct StringMatcher {
    pub kind: StringMatch,
    /// `ignore_case` (ASCII; no effect on `safe_regex`).
    pub ignore_case: bool,
}

#[derive(Debug, Clone)]
pub enum StringMatch {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    /// `safe_regex.regex`, anchored: the whole value must match (RE2 semantics).
    Regex(regex::Regex),
}

/// A route's `match.query_parameters[]`: the parameter's first value as written (Envoy does
/// not percent-decode it for matching), as Envoy's `QueryParameterMatcher` sees it.
#[derive(Debug, Clone)]
pub struct QueryParameterMatcher {
    pub name: String,
    /// `string_match`; `None`: `present_match` (the parameter is there, any value).
    pub value: Option<StringMatcher>,
}

impl QueryParameterMatcher {
    /// Whether the parameter's first value in `query` (without the `?`) matches.
    pub fn matches(&self, query: &str) -> bool {
        let first = query
            .split('&')
            .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
            .find(|(k, _)| *k == self.name);
        match (first, &self.value) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some((_, v)), Some(m)) => m.matches(v),
        }
    }
}

impl StringMatcher {
    /// Whether `value` matches.
    pub fn matches(&self, value: &str) -> bool {
        let fold = |s: &str| {
            if self.ignore_case {
                s.to_ascii_lowercase()
            } else {
                s.to_owned()
            }
        };
        match &self.kind {
            StringMatch::Exact(e) => fold(value) == fold(e),
            StringMatch::Prefix(p) => fold(value).starts_with(&fold(p)),
            StringMatch::Suffix(s) => fold(value).ends_with(&fold(s)),
            StringMatch::Contains(c) => fold(value).contains(&fold(c)),
            StringMatch::Regex(r) => r.is_match(value),
        }
    }
}

impl HeaderMatcher {
    /// Envoy's `HeaderUtility::matchHeaders` for one matcher: `value` is the request's value of
    /// the header (several values joined with `,`), `None` when absent.
    pub fn matches(&self, value: Option<&str>) -> bool {
        let value = match value {
            Some(v) => v,
            None if self.treat_missing_header_as_empty => "",
            None => {
                let present = matches!(self.rule, HeaderRule::Present(true));
                let absent = matches!(self.rule, HeaderRule::Present(false));
                return if self.invert_match { present } else { absent };
            }
        };
        let m = match &self.rule {
            HeaderRule::Present(p) => *p,
            HeaderRule::String(s) => s.matches(value),
            HeaderRule::AnyValue => true,
            HeaderRule::Range { start, end } => {
                value.parse::<i64>().is_ok_and(|n| *start <= n && n < *end)
            }
        };
        m != self.invert_match
    }
}
