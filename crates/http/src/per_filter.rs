//! A route's `typed_per_filter_config`: the most specific entry for a filter (route, then
//! virtual host, then route configuration), and whether it disables the filter.

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

/// Whether the most specific entry disables the filter (`FilterConfig.disabled`).
pub(crate) fn disabled(name: &str, route: Option<(&Route, &VirtualHost, &RouteConfig)>) -> bool {
    route.is_some_and(|r| matches!(most_specific(name, r), Some(PerFilterConfig::Disabled)))
}
