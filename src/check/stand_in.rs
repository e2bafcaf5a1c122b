//! Kustomizations rendered in place of one that could not be.
//!
//! A kustomization that loads a remote base cannot be rendered here, so
//! the local kustomizations it includes are rendered on their own
//! (`render::kustomize::render_all`). What they give is not what the
//! cluster gets: the parent may set their namespace, add the generated
//! ConfigMap they mount, patch their containers or retag their images.
//! So a finding on such an object is not certain from the inputs:
//!
//! - a lookup that found nothing (a missing reference, a PDB that selects
//!   nothing) is a notice, since the parent may make what was looked for
//!   or move the object where it is;
//! - any other Deny is a Warn, its message naming the parent, since the
//!   parent's patches may change the field it is about.

use crate::policy::{Action, PolicySet, Verdict};
use std::collections::HashMap;
use std::path::Path;

/// For each kustomization rendered in place of another, that other one
/// (both as [`crate::manifest::Document::rendered_by`] names them).
#[derive(Debug, Clone, Default)]
pub struct StandIns(HashMap<String, String>);

/// What becomes of a verdict on an object rendered in place of `parent`.
#[derive(Debug, PartialEq)]
pub enum Judged {
    Kept,
    /// Reported as a notice instead, with this message.
    Notice(String),
}

impl StandIns {
    pub fn insert(&mut self, part: &Path, parent: &Path) {
        self.0
            .entry(part.display().to_string())
            .or_insert_with(|| parent.display().to_string());
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The kustomization an object rendered by `rendered_by` stands in for.
    pub fn parent_of(&self, rendered_by: Option<&str>) -> Option<&str> {
        self.0.get(rendered_by?).map(String::as_str)
    }

    /// Makes `verdict` on `object` (rendered by `rendered_by`) only as
    /// certain as the inputs are: see the module's doc.
    pub fn judge(
        &self,
        rendered_by: Option<&str>,
        object: &dyn std::fmt::Display,
        verdict: &mut Verdict,
        policies: &PolicySet,
    ) -> Judged {
        let Some(parent) = self.parent_of(rendered_by) else {
            return Judged::Kept;
        };
        if verdict.related.is_empty() && policies.looks_up_objects(&verdict.policy) {
            return Judged::Notice(format!(
                "{object}: {} not reported: it was rendered without {parent}, which could not be rendered here and may make what was looked for (its namespace, generators, resources)",
                verdict.policy
            ));
        }
        if verdict.action == Action::Deny {
            verdict.action = Action::Warn;
            verdict.message = format!(
                "{} (a Warn, not a Deny: rendered without {parent}, which could not be rendered here and may patch this)",
                verdict.message
            );
        }
        Judged::Kept
    }
}
