//! Header mutations as route configurations, virtual hosts, routes and HTTP filters (the local
//! rate limit's `response_headers_to_add`) configure them.

/// One level's `request_headers_to_add` / `_to_remove` and `response_headers_to_add` /
/// `_to_remove`. Names are lower case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderMutations {
    pub request_add: Vec<HeaderAdd>,
    pub request_remove: Vec<String>,
    pub response_add: Vec<HeaderAdd>,
    pub response_remove: Vec<String>,
}

impl HeaderMutations {
    pub fn is_empty(&self) -> bool {
        self.request_add.is_empty()
            && self.request_remove.is_empty()
            && self.response_add.is_empty()
            && self.response_remove.is_empty()
    }
}

/// Envoy's `HeaderValueOption` with a literal value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderAdd {
    pub name: String,
    pub value: String,
    pub action: AppendAction,
    /// `keep_empty_value`: an empty value is added rather than skipped.
    pub keep_empty_value: bool,
}

/// `append_action` (or the older `append`: true appends, false overwrites).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendAction {
    AppendIfExistsOrAdd,
    AddIfAbsent,
    OverwriteIfExistsOrAdd,
    OverwriteIfExists,
}
