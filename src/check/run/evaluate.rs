//! Checking the items: the inventory filled once, then every object
//! evaluated against the policy set.

use super::*;

/// Fills the inventory with the items, checks each; returns the inventory
/// for the caller to free.
///
/// Every copy of an object given more than once (overlays, variants) is
/// checked; the inventory holds the first copy, which is what lookups by
/// other objects see. Each later copy is a notice, and so is every lookup
/// that read a key given more than once (saying which copy it read).
pub(super) fn check_items(
    mut items: Vec<Item>,
    policies: &PolicySet,
    mut inventory: Inventory,
    opts: &CheckOptions,
    report: &mut Report,
) -> Inventory {
    let mut sources: HashMap<ObjectKey, usize> = HashMap::with_capacity(items.len());
    // Key -> every copy after the first, in input order.
    let mut copies: HashMap<ObjectKey, Vec<usize>> = HashMap::new();
    for (i, it) in items.iter_mut().enumerate() {
        // An object without a name (only generateName) is checked but is
        // not in the inventory.
        let Some(Ok(prepared)) = it.prepared.take() else {
            continue;
        };
        let key = prepared.key().clone();
        if sources.contains_key(&key) {
            copies.entry(key).or_default().push(i);
            continue;
        }
        let source = Source {
            file: it.source.file.clone(),
            line: it.source.line,
        };
        let error = |message: String| InputError {
            file: it.source.file.clone(),
            line: Some(it.source.line),
            column: None,
            message,
        };
        for e in inventory.insert(prepared, Some(source)) {
            report.errors.push(error(e.to_string()));
        }
        sources.insert(key, i);
    }
    // What the objects make, where no object of that name is given.
    for it in items.iter_mut() {
        for m in std::mem::take(&mut it.made) {
            if inventory.get(m.key()).is_none() {
                let source = Source {
                    file: it.source.file.clone(),
                    line: it.source.line,
                };
                inventory.insert(m, Some(source));
            }
        }
    }
    if !opts.whole_cluster {
        supplied_out_of_band(&items, &mut inventory, report);
    }
    for (key, later) in &copies {
        let first = &items[sources[key]].source;
        for &i in later {
            report.notices.push(InputError {
                file: items[i].source.file.clone(),
                line: Some(items[i].source.line),
                column: None,
                message: format!(
                    "{key} is given {} times (first at {first}): every copy is checked; lookups by other objects see the first",
                    later.len() + 1
                ),
            });
        }
    }
    let unsettled = Unsettled::of(&items);
    report.objects = items.iter().filter(|it| !it.derived).count();
    report.policies = policies.len();
    let duplicated = Duplicated {
        copies: &copies,
        sources: &sources,
    };
    let units = ApplyUnits::of(&items, &duplicated);
    let bodies: Vec<Option<Box<[u8]>>> = items.iter_mut().map(|it| it.body.take()).collect();
    let ctx = CheckContext {
        items: &items,
        policies,
        inventory: &inventory,
        duplicated: &duplicated,
        units: &units,
        unsettled: &unsettled,
        opts,
    };
    let per_object: Vec<Checked> = bodies
        .into_par_iter()
        .enumerate()
        .map(|(i, body)| {
            // The bytes were compressed from serde_json's own output.
            let value: Option<Json> = body.and_then(|body| {
                let json = lz4_flex::block::decompress_size_prepended(&body).ok()?;
                serde_json::from_slice(&json).ok()
            });
            check_one(value.as_ref(), i, &ctx)
        })
        .collect();
    for it in items.iter_mut() {
        report.results.append(&mut it.group_findings);
    }
    for c in per_object {
        report.results.extend(c.findings);
        report.evaluated.extend(c.evaluated);
        report.notices.extend(c.notices);
    }
    inventory
}

/// Secrets are kept out of repositories by design: credentials are made
/// by hand, by a secret manager or by a script the README names. So in a
/// namespace where the inputs give no Secret at all (none written, none
/// made by a SealedSecret, ExternalSecret, Certificate or another known
/// producer), a Secret a pod names is taken as supplied out of band: it is
/// put in the inventory, and one notice per namespace says so. Where the
/// inputs do manage the namespace's Secrets, a missing one is reported.
pub(super) fn supplied_out_of_band(items: &[Item], inventory: &mut Inventory, report: &mut Report) {
    let mut wanted: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> =
        Default::default();
    for it in items {
        if let Some(ns) = it.object.namespace.as_deref() {
            wanted
                .entry(ns)
                .or_default()
                .extend(it.secret_refs.iter().map(String::as_str));
        }
    }
    for (ns, names) in wanted {
        if names.is_empty() || !inventory.list("", "Secret", Some(ns)).is_empty() {
            continue;
        }
        for name in &names {
            let assumed = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": ns,
                             "annotations": {producers::PRODUCED_BY: "supplied out of band"}}});
            if let Ok(p) = inventory.prepare(&assumed) {
                inventory.insert(p, None);
            }
        }
        report.notices.push(InputError {
            file: ns.to_string(),
            line: None,
            column: None,
            message: format!(
                "namespace {ns}: no Secret is given in the inputs, so the {} its pods name ({}) are taken as supplied out of band and not reported missing",
                if names.len() == 1 { "Secret" } else { "Secrets" },
                names.iter().take(10).copied().collect::<Vec<_>>().join(", ")
            ),
        });
    }
}

