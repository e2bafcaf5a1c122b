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
//!
//! A Helm chart whose dependencies are not vendored (its `Chart.yaml`
//! names them, its `charts/` folder lacks them) is rendered without them
//! (`render::helm`): the dependencies may make what a lookup looked for,
//! so such a finding is a notice too; they do not change the chart's own
//! objects, so its other findings stand.

use crate::policy::{Action, PolicySet, Verdict};
use std::collections::HashMap;
use std::path::Path;

/// For each kustomization rendered in place of another, that other one;
/// for each chart rendered without its dependencies, what it lacks (keyed
/// as [`crate::manifest::Document::rendered_by`] names them).
#[derive(Debug, Clone, Default)]
pub struct StandIns(HashMap<String, StandIn>);

#[derive(Debug, Clone)]
enum StandIn {
    /// Rendered in place of this kustomization.
    For(String),
    /// A chart rendered without these dependencies.
    Without(String),
}

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
            .or_insert_with(|| StandIn::For(parent.display().to_string()));
    }

    /// `chart` was rendered without `missing` (its dependencies' names).
    pub fn insert_without(&mut self, chart: &Path, missing: &[String]) {
        self.0.insert(
            chart.display().to_string(),
            StandIn::Without(missing.join(", ")),
        );
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The kustomization an object rendered by `rendered_by` stands in for.
    pub fn parent_of(&self, rendered_by: Option<&str>) -> Option<&str> {
        match self.0.get(rendered_by?)? {
            StandIn::For(parent) => Some(parent),
            StandIn::Without(_) => None,
        }
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
        let lookup = verdict.related.is_empty() && policies.looks_up_objects(&verdict.policy);
        let parent = match rendered_by.and_then(|r| self.0.get(r)) {
            None => return Judged::Kept,
            Some(StandIn::Without(missing)) if lookup => {
                return Judged::Notice(format!(
                    "{object}: {} not reported: its chart was rendered without its dependencies {missing}, which are not vendored and may make what was looked for (`helm dependency build` vendors them)",
                    verdict.policy
                ))
            }
            Some(StandIn::Without(_)) => return Judged::Kept,
            Some(StandIn::For(parent)) => parent,
        };
        if lookup {
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
