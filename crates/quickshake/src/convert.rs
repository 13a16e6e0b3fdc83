//! `quickshake convert`: Istio's private key provider knob into quickshake's configuration.
//!
//! Istio users set `privateKeyProvider: {cryptomb: {pollDelay: 10ms}}` (or `qat`) in
//! `meshConfig.defaultConfig`, a `ProxyConfig`, or a pod's `proxy.istio.io/config` annotation
//! (a YAML string). This finds every such setting in the input (all YAML documents, inside
//! annotation strings too) and prints the matching `private_key_provider` block, with
//! `fallback` as Istio sets it (Istio's default: false). Pure text in, text out.

use serde_yaml::Value;

const ANNOTATION: &str = "proxy.istio.io/config";

/// One `privateKeyProvider` found, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub location: String,
    pub provider: String,
    pub poll_delay: Option<String>,
    pub fallback: bool,
}

/// Why the input cannot be converted; each names where (`document 1.metadata...`).
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// A document, or an annotation's YAML string, does not parse.
    #[error("{at}: {source}")]
    Yaml {
        at: String,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("{0}: expected a YAML string")]
    AnnotationNotString(String),
    #[error("{0}: expected a mapping")]
    NotMapping(String),
    #[error("{0}: empty (expected cryptomb or qat)")]
    Empty(String),
    #[error("{0}: unknown provider (Istio has cryptomb and qat)")]
    UnknownProvider(String),
    #[error("{0}.fallback: expected true or false")]
    Fallback(String),
}

/// Find every `privateKeyProvider` in a YAML text (several documents allowed).
pub fn find(text: &str) -> Result<Vec<Found>, ConvertError> {
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let at = format!("document {}", i + 1);
        let v: Value = match serde::Deserialize::deserialize(doc) {
            Ok(v) => v,
            Err(source) => return Err(ConvertError::Yaml { at, source }),
        };
        walk(&v, &at, &mut out)?;
    }
    Ok(out)
}

fn walk(v: &Value, at: &str, out: &mut Vec<Found>) -> Result<(), ConvertError> {
    match v {
        Value::Mapping(m) => {
            for (k, child) in m {
                let key = k.as_str().unwrap_or("?");
                let here = format!("{at}.{key}");
                if key == "privateKeyProvider" {
                    out.push(provider(child, &here)?);
                } else if key == ANNOTATION {
                    let text = child
                        .as_str()
                        .ok_or_else(|| ConvertError::AnnotationNotString(here.clone()))?;
                    let inner: Value =
                        serde_yaml::from_str(text).map_err(|source| ConvertError::Yaml {
                            at: here.clone(),
                            source,
                        })?;
                    walk(&inner, &here, out)?;
                } else {
                    walk(child, &here, out)?;
                }
            }
        }
        Value::Sequence(s) => {
            for (i, child) in s.iter().enumerate() {
                walk(child, &format!("{at}[{i}]"), out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn provider(v: &Value, at: &str) -> Result<Found, ConvertError> {
    let m = v
        .as_mapping()
        .ok_or_else(|| ConvertError::NotMapping(at.to_owned()))?;
    let (name, cfg) = m
        .iter()
        .next()
        .ok_or_else(|| ConvertError::Empty(at.to_owned()))?;
    let name = name.as_str().unwrap_or("?");
    if name != "cryptomb" && name != "qat" {
        return Err(ConvertError::UnknownProvider(format!("{at}.{name}")));
    }
    let poll_delay = cfg.get("pollDelay").map(|d| match d {
        Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    });
    let fallback = match cfg.get("fallback") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ConvertError::Fallback(format!("{at}.{name}"))),
    };
    Ok(Found {
        location: at.to_string(),
        provider: name.to_string(),
        poll_delay,
        fallback,
    })
}

/// quickshake's `private_key_provider` block for one finding, indented for a `tls_certificates`
/// entry.
pub fn render(f: &Found, key_file: &str) -> String {
    let type_url = match f.provider.as_str() {
        "qat" => "type.googleapis.com/envoy.extensions.private_key_providers.qat.v3alpha.QatPrivateKeyMethodConfig",
        _ => "type.googleapis.com/envoy.extensions.private_key_providers.cryptomb.v3alpha.CryptoMbPrivateKeyMethodConfig",
    };
    let (delay, note) = match &f.poll_delay {
        Some(d) => (d.clone(), String::new()),
        None => (
            "10ms".to_string(),
            "  # Istio set no pollDelay; Envoy requires one".to_string(),
        ),
    };
    format!(
        "# from {}\nprivate_key_provider:\n  provider_name: {}\n  fallback: {}\n  typed_config:\n    \"@type\": {type_url}\n    poll_delay: {delay}{note}\n    private_key: {{ filename: {key_file} }}\n",
        f.location, f.provider, f.fallback
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_mesh_config_and_annotations() {
        let text = r#"
apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    defaultConfig:
      privateKeyProvider:
        cryptomb:
          pollDelay: 10ms
  components:
    ingressGateways:
    - name: istio-ingressgateway
      k8s:
        podAnnotations:
          proxy.istio.io/config: |
            privateKeyProvider:
              qat:
                pollDelay: 1ms
                fallback: true
"#;
        let found = find(text).expect("parses");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].provider, "cryptomb");
        assert_eq!(found[0].poll_delay.as_deref(), Some("10ms"));
        assert!(!found[0].fallback, "Istio's default");
        assert_eq!(found[1].provider, "qat");
        assert!(found[1].fallback);
        assert!(found[1].location.contains("proxy.istio.io/config"));
        let out = render(&found[0], "/k.pem");
        assert!(
            out.contains("cryptomb.v3alpha.CryptoMbPrivateKeyMethodConfig")
                && out.contains("poll_delay: 10ms")
        );
    }

    #[test]
    fn rejects_unknown_providers() {
        assert!(find("privateKeyProvider: { foo: {} }").is_err());
    }
}
