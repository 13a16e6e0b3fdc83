//! The protocol state's tests: ACK, NACK and subscriptions in both stream kinds, and updates
//! taken resource by resource.

use super::*;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use prost::Message;

fn cluster(name: &str, eds: bool) -> (Option<String>, String, String, Vec<u8>) {
    let mut c = Cluster {
        name: name.into(),
        ..Default::default()
    };
    if eds {
        c.cluster_discovery_type = Some(
            envoy_types::pb::envoy::config::cluster::v3::cluster::ClusterDiscoveryType::Type(3),
        );
    }
    (
        None,
        String::new(),
        Kind::Cluster.type_url().into(),
        c.encode_to_vec(),
    )
}

fn response(
    kind: Kind,
    version: &str,
    nonce: &str,
    resources: Vec<(Option<String>, String, String, Vec<u8>)>,
) -> Incoming {
    Incoming {
        type_url: kind.type_url().into(),
        version_info: version.into(),
        nonce: nonce.into(),
        resources,
        removed: Vec::new(),
    }
}

#[test]
fn sotw_acks_nacks_and_follows_eds_names() {
    let mut s = Stream::new(false, &Kind::ALL, Source::Ads);
    let mut res = Resources::new();
    let first = s.connected(&res);
    let kinds: Vec<_> = first.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        [Some(Kind::Cluster), Some(Kind::Listener)],
        "wildcards first, in warming order"
    );
    let (out, v) = s.respond(
        response(
            Kind::Cluster,
            "1",
            "n1",
            vec![cluster("a", true), cluster("b", false)],
        ),
        &mut res,
        &mut |_| Ok(()),
    );
    assert!(matches!(v, Verdict::Accepted { .. }));
    assert_eq!(
        (
            out[0].version_info.as_str(),
            out[0].nonce.as_str(),
            &out[0].error
        ),
        ("1", "n1", &None)
    );
    // The EDS cluster makes an EDS subscription for its name.
    assert_eq!(out[1].kind, Some(Kind::Endpoint));
    assert_eq!(out[1].resource_names, ["a"]);
    // An update whose one new cluster is refused: NACK with the last accepted version; the
    // refused cluster is left out, the others stay.
    let (out, v) = s.respond(
        response(
            Kind::Cluster,
            "2",
            "n2",
            vec![cluster("a", true), cluster("b", false), cluster("c", false)],
        ),
        &mut res,
        &mut |r| match r[&Kind::Cluster].contains_key("c") {
            true => Err(Refused::one(Kind::Cluster, "c", "bad")),
            false => Ok(()),
        },
    );
    assert!(matches!(v, Verdict::Partial { .. }));
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].version_info.as_str(), out[0].nonce.as_str()),
        ("1", "n2")
    );
    assert!(out[0].error.as_deref().unwrap().contains("cluster(s) c"));
    assert_eq!(res[&Kind::Cluster].keys().collect::<Vec<_>>(), ["a", "b"]);
    // Reconnect: the last accepted version goes with the first request.
    let again = s.connected(&res);
    assert_eq!(again[0].version_info, "1");
    assert_eq!(again[1].kind, Some(Kind::Endpoint));
}

#[test]
fn delta_subscribes_removes_and_resumes_with_versions() {
    let mut s = Stream::new(true, &Kind::ALL, Source::Ads);
    let mut res = Resources::new();
    s.connected(&res);
    let mut with_name = cluster("a", true);
    with_name.0 = Some("a".into());
    with_name.1 = "v7".into();
    let (out, _) = s.respond(
        response(Kind::Cluster, "", "n1", vec![with_name]),
        &mut res,
        &mut |_| Ok(()),
    );
    assert_eq!(out[1].subscribe, ["a"]);
    let mut removal = response(Kind::Cluster, "", "n2", Vec::new());
    removal.removed = vec!["a".into()];
    let (out, _) = s.respond(removal, &mut res, &mut |_| Ok(()));
    assert!(res[&Kind::Cluster].is_empty());
    assert_eq!(out[1].unsubscribe, ["a"]);
    // initial_resource_versions on reconnect.
    let l = Listener {
        name: "l".into(),
        ..Default::default()
    };
    let item = (
        Some("l".to_owned()),
        "v3".to_owned(),
        Kind::Listener.type_url().to_owned(),
        l.encode_to_vec(),
    );
    s.respond(
        response(Kind::Listener, "", "n3", vec![item]),
        &mut res,
        &mut |_| Ok(()),
    );
    let again = s.connected(&res);
    let lds = again
        .iter()
        .find(|o| o.kind == Some(Kind::Listener))
        .unwrap();
    assert_eq!(
        lds.initial_versions.get("l").map(String::as_str),
        Some("v3")
    );
}

