//! The fields of inventory objects that a policy set can read, per kind:
//! the [`Projection`] the inventory keeps (docs/architecture.md). Built from a flow
//! analysis of every expression ([`crate::cel::flow`]), so it holds for
//! expressions nobody has written yet: a use the analysis does not follow
//! keeps the whole value.

use super::{host, CompiledPolicy, DeclaredIndex, PolicySet};
use crate::cel::flow::{Flow, Reads, Tag};
use crate::cel::Program;
use crate::inventory::projection::{FieldSet, Projection};
use crate::k8s::kind::GroupKind;
use crate::k8s::kinds::group_of;
use std::cell::RefCell;
use std::collections::HashMap;

/// Tag 0 stands for "a kind named by a non-constant": its reads apply to
/// every kind.
const ANY_KIND: Tag = 0;

/// Fields a non-constant lookup never brings into memory: reading Secret
/// data needs a lookup that names the Secret kind.
const SECRET_DATA: [&str; 2] = ["data", "stringData"];

#[derive(Default)]
struct Kinds {
    names: Vec<GroupKind>,
}

impl Kinds {
    fn tag(&mut self, group: &str, kind: &str) -> Tag {
        match self.names.iter().position(|k| k.is(group, kind)) {
            Some(i) => i + 1,
            None => {
                self.names.push(GroupKind::new(group, kind));
                self.names.len()
            }
        }
    }
}

impl PolicySet {
    /// What the inventory must keep of each kind for these policies and
    /// the indexes they declare.
    pub fn projection(&self) -> Projection {
        let kinds = RefCell::new(Kinds::default());
        let mut sets: HashMap<Tag, FieldSet> = HashMap::new();
        let mut whole_kinds = vec![GroupKind::namespace().clone()];
        for p in self.policies.iter() {
            add_reads(&mut sets, policy_reads(p, &self.indexes, &kinds));
            whole_kinds.extend(p.param_kind.clone());
        }
        for ix in self.indexes.iter() {
            let tag = kinds
                .borrow_mut()
                .tag(ix.decl.gk.group(), ix.decl.gk.kind());
            let none = |_: usize, _: &[Option<String>]| None;
            let mut flow = Flow::new(&none, vec![(ix.slot, tag)]);
            flow.result(&ix.program);
            add_reads(&mut sets, flow.finish());
        }
        let any = sets.remove(&ANY_KIND).unwrap_or_default();
        let with_any = |own: Option<&FieldSet>, group: &str, kind: &str| {
            let mut set = FieldSet::identity();
            if let Some(own) = own {
                set.merge(own);
            }
            let mut any = any.clone();
            if group.is_empty() && kind == "Secret" {
                for f in SECRET_DATA {
                    any = any.without(f);
                }
            }
            set.merge(&any);
            set.close();
            set
        };
        let mut per_kind = HashMap::new();
        let names = kinds.into_inner().names;
        for (i, gk) in names.into_iter().enumerate() {
            let set = with_any(sets.get(&(i + 1)), gk.group(), gk.kind());
            per_kind.insert(gk, set);
        }
        per_kind
            .entry(GroupKind::new("", "Secret"))
            .or_insert_with(|| with_any(None, "", "Secret"));
        for key in whole_kinds {
            per_kind.insert(key, FieldSet::whole());
        }
        Projection::new(per_kind, with_any(None, "*", "*"))
    }
}

fn add_reads(sets: &mut HashMap<Tag, FieldSet>, reads: Reads) {
    for (tag, path) in reads.accessed {
        sets.entry(tag).or_default().add(&path, false);
    }
    for (tag, path) in reads.whole {
        sets.entry(tag).or_default().add(&path, true);
    }
    for (tag, path) in reads.ranged {
        sets.entry(tag).or_default().add_ranged(&path);
    }
}

/// What one policy's expressions read of lookup results.
fn policy_reads(p: &CompiledPolicy, indexes: &[DeclaredIndex], kinds: &RefCell<Kinds>) -> Reads {
    let classify = |id: usize, consts: &[Option<String>]| -> Option<Tag> {
        let arg = |i: usize| consts.get(i).cloned().flatten();
        match id {
            host::GET | host::LIST => Some(match (arg(0), arg(1)) {
                (Some(v), Some(k)) => kinds.borrow_mut().tag(group_of(&v), &k),
                _ => ANY_KIND,
            }),
            host::INDEX => Some(
                arg(0)
                    .and_then(|name| p.indexes.get(&name))
                    .and_then(|&id| indexes.get(id))
                    .map(|ix| &ix.decl.gk)
                    .map_or(ANY_KIND, |gk| kinds.borrow_mut().tag(gk.group(), gk.kind())),
            ),
            _ => None,
        }
    };
    let mut flow = Flow::new(&classify, Vec::new());
    flow.variables(&p.variables);
    let results: Vec<&Program> = p
        .match_conditions
        .iter()
        .map(|(_, c)| c)
        .chain(
            p.validations
                .iter()
                .flat_map(|v| std::iter::once(&v.expression).chain(v.message_expression.as_ref())),
        )
        .chain(p.audit_annotations.iter().map(|(_, a)| a))
        .chain(p.mutations.iter())
        .collect();
    for r in results {
        flow.result(r);
    }
    flow.finish()
}