/// Namespaces whose objects the files cannot show in full: `kube-system`,
/// which every distribution fills (cluster DNS, kube-proxy, its network
/// and cloud agents), and those where a HelmRelease or an Argo CD
/// Application of the inputs installs what it fetches from elsewhere.
/// There a lookup that found nothing settles nothing: a finding of a
/// policy that looks objects up and names no object it found (a PDB that
/// selects nothing, a missing reference) is uncertain, and `check`
/// reports only what is certain.
pub(super) struct Unsettled(HashMap<String, String>);

impl Unsettled {
    pub(super) fn of(items: &[Item]) -> Self {
        let mut why: HashMap<String, String> = HashMap::new();
        why.insert(
            "kube-system".into(),
            "the cluster's own components live in kube-system".into(),
        );
        for it in items {
            for ns in &it.unshown_in {
                why.entry(ns.clone()).or_insert_with(|| {
                    format!(
                        "{} installs into namespace {ns} objects that are not in the files",
                        it.object
                    )
                });
            }
        }
        Unsettled(why)
    }

    /// Why a finding of `policy` on `it` is uncertain, if it is.
    pub(super) fn why(
        &self,
        it: &Item,
        policy: &str,
        related: &[ObjectKey],
        policies: &PolicySet,
    ) -> Option<&str> {
        let ns = it.object.namespace.as_deref()?;
        let why = self.0.get(ns)?;
        (related.is_empty() && policies.looks_up_objects(policy)).then_some(why.as_str())
    }
}

/// Keys given more than once, and where each first copy is.
pub(super) struct Duplicated<'a> {
    pub(super) copies: &'a HashMap<ObjectKey, Vec<usize>>,
    pub(super) sources: &'a HashMap<ObjectKey, usize>,
}

/// Which objects are applied together, for conflicts between objects.
/// The raw files are one install, applied with everything; each top-level
/// render (a kustomization, a chart) is one install of its own, and two
/// renders are alternatives (overlays of one base, an install in two
/// modes) that are not applied together for certain. A raw file that
/// repeats objects a render gives (an install YAML committed as the
/// output of a kustomization) is another such alternative.
pub(super) struct ApplyUnits {
    /// Per item: `None` for the shared raw files, else its unit.
    pub(super) unit: Vec<Option<String>>,
}

impl ApplyUnits {
    pub(super) fn of(items: &[Item], duplicated: &Duplicated<'_>) -> Self {
        let mut rendered_copies: HashSet<&str> = HashSet::new();
        for (key, later) in duplicated.copies {
            let all: Vec<usize> = std::iter::once(duplicated.sources[key])
                .chain(later.iter().copied())
                .collect();
            if all.iter().any(|&i| items[i].source.rendered_by.is_some()) {
                rendered_copies.extend(
                    all.iter()
                        .filter(|&&i| items[i].source.rendered_by.is_none())
                        .map(|&i| items[i].source.file.as_str()),
                );
            }
        }
        let unit = items
            .iter()
            .map(|it| match &it.source.rendered_by {
                Some(r) => Some(r.clone()),
                None => rendered_copies
                    .contains(it.source.file.as_str())
                    .then(|| it.source.file.clone()),
            })
            .collect();
        ApplyUnits { unit }
    }

    /// Whether some copy of `key` is applied together with item `i`. A key
    /// no input gives (the baseline inventory, a made object) is taken as
    /// applied with everything.
    pub(super) fn applied_with(
        &self,
        key: &ObjectKey,
        i: usize,
        duplicated: &Duplicated<'_>,
    ) -> bool {
        let Some(&first) = duplicated.sources.get(key) else {
            return true;
        };
        let mine = &self.unit[i];
        std::iter::once(first)
            .chain(duplicated.copies.get(key).into_iter().flatten().copied())
            .any(|c| mine.is_none() || self.unit[c].is_none() || self.unit[c] == *mine)
    }
}

/// What every object's check reads.
#[derive(Clone, Copy)]
pub(super) struct CheckContext<'a> {
    pub(super) items: &'a [Item],
    pub(super) policies: &'a PolicySet,
    pub(super) inventory: &'a Inventory,
    pub(super) duplicated: &'a Duplicated<'a>,
    pub(super) units: &'a ApplyUnits,
    pub(super) unsettled: &'a Unsettled,
    pub(super) opts: &'a CheckOptions,
}

/// What checking one object gave.
pub(super) struct Checked {
    pub(super) findings: Vec<Finding>,
    pub(super) evaluated: Vec<Evaluated>,
    pub(super) notices: Vec<InputError>,
}

