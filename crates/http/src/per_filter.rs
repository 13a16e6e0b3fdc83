//! A route's `typed_per_filter_config`: the most specific entry for a filter (route, then
//! virtual host, then route configuration), and whether it disables the filter or enables one
//! installed `disabled`.

use quickshake_config::{PerFilterConfig, PerFilterConfigs, Route, RouteConfig, VirtualHost};

/// The entry of one level for the filter named `name`.
pub(crate) fn lookup<'a>(level: &'a PerFilterConfigs, name: &str) -> Option<&'a PerFilterConfig> {
    level.iter().find(|(n, _)| n == name).map(|(_, c)| c)
}

/// The most specific entry for the filter named `name`.
pub(crate) fn most_specific<'a>(
    name: &str,
    (route, vh, rc): (&'a Route, &'a VirtualHost, &'a RouteConfig),
) -> Option<&'a PerFilterConfig> {
    [&route.per_filter, &vh.per_filter, &rc.per_filter]
        .into_iter()
        .find_map(|level| lookup(level, name))
}

/// Whether the filter named `name` does not run for this request, as Envoy decides: the most
/// specific entry for it disables it (`FilterConfig.disabled`) or enables it (any other entry:
/// the filter's own per-route config, or `FilterConfig` with `disabled: false`); with none,
/// `disabled_by_default` (the filter's `disabled` in `http_filters`) decides.
pub(crate) fn skipped(
    name: &str,
    disabled_by_default: bool,
    route: Option<(&Route, &VirtualHost, &RouteConfig)>,
) -> bool {
    match route.and_then(|r| most_specific(name, r)) {
        Some(PerFilterConfig::Disabled) => true,
        Some(_) => false,
        None => disabled_by_default,
    }
}
