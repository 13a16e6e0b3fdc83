//! Per-resource acceptance, as Envoy's LDS and CDS do it: of one update, every resource the
//! data path can serve is applied; each one it cannot keeps its previously accepted version
//! (or stays absent if it was new) and is named in the NACK with its reason. RDS, EDS and SDS
//! updates follow the same rule, so an invalid resource never removes or replaces one that was
//! accepted before.
//!
//! Pure: [`settle`] is given the current and candidate resources and the caller's `apply`, and
//! decides what to keep; it does no I/O of its own.

use std::collections::BTreeSet;
use std::fmt;

use crate::kind::Kind;
use crate::resources::{Resources, SinkError};

/// One resource the data path cannot serve, and why (the reason names the field path).
#[derive(Debug)]
pub struct Fault {
    pub kind: Kind,
    pub name: String,
    pub reason: SinkError,
    /// The resources it was built from (a listener's route configurations and secrets): when
    /// the update holds one of them and not this resource, that one is refused (a secret whose
    /// certificate does not load, named in an SDS update's NACK).
    pub built_from: Vec<(Kind, String)>,
}

impl Fault {
    pub fn new(kind: Kind, name: impl Into<String>, reason: impl Into<SinkError>) -> Self {
        Fault {
            kind,
            name: name.into(),
            reason: reason.into(),
            built_from: Vec::new(),
        }
    }

    /// The fault, knowing the resources its own was built from.
    pub fn built_from(mut self, from: Vec<(Kind, String)>) -> Self {
        self.built_from = from;
        self
    }

    /// The resources of an update of `kind` touching `touched` this fault refuses (none
    /// reverted yet): its own, or else those it was built from, each named with why.
    fn blame(self, kind: Kind, touched: &BTreeSet<String>, reverted: &BTreeSet<String>) -> Blame {
        let open = |k: Kind, n: &String| k == kind && touched.contains(n) && !reverted.contains(n);
        if open(self.kind, &self.name) {
            return Blame::Update(vec![self]);
        }
        let via: Vec<Fault> = self
            .built_from
            .iter()
            .filter(|(k, n)| open(*k, n))
            .map(|(k, n)| {
                let why = Via {
                    what: format!("{} '{}'", self.kind.noun(), self.name),
                    reason: self.reason.to_string(),
                };
                Fault::new(*k, n.clone(), why)
            })
            .collect();
        match via.is_empty() {
            true => Blame::Outside(self),
            false => Blame::Update(via),
        }
    }
}

/// Where a fault lies: in resources of the update, or outside it.
enum Blame {
    Update(Vec<Fault>),
    Outside(Fault),
}

/// Why a resource of the update is refused when what cannot serve is a resource built from it.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {reason}")]
pub struct Via {
    what: String,
    reason: String,
}

/// What the data path refuses of a candidate set: every resource it cannot serve. Its
/// `Display` is the NACK's `error_detail`, in the words of Envoy's: listeners as
/// `Error adding/updating listener(s) NAME: REASON\n` (one line each, as `lds_api.cc` writes
/// them), the other kinds as `Error adding/updating cluster(s) NAME: REASON, NAME: REASON` (as
/// `cds_api_impl.cc` joins them).
#[derive(Debug, Default)]
pub struct Refused(pub Vec<Fault>);