/// Drops mapping entries whose value is null, as kube-apiserver does when
/// it decodes a manifest into its type (Helm often renders `volumes:` with
/// nothing under it); a null label or annotation value is the empty string.
pub(super) fn drop_nulls(value: &mut Json) {
    #[derive(Clone, Copy, PartialEq)]
    enum Place {
        Any,
        /// A `metadata` mapping.
        Metadata,
        /// Its `labels` or `annotations`.
        Strings,
    }
    pub(super) fn walk(value: &mut Json, place: Place) {
        match value {
            Json::Object(map) => {
                if place == Place::Strings {
                    for v in map.values_mut().filter(|v| v.is_null()) {
                        *v = Json::String(String::new());
                    }
                }
                map.retain(|_, v| !v.is_null());
                for (k, v) in map.iter_mut() {
                    let next = match (place, k.as_str()) {
                        (_, "metadata") => Place::Metadata,
                        (Place::Metadata, "labels" | "annotations") => Place::Strings,
                        _ => Place::Any,
                    };
                    walk(v, next);
                }
            }
            Json::Array(items) => items.iter_mut().for_each(|v| walk(v, Place::Any)),
            _ => {}
        }
    }
    walk(value, Place::Any);
}

/// `value`: `None` when no policy can match the object.
pub(super) fn check_one(value: Option<&Json>, i: usize, ctx: &CheckContext<'_>) -> Checked {
    let CheckContext {
        items,
        policies,
        inventory,
        duplicated,
        units,
        unsettled,
        opts,
    } = *ctx;
    let it = &items[i];
    let mut checked = Checked {
        findings: vec![],
        evaluated: vec![],
        notices: vec![],
    };
    if !it.reviewable {
        return checked;
    }
    let request = value.and_then(|v| opts.request(v, &opts.user));
    let mut verdicts = match &request {
        Some(req) if duplicated.copies.is_empty() => policies.evaluate(req, inventory).verdicts,
        Some(req) => {
            let (verdicts, read) = crate::policy::host::recording_lookups(|| {
                policies.evaluate(req, inventory).verdicts
            });
            let mut read: Vec<&ObjectKey> = read
                .iter()
                .filter(|k| duplicated.copies.contains_key(*k))
                .collect();
            read.sort();
            read.dedup();
            for key in read {
                let first = &items[duplicated.sources[key]].source;
                let others: Vec<String> = duplicated.copies[key]
                    .iter()
                    .map(|&c| items[c].source.to_string())
                    .collect();
                checked.notices.push(InputError {
                    file: it.source.file.clone(),
                    line: Some(it.source.line),
                    column: None,
                    message: format!(
                        "{}: lookups read {key}, which is given {} times: they used the copy at {first} (not {})",
                        it.object,
                        others.len() + 1,
                        others.join(", ")
                    ),
                });
            }
            verdicts
        }
        None => vec![],
    };
    verdicts.retain(|v| {
        if opts.whole_cluster {
            return true;
        }
        let Some(why) = unsettled.why(it, &v.policy, &v.related, policies) else {
            return true;
        };
        checked.notices.push(InputError {
            file: it.source.file.clone(),
            line: Some(it.source.line),
            column: None,
            message: format!(
                "{}: {} not reported: what it looked for may exist where the files cannot show it ({why})",
                it.object, v.policy
            ),
        });
        false
    });
    verdicts.retain(|v| {
        if opts.whole_cluster {
            return true;
        }
        let together = v.related.is_empty()
            || v.related.iter().any(|k| units.applied_with(k, i, duplicated));
        if !together {
            checked.notices.push(InputError {
                file: it.source.file.clone(),
                line: Some(it.source.line),
                column: None,
                message: format!(
                    "{}: {} not reported: every object it conflicts with ({}) comes from another render of the install, and alternatives are not applied together",
                    it.object,
                    v.policy,
                    v.related.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                ),
            });
        }
        together
    });
    let object = &it.object;
    let source = &it.source;
    checked.findings = verdicts
        .into_iter()
        .map(|v| Finding {
            policy: v.policy,
            binding: v.binding,
            action: v.action,
            object: object.clone(),
            message: v.message,
            source: source.clone(),
            related: v
                .related
                .iter()
                .filter_map(|k| duplicated.sources.get(k))
                .map(|&i| RelatedObject {
                    object: items[i].object.clone(),
                    source: Some(items[i].source.clone()),
                })
                .collect(),
            reason: v.reason,
        })
        .collect();
    // JUnit lists a test case only where a policy applies to the object.
    if opts.record_evaluated {
        if let Some(req) = &request {
            checked.evaluated = policies
                .applying_to(req, inventory)
                .map(|p| Evaluated {
                    policy: p.name.clone(),
                    object: object.clone(),
                    source: source.clone(),
                })
                .collect();
        }
    }
    checked
}