#[test]
fn a_response_of_another_type_is_nacked() {
    let mut s = Stream::new(false, &Kind::ALL, Source::Ads);
    let mut res = Resources::new();
    let mut r = response(Kind::Cluster, "1", "n", vec![cluster("a", false)]);
    r.resources[0].2 = Kind::Listener.type_url().into();
    let (out, _) = s.respond(r, &mut res, &mut |_| Ok(()));
    assert!(out[0]
        .error
        .as_deref()
        .unwrap()
        .contains("holds a resource of type"));
}

/// A sink that refuses every EDS cluster named `bad*`, naming a field.
fn refuse_bad(r: &Resources) -> Result<(), Refused> {
    let faults: Vec<_> = r
        .get(&Kind::Cluster)
        .into_iter()
        .flatten()
        .filter(|(n, e)| n.starts_with("bad") && e.json.get("type").is_some())
        .map(|(n, _)| crate::Fault::new(Kind::Cluster, n.clone(), "connect_timeout: must be > 0"))
        .collect();
    match faults.is_empty() {
        true => Ok(()),
        false => Err(Refused(faults)),
    }
}

fn named(name: &str, version: &str, eds: bool) -> (Option<String>, String, String, Vec<u8>) {
    let mut c = cluster(name, eds);
    c.0 = Some(name.into());
    c.1 = version.into();
    c
}

#[test]
fn delta_takes_the_valid_resources_of_a_refused_update() {
    let mut s = Stream::new(true, &Kind::ALL, Source::Ads);
    let mut res = Resources::new();
    s.connected(&res);
    let (out, v) = s.respond(
        response(
            Kind::Cluster,
            "",
            "n1",
            vec![named("a", "v1", true), named("bad", "v1", true)],
        ),
        &mut res,
        &mut refuse_bad,
    );
    let Verdict::Partial {
        message, applied, ..
    } = v
    else {
        panic!("a partial verdict: {v:?}");
    };
    assert!(applied);
    assert_eq!(
        message,
        "Error adding/updating cluster(s) bad: connect_timeout: must be > 0"
    );
    assert_eq!(out[0].nonce, "n1");
    assert_eq!(out[0].error.as_deref(), Some(message.as_str()));
    assert_eq!(res[&Kind::Cluster].keys().collect::<Vec<_>>(), ["a"]);
    // The valid cluster's endpoints are asked for; the refused one's are not.
    assert_eq!(out[1].kind, Some(Kind::Endpoint));
    assert_eq!(out[1].subscribe, ["a"]);
    // Reconnecting, the stream says it has `a` at v1 and nothing of `bad`, so a control plane
    // that resends only what changed still sends `bad` again.
    let again = s.connected(&res);
    let cds = again
        .iter()
        .find(|o| o.kind == Some(Kind::Cluster))
        .unwrap();
    assert_eq!(
        cds.initial_versions.iter().collect::<Vec<_>>(),
        [(&"a".to_owned(), &"v1".to_owned())]
    );
    // The fixed resource, alone in the next update, is taken; `a` stays.
    let (out, v) = s.respond(
        response(Kind::Cluster, "", "n2", vec![named("fixed", "v2", false)]),
        &mut res,
        &mut refuse_bad,
    );
    assert!(matches!(v, Verdict::Accepted { .. }), "{v:?}");
    assert_eq!(out[0].error, None);
    assert_eq!(
        res[&Kind::Cluster].keys().collect::<Vec<_>>(),
        ["a", "fixed"]
    );
}

