//! A cluster's `load_balancing_policy`: the typed extension policies Envoy reads in order,
//! the first one quickshake implements winning (round robin, least request, ring hash,
//! Maglev), and the legacy `ring_hash_lb_config` / `maglev_lb_config`.

use crate::model::LbPolicy;
use crate::walk::{Node, Obj, Result};

const ROUND_ROBIN_POLICY: &str =
    "envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin";
const LEAST_REQUEST_POLICY: &str =
    "envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest";
const RING_HASH_POLICY: &str = "envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash";
const MAGLEV_POLICY: &str = "envoy.extensions.load_balancing_policies.maglev.v3.Maglev";

/// Envoy's ring size bounds (`RingHash` validation: at most 8M) and defaults.
const MAX_RING_SIZE: u64 = 8 * 1024 * 1024;
const DEFAULT_MIN_RING_SIZE: u64 = 1024;
/// Envoy's default Maglev table size, and its largest (`table_size` lte 5000011).
const DEFAULT_MAGLEV_TABLE_SIZE: u64 = 65537;
const MAX_MAGLEV_TABLE_SIZE: u64 = 5_000_011;

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
            RING_HASH_POLICY => {
                let ro = tc.typed(
                    &format!("type.googleapis.com/{RING_HASH_POLICY}"),
                    &[
                        "hash_function",
                        "minimum_ring_size",
                        "maximum_ring_size",
                        "consistent_hashing_lb_config",
                        "locality_weighted_lb_config",
                        "use_hostname_for_hashing",
                        "hash_balance_factor",
                    ],
                    &[],
                )?;
                consistent_hashing(&ro)?;
                ring_hash(&ro, true)?
            }
            MAGLEV_POLICY => {
                let mo = tc.typed(
                    &format!("type.googleapis.com/{MAGLEV_POLICY}"),
                    &[
                        "table_size",
                        "consistent_hashing_lb_config",
                        "locality_weighted_lb_config",
                    ],
                    &[],
                )?;
                consistent_hashing(&mo)?;
                maglev(&mo)?
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
            Some("only envoy.load_balancing_policies.round_robin, least_request, ring_hash and maglev"),
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

/// Ring hash settings (`RingHash` or the legacy `ring_hash_lb_config`): `hash_function`
/// XX_HASH only, `minimum_ring_size` <= `maximum_ring_size` <= 8M.
pub(crate) fn ring_hash(o: &Obj<'_>, typed: bool) -> Result<LbPolicy> {
    if let Some(f) = o.get("hash_function") {
        // RingHash: DEFAULT_HASH (= XX_HASH), XX_HASH, MURMUR_HASH_2; legacy: XX_HASH, MURMUR_HASH_2.
        let names: &[&str] = if typed {
            &["DEFAULT_HASH", "XX_HASH", "MURMUR_HASH_2"]
        } else {
            &["XX_HASH", "MURMUR_HASH_2"]
        };
        if names[f.enum_index(names)?] == "MURMUR_HASH_2" {
            return Err(f.unsupported(Some("only XX_HASH")));
        }
    }
    let size = |key: &str, default: u64| match o.get(key) {
        Some(n) => n.as_u64_in(1, MAX_RING_SIZE),
        None => Ok(default),
    };
    let min_ring_size = size("minimum_ring_size", DEFAULT_MIN_RING_SIZE)?;
    let max_ring_size = size("maximum_ring_size", MAX_RING_SIZE)?;
    if min_ring_size > max_ring_size {
        return Err(crate::ConfigError::invalid(
            o.path.clone(),
            format!("minimum_ring_size ({min_ring_size}) > maximum_ring_size ({max_ring_size})"),
        ));
    }
    Ok(LbPolicy::RingHash {
        min_ring_size,
        max_ring_size,
    })
}

/// Maglev settings (`Maglev` or the legacy `maglev_lb_config`): `table_size` a prime.
pub(crate) fn maglev(o: &Obj<'_>) -> Result<LbPolicy> {
    let table_size = match o.get("table_size") {
        Some(n) => {
            let v = n.as_u64_in(2, MAX_MAGLEV_TABLE_SIZE)?;
            if !is_prime(v) {
                return Err(n.err(format!("must be a prime number, got {v}")));
            }
            v
        }
        None => DEFAULT_MAGLEV_TABLE_SIZE,
    };
    Ok(LbPolicy::Maglev { table_size })
}

/// `consistent_hashing_lb_config` (and RingHash's deprecated copies of its fields):
/// `use_hostname_for_hashing` false and no `hash_balance_factor` (bounded loads).
fn consistent_hashing(o: &Obj<'_>) -> Result<()> {
    // Accepted: quickshake balances over one locality.
    if let Some(w) = o.get("locality_weighted_lb_config") {
        w.obj(&[])?;
    }
    let mut objs = vec![];
    if let Some(c) = o.get("consistent_hashing_lb_config") {
        objs.push(c.obj(&["use_hostname_for_hashing", "hash_balance_factor"])?);
    }
    for co in objs.iter().chain(std::iter::once(o)) {
        if let Some(h) = co.get("use_hostname_for_hashing") {
            if h.as_bool()? {
                return Err(h.unsupported(Some("hosts are hashed by address")));
            }
        }
        if let Some(f) = co.get("hash_balance_factor") {
            if f.as_u64()? != 0 {
                return Err(f.unsupported(Some("bounded-load consistent hashing")));
            }
        }
    }
    Ok(())
}

fn is_prime(n: u64) -> bool {
    n >= 2
        && (2..)
            .take_while(|d| d * d <= n)
            .all(|d| !n.is_multiple_of(d))
}