impl Refused {
    pub fn one(kind: Kind, name: impl Into<String>, reason: impl Into<SinkError>) -> Self {
        Refused(vec![Fault::new(kind, name, reason)])
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<Kind> = Vec::new();
        for fault in &self.0 {
            if !kinds.contains(&fault.kind) {
                kinds.push(fault.kind);
            }
        }
        let mut ended_line = true;
        for kind in kinds {
            // Listener lines end with a newline (as Envoy writes them); other groups get one.
            if !ended_line {
                f.write_str("\n")?;
            }
            ended_line = kind == Kind::Listener;
            write!(f, "Error adding/updating {}(s) ", kind.noun())?;
            let mut first = true;
            for fault in self.0.iter().filter(|x| x.kind == kind) {
                if kind == Kind::Listener {
                    writeln!(f, "{}: {}", fault.name, fault.reason)?;
                } else {
                    if !first {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}: {}", fault.name, fault.reason)?;
                }
                first = false;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Refused {}

/// What became of one update.
#[derive(Debug)]
pub struct Settled {
    /// The resources accepted now: the candidate less what was refused (each refused resource
    /// at its previous version, or absent). `None`: nothing of the update was taken, because a
    /// resource outside it cannot serve with it.
    pub resources: Option<Resources>,
    /// What was refused (empty: an ACK).
    pub refused: Refused,
    /// Whether a resource of the update was added, replaced or removed.
    pub applied: bool,
}

/// Settle one update of `kind`: `candidate` is `current` with the update in, `touched` the
/// names it adds, replaces or removes, `refused` what was refused while reading it (a
/// duplicate). `apply` is tried on the candidate; each resource of the update it refuses is put
/// back to its `current` version (or left out) and `apply` is tried again, until it takes the
/// set. A refusal that names no resource of the update refuses the update whole, and `apply`
/// is given `current` again so the data path serves what was accepted.
pub fn settle(
    kind: Kind,
    current: &Resources,
    mut candidate: Resources,
    touched: &BTreeSet<String>,
    mut refused: Vec<Fault>,
    apply: &mut dyn FnMut(&Resources) -> Result<(), Refused>,
) -> Settled {
    let mut reverted = BTreeSet::new();
    loop {
        let faults = match apply(&candidate) {
            Ok(()) => {
                let applied = touched.iter().any(|n| {
                    !reverted.contains(n) && json(current, kind, n) != json(&candidate, kind, n)
                });
                return Settled {
                    resources: Some(candidate),
                    refused: Refused(refused),
                    applied,
                };
            }
            Err(Refused(faults)) => faults,
        };
        let mut ours: Vec<Fault> = Vec::new();
        let mut others = Vec::new();
        for f in faults {
            match f.blame(kind, touched, &reverted) {
                Blame::Update(mine) => {
                    for m in mine {
                        if !ours.iter().any(|o| o.name == m.name) {
                            ours.push(m);
                        }
                    }
                }
                Blame::Outside(f) => others.push(f),
            }
        }
        if ours.is_empty() {
            for f in others {
                if !refused.iter().any(|r| r.kind == f.kind && r.name == f.name) {
                    refused.push(f);
                }
            }
            // The sink may have put part of the candidate in place before it refused.
            let _ = apply(current);
            return Settled {
                resources: None,
                refused: Refused(refused),
                applied: false,
            };
        }
        for f in &ours {
            revert(&mut candidate, current, kind, &f.name);
            reverted.insert(f.name.clone());
        }
        refused.extend(ours);
    }
}

/// The JSON form of resource `name` of `kind` in `r`.
fn json<'r>(r: &'r Resources, kind: Kind, name: &str) -> Option<&'r serde_json::Value> {
    r.get(&kind).and_then(|m| m.get(name)).map(|e| &e.json)
}

/// Put resource `name` of `kind` in `candidate` back to its `current` version, or out.
fn revert(candidate: &mut Resources, current: &Resources, kind: Kind, name: &str) {
    let map = candidate.entry(kind).or_default();
    match current.get(&kind).and_then(|m| m.get(name)) {
        Some(e) => {
            map.insert(name.to_owned(), e.clone());
        }
        None => {
            map.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Entry;
    use serde_json::json;
    use std::time::SystemTime;

    fn entry(version: &str, valid: bool) -> Entry {
        Entry {
            version: version.into(),
            json: json!({ "valid": valid }),
            last_updated: SystemTime::now(),
        }
    }

    fn set(kind: Kind, items: &[(&str, &str, bool)]) -> Resources {
        let mut r = Resources::new();
        let m = r.entry(kind).or_default();
        for (name, version, valid) in items {
            m.insert((*name).to_owned(), entry(version, *valid));
        }
        r
    }

    /// A sink that refuses every resource whose JSON says `valid: false`, naming a field.
    fn validating(r: &Resources) -> Result<(), Refused> {
        let faults: Vec<Fault> = r
            .iter()
            .flat_map(|(k, m)| m.iter().map(move |(n, e)| (*k, n, e)))
            .filter(|(_, _, e)| e.json["valid"] == false)
            .map(|(k, n, _)| Fault::new(k, n.clone(), "filter_chains[0]: invalid"))
            .collect();
        if faults.is_empty() {
            Ok(())
        } else {
            Err(Refused(faults))
        }
    }

    fn names(r: &Resources, kind: Kind) -> Vec<(String, String)> {
        r[&kind]
            .iter()
            .map(|(n, e)| (n.clone(), e.version.clone()))
            .collect()
    }

    fn touched(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn valid_resources_apply_and_invalid_ones_keep_their_previous_version() {
        let current = set(
            Kind::Listener,
            &[("kept", "1", true), ("changed", "1", true)],
        );
        // The update: a new valid one, a new invalid one, an invalid replacement.
        let candidate = set(
            Kind::Listener,
            &[
                ("kept", "1", true),
                ("changed", "2", false),
                ("new", "2", true),
                ("broken", "2", false),
            ],
        );
        let mut calls = 0;
        let s = settle(
            Kind::Listener,
            &current,
            candidate,
            &touched(&["changed", "new", "broken"]),
            Vec::new(),
            &mut |r| {
                calls += 1;
                validating(r)
            },
        );
        let r = s.resources.expect("the valid part is taken");
        assert_eq!(
            names(&r, Kind::Listener),
            [
                ("changed".into(), "1".into()),
                ("kept".into(), "1".into()),
                ("new".into(), "2".into())
            ]
        );
        assert!(s.applied);
        assert_eq!(calls, 2, "one try, one with the refused resources put back");
        assert_eq!(
            s.refused.to_string(),
            "Error adding/updating listener(s) broken: filter_chains[0]: invalid\n\
             changed: filter_chains[0]: invalid\n"
        );
    }

    #[test]
    fn clusters_are_joined_as_envoy_joins_them() {
        let r = Refused(vec![
            Fault::new(
                Kind::Cluster,
                "c",
                "connect_timeout: must be greater than zero",
            ),
            Fault::new(Kind::Cluster, "d", "type: unknown"),
        ]);
        assert_eq!(
            r.to_string(),
            "Error adding/updating cluster(s) c: connect_timeout: must be greater than zero, \
             d: type: unknown"
        );
        // Kinds together (a refusal outside an update): one group a line.
        let r = Refused(vec![
            Fault::new(Kind::Cluster, "c", "x"),
            Fault::new(Kind::Listener, "l", "y"),
            Fault::new(Kind::Route, "r", "z"),
        ]);
        assert_eq!(
            r.to_string(),
            "Error adding/updating cluster(s) c: x\nError adding/updating listener(s) l: y\n\
             Error adding/updating route configuration(s) r: z"
        );
    }

    #[test]
    fn a_refusal_outside_the_update_refuses_it_whole_and_restores_the_sink() {
        let mut current = set(Kind::Listener, &[("l", "1", true)]);
        current.insert(
            Kind::Route,
            set(Kind::Route, &[("r", "1", true)])[&Kind::Route].clone(),
        );
        let mut candidate = current.clone();
        candidate
            .get_mut(&Kind::Route)
            .unwrap()
            .insert("r".into(), entry("2", true));
        let mut seen = Vec::new();
        let s = settle(
            Kind::Route,
            &current,
            candidate,
            &touched(&["r"]),
            Vec::new(),
            &mut |r| {
                let v = r[&Kind::Route]["r"].version.clone();
                seen.push(v.clone());
                if v == "2" {
                    Err(Refused::one(Kind::Listener, "l", "routes: unknown cluster"))
                } else {
                    Ok(())
                }
            },
        );
        assert!(s.resources.is_none());
        assert!(!s.applied);
        assert_eq!(seen, ["2", "1"], "the sink is given the accepted set back");
        assert!(s.refused.to_string().contains("listener(s) l: routes"));
    }

    #[test]
    fn a_listener_that_cannot_serve_with_a_new_secret_refuses_the_secret() {
        let mut current = set(Kind::Listener, &[("https", "1", true)]);
        current.insert(
            Kind::Secret,
            set(Kind::Secret, &[("cert", "1", true)])[&Kind::Secret].clone(),
        );
        let mut candidate = current.clone();
        if let Some(m) = candidate.get_mut(&Kind::Secret) {
            m.insert("cert".into(), entry("2", true));
        }
        let s = settle(
            Kind::Secret,
            &current,
            candidate,
            &touched(&["cert"]),
            Vec::new(),
            &mut |r| match r[&Kind::Secret]["cert"].version.as_str() {
                "2" => Err(Refused(vec![Fault::new(
                    Kind::Listener,
                    "https",
                    "filter_chains[0] (secret 'cert'): key does not match",
                )
                .built_from(vec![
                    (Kind::Route, "r".into()),
                    (Kind::Secret, "cert".into()),
                ])])),
                _ => Ok(()),
            },
        );
        let r = s.resources.expect("settled");
        assert_eq!(names(&r, Kind::Secret), [("cert".into(), "1".into())]);
        assert_eq!(
            s.refused.to_string(),
            "Error adding/updating secret(s) cert: listener 'https': filter_chains[0] \
             (secret 'cert'): key does not match"
        );
    }

    #[test]
    fn an_update_refused_entirely_keeps_everything_accepted() {
        let current = set(Kind::Route, &[("r", "1", true)]);
        let candidate = set(Kind::Route, &[("r", "2", false), ("s", "2", false)]);
        let s = settle(
            Kind::Route,
            &current,
            candidate,
            &touched(&["r", "s"]),
            Vec::new(),
            &mut validating,
        );
        let r = s.resources.expect("settled");
        assert_eq!(names(&r, Kind::Route), [("r".into(), "1".into())]);
        assert!(!s.applied);
        assert_eq!(s.refused.0.len(), 2);
        assert!(s
            .refused
            .to_string()
            .starts_with("Error adding/updating route configuration(s) r: "));
    }
}