#[test]
fn sotw_keeps_the_previous_version_of_a_refused_resource_and_names_duplicates() {
    let mut s = Stream::new(false, &Kind::ALL, Source::Ads);
    let mut res = Resources::new();
    s.connected(&res);
    s.respond(
        response(Kind::Cluster, "1", "n1", vec![cluster("bad-later", false)]),
        &mut res,
        &mut |_| Ok(()),
    );
    // v2 replaces `bad-later` with a version the sink refuses, adds `a` twice.
    let (out, v) = s.respond(
        response(
            Kind::Cluster,
            "2",
            "n2",
            vec![
                cluster("bad-later", true),
                cluster("a", false),
                cluster("a", true),
            ],
        ),
        &mut res,
        &mut refuse_bad,
    );
    assert!(matches!(v, Verdict::Partial { applied: true, .. }), "{v:?}");
    let message = out[0].error.clone().unwrap_or_default();
    assert_eq!(
        message,
        "Error adding/updating cluster(s) a: duplicate cluster a found, \
         bad-later: connect_timeout: must be > 0"
    );
    assert_eq!(
        out[0].version_info, "1",
        "the NACK carries the last version taken whole"
    );
    let kept = &res[&Kind::Cluster];
    assert_eq!(kept.keys().collect::<Vec<_>>(), ["a", "bad-later"]);
    assert_eq!(
        kept["bad-later"].version, "1",
        "the previous version serves"
    );
    assert_eq!(kept["a"].json.get("type"), None, "the first `a` is taken");
}

/// A listener naming a filter type quickshake's descriptors do not have cannot be decoded: it
/// is refused alone, named in the NACK, and the other listener of the update is taken (Envoy
/// refuses such a listener the same way: no registered implementation for its type).
#[test]
fn a_resource_that_does_not_decode_is_refused_alone() {
    use envoy_types::pb::envoy::config::listener::v3::{filter, Filter, FilterChain};
    use envoy_types::pb::google::protobuf::Any;
    let listener = |name: &str, filter_type: Option<&str>| {
        let mut l = Listener {
            name: name.into(),
            ..Default::default()
        };
        if let Some(t) = filter_type {
            l.filter_chains = vec![FilterChain {
                filters: vec![Filter {
                    name: "unknown".into(),
                    config_type: Some(filter::ConfigType::TypedConfig(Any {
                        type_url: format!("type.googleapis.com/{t}"),
                        value: vec![8, 1],
                    })),
                }],
                ..Default::default()
            }];
        }
        (
            None,
            String::new(),
            Kind::Listener.type_url().to_owned(),
            l.encode_to_vec(),
        )
    };
    for delta in [false, true] {
        let mut s = Stream::new(delta, &Kind::ALL, Source::Ads);
        let mut res = Resources::new();
        s.connected(&res);
        let (_, v) = s.respond(
            response(Kind::Listener, "1", "n1", vec![listener("old", None)]),
            &mut res,
            &mut |_| Ok(()),
        );
        assert!(matches!(v, Verdict::Accepted { .. }), "{v:?}");
        let (out, v) = s.respond(
            response(
                Kind::Listener,
                "2",
                "n2",
                vec![
                    listener("old", Some("no.such.Filter")),
                    listener("new", None),
                ],
            ),
            &mut res,
            &mut |_| Ok(()),
        );
        assert!(matches!(v, Verdict::Partial { applied: true, .. }), "{v:?}");
        let message = out[0].error.clone().unwrap_or_default();
        assert!(
            message.starts_with("Error adding/updating listener(s) old: cannot decode")
                && message.contains("no.such.Filter"),
            "{message}"
        );
        let kept = &res[&Kind::Listener];
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            ["new", "old"],
            "delta {delta}"
        );
        assert!(
            kept["old"].json.get("filter_chains").is_none(),
            "the accepted version of `old` serves"
        );
    }
}
