//! What the policy set reads and to which requests it may apply: the
//! kind queries admission, the webhook configuration and `serve` ask; and
//! what one evaluation read, which its [`Outcome`] answers.

use super::*;

impl Outcome {
    /// The policies the evaluation matched.
    pub fn matched(&self) -> impl Iterator<Item = &CompiledPolicy> + '_ {
        let m = &self.matched;
        m.indexes.iter().filter_map(|&i| m.set.get(i))
    }

    /// Of the policies the evaluation matched, those that read the
    /// inventory: they decide what happens while the inventory is not ready.
    pub fn inventory_readers(&self) -> impl Iterator<Item = &CompiledPolicy> + '_ {
        self.matched()
            .filter(|p| p.reads_inventory() && p.needs_inventory())
    }

    /// The (group, kind) pairs the evaluation may have read from the
    /// inventory: those of every policy it matched, and Namespaces
    /// (namespace selectors, `namespaceObject`; a policy that did not match
    /// for its namespace's labels matches again only if they change).
    /// `None` when one of those policies computes a lookup's kind, which
    /// could then be any.
    pub fn kinds_read(&self) -> Option<Vec<&GroupKind>> {
        let mut kinds = vec![GroupKind::namespace()];
        for p in self.matched() {
            if p.computed_lookup {
                return None;
            }
            kinds.extend(&p.group_kinds_read);
        }
        Some(kinds)
    }

    /// The verdicts while the inventory is not synced: the inventory
    /// readers answer by their failurePolicy instead of evaluating (Deny
    /// where it is Fail); `None` when the evaluation read nothing that
    /// waits for the inventory.
    pub fn unready(&self) -> Option<Vec<Verdict>> {
        let mut readers = self.inventory_readers().peekable();
        readers.peek()?;
        let verdicts = readers
            .filter(|p| p.failure_policy() == FailurePolicy::Fail)
            .map(|p| Verdict {
                policy: p.name.clone(),
                binding: None,
                action: Action::Deny,
                message: "the cluster inventory is still loading; retry in a few seconds".into(),
                reason: Some("ServiceUnavailable".into()),
                related: vec![],
            })
            .collect();
        Some(verdicts)
    }
}

impl PolicySet {
    /// The policies that apply to a request: its matchConstraints match, and
    /// so do the matchResources of one of its bindings (matchConditions
    /// are not evaluated).
    pub fn applying_to<'s>(
        &'s self,
        req: &'s Request,
        inv: &'s Inventory,
    ) -> impl Iterator<Item = &'s CompiledPolicy> + 's {
        self.policies.iter().filter(move |p| {
            p.matches(req, inv)
                && p.bindings.iter().any(|b| {
                    b.matcher
                        .as_ref()
                        .is_none_or(|m| matching::matches(m, req, inv, true))
                })
        })
    }

    /// Could some policy match this request? Looks at resource rules only
    /// (not selectors, conditions or bindings), so `false` is certain.
    pub fn may_match(&self, req: &Request) -> bool {
        self.policies
            .iter()
            .any(|p| matching::rules_match(&p.matcher, req))
    }

    /// Could some policy match a CREATE of some object of this kind
    /// (`namespaced`: in a namespace)? Resource rules only, any name: the
    /// kinds an audit must list.
    pub fn may_match_kind(&self, api_version: &str, kind: &str, namespaced: bool) -> bool {
        self.may_match_kind_where(api_version, kind, namespaced, |_| true)
    }

    /// [`PolicySet::may_match_kind`] among the policies that look objects
    /// up in the inventory: whether a review of this kind may cost lookups
    /// (the server's cost estimate weighs its references only then).
    pub fn inventory_readers_may_match_kind(
        &self,
        api_version: &str,
        kind: &str,
        namespaced: bool,
    ) -> bool {
        self.may_match_kind_where(api_version, kind, namespaced, |p| {
            p.reads_inventory() && p.needs_inventory()
        })
    }

    fn may_match_kind_where(
        &self,
        api_version: &str,
        kind: &str,
        namespaced: bool,
        which: impl Fn(&CompiledPolicy) -> bool,
    ) -> bool {
        let probe = serde_json::json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": if namespaced {
                serde_json::json!({"name": "probe", "namespace": "probe"})
            } else {
                serde_json::json!({"name": "probe"})
            },
        });
        Request::create(&probe, "").is_some_and(|req| {
            self.policies
                .iter()
                .any(|p| which(p) && matching::may_match_resource(&p.matcher, &req))
        })
    }

    /// Does some policy read objects of this kind from the inventory (see
    /// [`PolicySet::kinds_read`])?
    pub fn reads_kind(&self, group: &str, kind: &str) -> bool {
        (group.is_empty() && kind == "Namespace")
            || self
                .policies
                .iter()
                .flat_map(|p| &p.group_kinds_read)
                .any(|gk| gk.is(group, kind))
    }

    /// Policies with a lookup whose apiVersion or kind is computed (see
    /// [`PolicySet::kinds_read`]).
    pub fn with_computed_lookups(&self) -> Vec<&str> {
        self.policies
            .iter()
            .filter(|p| p.computed_lookup)
            .map(|p| p.name.as_str())
            .collect()
    }

    /// Every (apiVersion, kind) the policies read from the inventory, when
    /// the calls name them with constants; Namespaces always.
    pub fn kinds_read(&self) -> Vec<GroupVersionKind> {
        let mut kinds = vec![GroupVersionKind::from_api_version("v1", "Namespace")];
        for p in self.policies.iter() {
            kinds.extend(p.kinds_read.iter().cloned());
        }
        kinds.sort();
        kinds.dedup();
        kinds
    }
}
