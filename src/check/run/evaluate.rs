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
    schemas: &Schemas,
    mut inventory: Inventory,
    opts: &CheckOptions,
    bodies: &Bodies,
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
    // What the objects make, where no object of that name is given. A
    // Job's are guesses from its words (`producers`): no near miss is
    // measured against them.
    let mut guessed: HashSet<ObjectKey> = HashSet::new();
    for it in items.iter_mut() {
        let job = it.object.kind == "Job";
        for m in std::mem::take(&mut it.made) {
            if inventory.get(m.key()).is_none() {
                if job {
                    guessed.insert(m.key().clone());
                }
                let source = Source {
                    file: it.source.file.clone(),
                    line: it.source.line,
                };
                inventory.insert(m, Some(source));
            }
        }
    }
    if !opts.whole_cluster {
        let created = super::super::by_hand::created(&opts.inputs);
        created_by_hand(&created, &items, &mut inventory, report, opts.namespace());
        supplied_out_of_band(&items, &mut inventory, report, opts.namespace(), &guessed);
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
    let alternatives = Alternatives::of(&items, &duplicated, &units);
    let kept: Vec<Option<Body>> = items.iter_mut().map(|it| it.body.take()).collect();
    let ctx = CheckContext {
        items: &items,
        policies,
        schemas,
        inventory: &inventory,
        duplicated: &duplicated,
        units: &units,
        alternatives: &alternatives,
        unsettled: &unsettled,
        opts,
    };
    let per_object: Vec<Checked> = kept
        .into_par_iter()
        .enumerate()
        .map(|(i, body)| {
            // The bytes were compressed from serde_json's own output.
            let value: Option<Json> = body.and_then(|body| {
                let json = bodies.json(&body)?;
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
        report.mutations.extend(c.mutation);
    }
    inventory
}

/// Objects the repository's README or scripts create with `kubectl
/// create` ([`by_hand`](super::super::by_hand)) are put in the inventory
/// where the inputs give no object of that name: in the namespace the
/// command names, or else in every namespace of the inputs (the reader
/// runs it where the manifests go). One notice per object says so.
pub(super) fn created_by_hand(
    created: &[super::super::by_hand::ByHand],
    items: &[Item],
    inventory: &mut Inventory,
    report: &mut Report,
    default_ns: &str,
) {
    let namespaces: std::collections::BTreeSet<&str> = items
        .iter()
        .map(|it| it.object.namespace.as_deref().unwrap_or(default_ns))
        .collect();
    for c in created {
        let targets: Vec<&str> = match &c.namespace {
            Some(ns) => vec![ns.as_str()],
            None => namespaces.iter().copied().collect(),
        };
        let mut taken = false;
        for ns in targets {
            let made = serde_json::json!({"apiVersion": "v1", "kind": c.kind,
                "metadata": {"name": c.name, "namespace": ns,
                             "annotations": {producers::PRODUCED_BY: format!("created by hand ({})", c.at)}}});
            if let Ok(p) = inventory.prepare(&made) {
                if inventory.get(p.key()).is_none() {
                    inventory.insert(p, None);
                    taken = true;
                }
            }
        }
        if taken {
            report.notices.push(InputError {
                file: c.at.clone(),
                line: None,
                column: None,
                message: format!(
                    "{} {} is created by hand (kubectl create at {}): taken as given{}",
                    c.kind,
                    c.name,
                    c.at,
                    c.namespace
                        .as_ref()
                        .map_or_else(String::new, |ns| format!(" in namespace {ns}"))
                ),
            });
        }
    }
}

/// Secrets are kept out of repositories by design: credentials are made
/// by hand, by a secret manager or by a script the README names. So a
/// Secret a pod names that the inputs do not give (none written, none made
/// by a SealedSecret, ExternalSecret, Certificate or another known
/// producer) is taken as supplied out of band: it is put in the inventory,
/// and one notice per namespace says so. On real repositories a missing
/// Secret was judged wrong 479 times in 485 (tests/realworld); the true
/// ones were near misses, a name one edit or one suffix away from a Secret
/// the inputs do give in that namespace (`hnc-resourcelist` made by a
/// Certificate, `hnc-resourcelist-apiextension` mounted), so such a name
/// is still reported ([`near_miss`]).
///
/// An object of a kind this build does not know the scope of (an
/// OpenShift DeploymentConfig) keeps no namespace; the policies read it in
/// `default_ns`, and so does this.
pub(super) fn supplied_out_of_band(
    items: &[Item],
    inventory: &mut Inventory,
    report: &mut Report,
    default_ns: &str,
    guessed: &HashSet<ObjectKey>,
) {
    let mut wanted: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> =
        Default::default();
    for it in items.iter().filter(|it| !it.secret_refs.is_empty()) {
        let ns = it.object.namespace.as_deref().unwrap_or(default_ns);
        wanted
            .entry(ns)
            .or_default()
            .extend(it.secret_refs.iter().map(String::as_str));
    }
    for (ns, names) in wanted {
        let given: Vec<(String, bool)> = inventory
            .list("", "Secret", Some(ns))
            .iter()
            .map(|e| (e.key.name.to_string(), guessed.contains(&e.key)))
            .collect();
        let assumed: Vec<&str> = names
            .into_iter()
            .filter(|n| {
                !given
                    .iter()
                    .any(|(g, guess)| g == n || (!guess && near_miss(n, g)))
            })
            .collect();
        if assumed.is_empty() {
            continue;
        }
        for name in &assumed {
            let made = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": ns,
                             "annotations": {producers::PRODUCED_BY: "supplied out of band"}}});
            if let Ok(p) = inventory.prepare(&made) {
                inventory.insert(p, None);
            }
        }
        report.notices.push(InputError {
            file: ns.to_string(),
            line: None,
            column: None,
            message: format!(
                "namespace {ns}: the {} its pods name ({}) {} not given in the inputs and {} taken as supplied out of band, not reported missing",
                if assumed.len() == 1 { "Secret" } else { "Secrets" },
                assumed.iter().take(10).copied().collect::<Vec<_>>().join(", "),
                if assumed.len() == 1 { "is" } else { "are" },
                if assumed.len() == 1 { "is" } else { "are" },
            ),
        });
    }
}

