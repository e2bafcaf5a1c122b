//! `interlock check` over ResourceGroups: each group's members become
//! objects of their own, so CI catches an invalid group before it reaches a
//! cluster, with the same rules the controller applies.
//!
//! A member is checked as an object of the group's namespace, written by
//! the group's ServiceAccount, carrying the part-of label the controller
//! would add, and it joins the inventory that lookups see. Its findings are
//! reported at the group's file and line (DESIGN.md, command-line
//! contract); a member that cannot be used at all is an input error at the
//! member's own line. The built-in group rules ([`super::rules`]) judge the
//! usable members together, as the controller and admission do.

use super::crd::{applyset_id, GroupFinding, GROUP, KIND, PART_OF_LABEL};
use super::member::{parse_member, BuiltinScopes, Member};
use crate::manifest::Document;
use crate::policy::finding::InputError;
use crate::policy::resources::group_of;
use serde_json::Value;
use std::collections::HashMap;

/// The objects one input document stands for.
#[derive(Debug, Default)]
pub struct Expansion {
    /// The document itself, then its members if it is a group, each with
    /// the user that writes it (`None`: the user of the check).
    pub documents: Vec<(Document, Option<String>)>,
    pub errors: Vec<InputError>,
    /// The group rules' findings over the usable members.
    pub findings: Vec<GroupFinding>,
}

/// Is `value` a ResourceGroup?
pub fn is_group(value: &Value) -> bool {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    group_of(api_version) == GROUP && value.get("kind").and_then(Value::as_str) == Some(KIND)
}

/// `doc`, followed by its members when it is a ResourceGroup.
pub fn expand(doc: Document) -> Expansion {
    if !is_group(&doc.value) {
        return Expansion {
            documents: vec![(doc, None)],
            ..Expansion::default()
        };
    }
    let mut out = Expansion::default();
    // Unset, the namespace is the one kubectl would use: `default`.
    let namespace = doc.namespace().unwrap_or("default").to_string();
    let group_name = doc.name().unwrap_or("").to_string();
    let error = |pointer: &str, message: String| InputError {
        file: doc.source.to_string(),
        line: doc.line_of_pointer(pointer).or(Some(doc.line)),
        column: None,
        message: format!("ResourceGroup {namespace}/{group_name}: {message}"),
    };
    let user = match doc
        .value
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
    {
        Some(sa) if !sa.is_empty() => Some(format!("system:serviceaccount:{namespace}:{sa}")),
        _ => {
            out.errors
                .push(error("/spec", "spec.serviceAccountName is required".into()));
            None
        }
    };
    let resources = match doc.value.pointer("/spec/resources") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(list)) => list.as_slice(),
        Some(_) => {
            out.errors.push(error(
                "/spec/resources",
                "spec.resources is not a list".into(),
            ));
            &[][..]
        }
    };
    let id = applyset_id(&namespace, &group_name);
    let mut seen: HashMap<(String, String, String), usize> = HashMap::new();
    let mut usable: Vec<Member> = Vec::new();
    for (i, raw) in resources.iter().enumerate() {
        let pointer = format!("/spec/resources/{i}");
        let member = match parse_member(i, raw, &namespace, &BuiltinScopes, true) {
            Ok(m) => m,
            Err(e) => {
                out.errors.push(error(&pointer, e.to_string()));
                continue;
            }
        };
        let key = (
            member.api_group().to_string(),
            member.kind.clone(),
            member.name.clone(),
        );
        if let Some(j) = seen.insert(key, i) {
            let message = format!(
                "member {i} ({}): listed twice (also member {j})",
                member.display()
            );
            out.errors.push(error(&pointer, message));
            continue;
        }
        let mut object = member.object.clone();
        label(&mut object, &id);
        let member_doc = Document::new(doc.source.clone(), doc.line, object);
        out.documents.push((member_doc, user.clone()));
        usable.push(member);
    }
    out.findings = super::rules::check(&usable);
    out.documents.insert(0, (doc, None));
    out
}

/// Adds the part-of label the controller writes, so that policies see the
/// member as it will be stored.
fn label(object: &mut Value, id: &str) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(PART_OF_LABEL.into(), id.into());
    }
}

#[cfg(test)]
#[path = "expand_tests.rs"]
mod tests;
