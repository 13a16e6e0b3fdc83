//! Applying a route's header mutations: route level first, then the virtual host's, then the
//! route configuration's (Envoy's default order, so the least specific level has the last
//! word). At each level removals go first, then additions by their `append_action`.

use http::header::{HeaderMap, HeaderName, HeaderValue};
use quickshake_config::{AppendAction, HeaderAdd, HeaderMutations};

/// Request or response side.
#[derive(Clone, Copy)]
pub(crate) enum Side {
    Request,
    Response,
}

/// Apply `levels` (most specific first) to `headers`.
pub(crate) fn apply(headers: &mut HeaderMap, levels: &[&HeaderMutations], side: Side) {
    for m in levels {
        let (adds, removes) = match side {
            Side::Request => (&m.request_add, &m.request_remove),
            Side::Response => (&m.response_add, &m.response_remove),
        };
        for name in removes {
            headers.remove(name.as_str());
        }
        for add in adds {
            add_one(headers, add);
        }
    }
}

fn add_one(headers: &mut HeaderMap, add: &HeaderAdd) {
    if add.value.is_empty() && !add.keep_empty_value {
        return;
    }
    // Names and values were checked when the configuration was parsed.
    let (Ok(name), Ok(value)) = (
        HeaderName::from_bytes(add.name.as_bytes()),
        HeaderValue::from_str(&add.value),
    ) else {
        return;
    };
    let present = headers.contains_key(&name);
    match add.action {
        AppendAction::AppendIfExistsOrAdd => {
            headers.append(name, value);
        }
        AppendAction::AddIfAbsent => {
            if !present {
                headers.insert(name, value);
            }
        }
        AppendAction::OverwriteIfExistsOrAdd => {
            headers.insert(name, value);
        }
        AppendAction::OverwriteIfExists => {
            if present {
                headers.insert(name, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(name: &str, value: &str, action: AppendAction) -> HeaderAdd {
        HeaderAdd {
            name: name.into(),
            value: value.into(),
            action,
            keep_empty_value: false,
        }
    }

    #[test]
    fn actions_and_order() {
        let mut h = HeaderMap::new();
        h.insert("x-a", HeaderValue::from_static("old"));
        h.insert("x-gone", HeaderValue::from_static("1"));
        let route = HeaderMutations {
            response_add: vec![
                add("x-a", "route", AppendAction::AppendIfExistsOrAdd),
                add("x-b", "route", AppendAction::AddIfAbsent),
                add("x-c", "route", AppendAction::OverwriteIfExists),
            ],
            response_remove: vec!["x-gone".into()],
            ..Default::default()
        };
        let config = HeaderMutations {
            response_add: vec![add("x-b", "config", AppendAction::OverwriteIfExistsOrAdd)],
            ..Default::default()
        };
        apply(&mut h, &[&route, &config], Side::Response);
        let all = |n: &str| {
            h.get_all(n)
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(all("x-a"), ["old", "route"]);
        assert_eq!(
            all("x-b"),
            ["config"],
            "the least specific level has the last word"
        );
        assert!(all("x-c").is_empty(), "OVERWRITE_IF_EXISTS adds nothing");
        assert!(all("x-gone").is_empty());
    }
}
