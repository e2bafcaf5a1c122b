//! Turning a loaded policy off, or changing what it does, without copying
//! the library: `--disable NAME` and `--action NAME=Warn`, applied to the
//! policy documents before they compile, alike in check, audit, serve and
//! the controller.

use super::exceptions::{confine, is_exception_kind};
use super::{Action, SpecError, INTERLOCK_GROUP, VAP_GROUP};
use crate::k8s::kinds::group_of;
use crate::manifest::Document;
use serde_json::{json, Value as Json};
use std::path::PathBuf;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// Leave out the policy of this name (and its bindings); repeatable.
    pub disable: Vec<String>,
    /// Make the policy of this name only Deny, Warn or Audit (its
    /// validationActions, admissionActions and checkActions, or its bindings'
    /// validationActions); repeatable.
    pub actions: Vec<(String, Action)>,
    /// A PolicyConfig file (interlock.dev/v1alpha1; spec.disable: [NAME],
    /// spec.actions: {NAME: ACTION}) added to the flags; serve and the
    /// controller read it again when it changes.
    pub config: Option<PathBuf>,
    /// The namespace whose exceptions may except objects of any namespace
    /// (default interlock-system); an exception in any other namespace
    /// excepts only objects of its own (docs/writing-policies.md).
    pub exception_namespace: Option<String>,
}

/// The spec of a PolicyConfig document.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfigSpec {
    #[serde(default)]
    disable: Vec<String>,
    #[serde(default)]
    actions: std::collections::BTreeMap<String, String>,
}

/// `NAME=Warn` as (NAME, Warn).
pub fn parse_action(s: &str) -> Result<(String, Action), SpecError> {
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
    /// The namespace of cluster-wide exceptions.
    pub fn exception_namespace(&self) -> &str {
        self.exception_namespace
            .as_deref()
            .unwrap_or(super::exceptions::DEFAULT_NAMESPACE)
    }

    /// The flags with the config file's entries added.
    fn resolved(&self) -> Result<Overrides, Vec<String>> {
        let mut out = Overrides {
            config: None,
            ..self.clone()
        };
        let Some(file) = &self.config else {
            return Ok(out);
        };
        let loaded = crate::manifest::load_paths(&[file], &Default::default());
        let mut errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
        for d in &loaded.documents {
            let at = format!("{}:{}", d.source, d.line);
            if (group_of(d.api_version()), d.kind()) != (INTERLOCK_GROUP, "PolicyConfig") {
                errors.push(format!(
                    "{at}: {} is not a PolicyConfig (interlock.dev/v1alpha1)",
                    d.display_name()
                ));
                continue;
            }
            let spec: ConfigSpec = match d.value.get("spec").cloned().map(serde_json::from_value) {
                None => ConfigSpec::default(),
                Some(Ok(s)) => s,
                Some(Err(e)) => {
                    errors.push(format!("{at}: PolicyConfig spec: {e}"));
                    continue;
                }
            };
            out.disable.extend(spec.disable);
            for (name, action) in spec.actions {
                match Action::parse(&action) {
                    Some(a) => out.actions.push((name, a)),
                    None => errors.push(format!(
                        "{at}: spec.actions.{name}: {action:?} is not an action: use Deny, Warn or Audit"
                    )),
                }
            }
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }

    /// Applies the overrides (flags and config file) to `docs`; a name no
    /// policy has is an error (a typo would otherwise leave the policy on),
    /// naming those loaded.
    pub fn apply(&self, docs: &mut Vec<Document>) -> Result<(), Vec<String>> {
        self.resolved()?.apply_resolved(docs)
    }

    fn apply_resolved(&self, docs: &mut Vec<Document>) -> Result<(), Vec<String>> {
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
        for d in docs.iter_mut().filter(|d| is_exception_kind(d.kind())) {
            if let Err(e) = confine(&mut d.value, self.exception_namespace()) {
                errors.push(format!(
                    "{}:{}: {}: {e}",
                    d.source,
                    d.line,
                    d.display_name()
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
                        spec.insert("checkActions".into(), actions.clone());
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
#[path = "overrides_tests.rs"]
mod tests;