/// Whether `wanted` looks like a slip for `given`: one is the other plus a
/// `-suffix`, or they differ by at most two edits (the shorter at least
/// six long either way: `db` and `db-credentials` are two Secrets).
pub(super) fn near_miss(wanted: &str, given: &str) -> bool {
    let suffixed = |long: &str, short: &str| {
        short.len() >= 6
            && long
                .strip_prefix(short)
                .is_some_and(|rest| rest.starts_with('-'))
    };
    if suffixed(wanted, given) || suffixed(given, wanted) {
        return true;
    }
    wanted.len() >= 6 && given.len() >= 6 && edit_distance(wanted, given) <= 2
}

/// Levenshtein distance, in bytes (Secret names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
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
    /// The built-in schemas and the CRDs' among the files (ApplyConfiguration).
    pub(super) schemas: &'a Schemas,
    pub(super) inventory: &'a Inventory,
    pub(super) duplicated: &'a Duplicated<'a>,
    pub(super) units: &'a ApplyUnits,
    pub(super) alternatives: &'a Alternatives,
    pub(super) unsettled: &'a Unsettled,
    pub(super) opts: &'a CheckOptions,
}

/// What checking one object gave.
pub(super) struct Checked {
    pub(super) findings: Vec<Finding>,
    pub(super) evaluated: Vec<Evaluated>,
    pub(super) notices: Vec<InputError>,
    pub(super) mutation: Option<crate::report::ObjectMutation>,
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
        schemas: _,
        inventory,
        duplicated,
        units,
        alternatives,
        unsettled,
        opts,
    } = *ctx;
    let it = &items[i];
    let mut checked = Checked {
        findings: vec![],
        evaluated: vec![],
        notices: vec![],
        mutation: None,
    };
    if !it.reviewable {
        return checked;
    }
    let written = value.and_then(|v| opts.request(v, &opts.user));
    // Mutating admission first (only when some policy mutates): the validating policies judge the object it leaves.
    let admitted = written
        .as_ref()
        .filter(|_| policies.mutates())
        .map(|req| policies.admit_all(req, inventory, ctx.schemas));
    let mutated = admitted.as_ref().and_then(|a| a.object.as_ref());
    let request = match mutated {
        Some(m) => opts.request(m, &opts.user),
        None => written.clone(),
    };
    let mut verdicts = match &request {
        _ if admitted.as_ref().is_some_and(|a| !a.failures.is_empty()) => {
            super::mutations::refusals(admitted.as_ref().expect("admitted"))
        }
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
    if let (Some(a), Some(m), Some(w)) = (&admitted, mutated, &written) {
        super::mutations::compare(it, a, m, &verdicts, w, ctx, &mut checked);
    }
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
    verdicts.retain_mut(|v| {
        let rendered_by = it.source.rendered_by.as_deref();
        match opts.stand_ins.judge(rendered_by, &it.object, v, policies) {
            crate::check::stand_in::Judged::Kept => true,
            crate::check::stand_in::Judged::Notice(message) => {
                checked.notices.push(InputError {
                    file: it.source.file.clone(),
                    line: Some(it.source.line),
                    column: None,
                    message,
                });
                false
            }
        }
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
    if !opts.whole_cluster {
        for v in verdicts.iter_mut().filter(|v| v.action == Action::Deny) {
            if let Some(why) = alternatives.why(i, &v.related, items, duplicated) {
                v.action = Action::Warn;
                v.message = format!("{} (a Warn, not a Deny: {why})", v.message);
            }
        }
    }
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
