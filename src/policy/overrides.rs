//! Turning a loaded policy off, or changing what it does, without copying
//! the library: `--disable NAME` and `--action NAME=Warn`, applied to the
//! policy documents before they compile, alike in check, audit, serve and
//! the controller.

use super::{Action, INTERLOCK_GROUP, VAP_GROUP};
use crate::k8s::kinds::group_of;
use crate::manifest::Document;
use serde_json::{json, Value as Json};

#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct Overrides {
    /// Leave out the policy of this name (and its bindings); repeatable.
    #[arg(long = "disable", value_name = "NAME")]
    pub disable: Vec<String>,
    /// Make the policy of this name only Deny, Warn or Audit (its
    /// validationActions and admissionActions, or its bindings'
    /// validationActions); repeatable.
    #[arg(long = "action", value_name = "NAME=ACTION", value_parser = parse_action)]
    pub actions: Vec<(String, Action)>,
}

/// `NAME=Warn` as (NAME, Warn).
pub fn parse_action(s: &str) -> Result<(String, Action), String> {
    let (name, action) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: write NAME=ACTION, as unique-ingress-host=Warn"))?;
    let action = Action::parse(action)
        .ok_or_else(|| format!("{action:?} is not an action: use Deny, Warn or Audit"))?;
    Ok((name.to_string(), action))
}

fn field<'a>(d: &'a Document, pointer: &str) -> &'a str {
    d.value
        .pointer(pointer)
        .and_then(Json::as_str)
        .unwrap_or("")
}

/// The name of the policy a document is or binds, if it is one of ours.
fn policy_of(d: &Document) -> Option<&str> {
    match (group_of(d.api_version()), d.kind()) {
        (INTERLOCK_GROUP, "InterlockPolicy") | (VAP_GROUP, "ValidatingAdmissionPolicy") => {
            Some(field(d, "/metadata/name"))
        }
        (VAP_GROUP, "ValidatingAdmissionPolicyBinding") => Some(field(d, "/spec/policyName")),
        _ => None,
    }
}

impl Overrides {
    pub fn is_empty(&self) -> bool {
        self.disable.is_empty() && self.actions.is_empty()
    }

    /// Applies the overrides to `docs`; a name no policy has is an error
    /// (a typo would otherwise leave the policy on), naming those loaded.
    pub fn apply(&self, docs: &mut Vec<Document>) -> Result<(), Vec<String>> {
        let names: Vec<String> = docs
            .iter()
            .filter(|d| d.kind() != "ValidatingAdmissionPolicyBinding")
            .filter_map(policy_of)
            .map(str::to_string)
            .collect();
        let mut errors = Vec::new();
        let wanted = self
            .disable
            .iter()
            .map(|n| ("--disable", n))
            .chain(self.actions.iter().map(|(n, _)| ("--action", n)));
        for (flag, name) in wanted {
            if !names.contains(name) {
                errors.push(format!(
                    "{flag} {name}: no loaded policy has that name; the policies are {}",
                    names.join(", ")
                ));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        docs.retain(|d| policy_of(d).is_none_or(|n| !self.disable.iter().any(|x| x == n)));
        for (name, action) in &self.actions {
            let actions = json!([format!("{action:?}")]);
            for d in docs.iter_mut().filter(|d| policy_of(d) == Some(name)) {
                let kind = d.kind().to_string();
                let Some(spec) = d.value.get_mut("spec").and_then(Json::as_object_mut) else {
                    continue;
                };
                match kind.as_str() {
                    "InterlockPolicy" => {
                        spec.insert("validationActions".into(), actions.clone());
                        spec.insert("admissionActions".into(), actions.clone());
                    }
                    "ValidatingAdmissionPolicyBinding" => {
                        spec.insert("validationActions".into(), actions.clone());
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs() -> Vec<Document> {
        crate::bundled::documents().documents
    }

    #[test]
    fn disable_leaves_the_policy_out() {
        let mut d = docs();
        let before = d.len();
        let o = Overrides {
            disable: vec!["unique-ingress-host".into()],
            ..Default::default()
        };
        o.apply(&mut d).expect("applies");
        assert_eq!(d.len(), before - 1);
        assert!(d
            .iter()
            .all(|d| policy_of(d) != Some("unique-ingress-host")));
    }

    #[test]
    fn action_rewrites_every_action_of_the_policy() {
        let mut d = docs();
        let o = Overrides {
            actions: vec![parse_action("hpa-target-exists=Audit").unwrap()],
            ..Default::default()
        };
        o.apply(&mut d).expect("applies");
        let p = d
            .iter()
            .find(|d| policy_of(d) == Some("hpa-target-exists"))
            .unwrap();
        assert_eq!(p.value["spec"]["validationActions"], json!(["Audit"]));
        assert_eq!(p.value["spec"]["admissionActions"], json!(["Audit"]));
    }

    #[test]
    fn an_unknown_name_is_an_error_listing_the_policies() {
        let o = Overrides {
            disable: vec!["unique-ingres-host".into()],
            ..Default::default()
        };
        let e = o.apply(&mut docs()).unwrap_err();
        assert!(
            e[0].starts_with(
                "--disable unique-ingres-host: no loaded policy has that name; the policies are "
            ),
            "{e:?}"
        );
        assert!(e[0].contains("unique-ingress-host"), "{e:?}");
        assert!(parse_action("x=Block").is_err());
        assert!(parse_action("x").is_err());
    }
}
