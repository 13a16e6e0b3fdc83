//! A cluster's `load_balancing_policy`: the typed extension policies Envoy reads in order,
//! the first one quickshake implements winning (round robin, least request).

use crate::model::LbPolicy;
use crate::walk::{Node, Obj, Result};

const ROUND_ROBIN_POLICY: &str =
    "envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin";
const LEAST_REQUEST_POLICY: &str =
    "envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest";

/// `load_balancing_policy.policies[]`: the first policy quickshake implements wins (Envoy takes
/// the first it knows); when there is none, the first policy is "not supported yet".
pub(crate) fn load_balancing_policy(node: &Node<'_>) -> Result<LbPolicy> {
    let o = node.obj(&["policies"])?;
    let policies = o.items("policies");
    let mut first_unsupported = None;
    for p in &policies {
        let po = p.obj(&["typed_extension_config"])?;
        let tec = po.req("typed_extension_config")?;
        let to = tec.obj(&["name", "typed_config"])?;
        to.opt_str("name")?;
        let tc = to.req("typed_config")?;
        let t = tc.type_url()?;
        let policy = match t.rsplit('/').next().unwrap_or(t) {
            ROUND_ROBIN_POLICY => {
                let ro = tc.typed(
                    &format!("type.googleapis.com/{ROUND_ROBIN_POLICY}"),
                    &["locality_lb_config"],
                    &["slow_start_config"],
                )?;
                locality_lb_config(&ro)?;
                LbPolicy::RoundRobin
            }
            LEAST_REQUEST_POLICY => {
                let lo = tc.typed(
                    &format!("type.googleapis.com/{LEAST_REQUEST_POLICY}"),
                    &["locality_lb_config", "choice_count"],
                    &[
                        "active_request_bias",
                        "slow_start_config",
                        "enable_full_scan",
                        "selection_method",
                    ],
                )?;
                locality_lb_config(&lo)?;
                if let Some(c) = lo.get("choice_count") {
                    if c.as_u64_in(2, u64::from(u32::MAX))? != 2 {
                        return Err(c.unsupported(Some("only 2 choices")));
                    }
                }
                LbPolicy::LeastRequest
            }
            _ => {
                first_unsupported.get_or_insert_with(|| tc.path.clone() + ".@type");
                continue;
            }
        };
        return Ok(policy);
    }
    Err(match first_unsupported {
        Some(at) => crate::ConfigError::unsupported(
            at,
            Some("only envoy.load_balancing_policies.round_robin and least_request"),
        ),
        None => o.missing("policies"),
    })
}

/// `locality_lb_config` (accepted: quickshake balances over one locality).
fn locality_lb_config(o: &Obj<'_>) -> Result<()> {
    if let Some(l) = o.get("locality_lb_config") {
        let lo = l.obj(&["zone_aware_lb_config", "locality_weighted_lb_config"])?;
        if let Some(z) = lo.get("zone_aware_lb_config") {
            let zo = z.obj(&[
                "routing_enabled",
                "min_cluster_size",
                "fail_traffic_on_panic",
            ])?;
            if let Some(m) = zo.get("min_cluster_size") {
                m.as_u64()?;
            }
            zo.opt_bool("fail_traffic_on_panic")?;
        }
        if let Some(w) = lo.get("locality_weighted_lb_config") {
            w.obj(&[])?;
        }
    }
    Ok(())
}
