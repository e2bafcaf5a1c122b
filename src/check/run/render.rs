//! Rendering the inputs that are not plain manifests: kustomizations and
//! Helm charts, claiming the files they own.

use super::*;

/// Renders the inputs' top-level kustomizations (see `kustomize`) and
/// claims the files kustomize owns, so that they are not also read raw.
pub(super) fn render_kustomizations(
    opts: &CheckOptions,
    load: &mut LoadOptions,
    report: &mut Report,
    stand_ins: &mut crate::check::stand_in::StandIns,
) -> Vec<Document> {
    if opts.kustomize == KustomizeMode::Never {
        return vec![];
    }
    let layout = kustomize::layout(&opts.inputs, &opts.exclude);
    report.errors.extend(layout.errors);
    if layout.claimed.is_empty() {
        return vec![];
    }
    load.claimed = std::sync::Arc::new(layout.claimed);
    if let Some(first) = layout.unreferenced.first() {
        report.notices.push(InputError {
            file: first.display().to_string(),
            line: None,
            column: None,
            message: format!(
                "left out {} in kustomize trees that no kustomization references: {}",
                plural_files(layout.unreferenced.len()),
                first_names(layout.unreferenced.iter().map(|p| p.display().to_string()))
            ),
        });
    }
    let Some(first) = layout.roots.first() else {
        return vec![];
    };
    let Some(renderer) = Renderer::from_path() else {
        report.errors.push(InputError {
            file: first.display().to_string(),
            line: None,
            column: None,
            message: "holds a kustomization, and neither `kustomize` nor `kubectl` is on PATH to render it: install kubectl (it renders with `kubectl kustomize`) or kustomize, or pass --kustomize never to check the raw files as written".into(),
        });
        return vec![];
    };
    report.notices.push(InputError {
        file: first.display().to_string(),
        line: None,
        column: None,
        message: format!(
            "rendered {} with `{}`: {}",
            match layout.roots.len() {
                1 => "1 kustomization".to_string(),
                n => format!("{n} kustomizations"),
            },
            renderer.describe(),
            first_names(layout.roots.iter().map(|p| p.display().to_string()))
        ),
    });
    let mut docs = Vec::new();
    for r in kustomize::render_all(&renderer, &layout.roots, load, stand_ins) {
        // A well-formed layout that needs the network is not broken input;
        // a CI job that must not pass on it says so.
        let r = match r {
            Rendered::NotHere(e) if opts.remote_bases_fail => Rendered::Failed(e),
            r => r,
        };
        r.sort_into(&mut docs, &mut report.errors, &mut report.notices);
    }
    docs
}

/// Renders the inputs' Helm charts when helm is on PATH (see
/// `render::helm`); without it their files are skipped with a notice.
pub(super) fn render_charts(
    opts: &CheckOptions,
    load: &mut LoadOptions,
    report: &mut Report,
    stand_ins: &mut crate::check::stand_in::StandIns,
) -> Vec<Document> {
    // `--kustomize never` reads every source as written, charts too.
    if opts.kustomize == KustomizeMode::Never {
        return vec![];
    }
    let Some(helm) = helm::helm_on_path() else {
        return vec![];
    };
    let charts = helm::charts(&opts.inputs, &opts.exclude);
    let Some(first) = charts.roots.first() else {
        return vec![];
    };
    let mut claimed = (*load.claimed).clone();
    claimed.extend(charts.claimed);
    load.claimed = std::sync::Arc::new(claimed);
    report.notices.push(InputError {
        file: first.display().to_string(),
        line: None,
        column: None,
        message: format!(
            "rendered {} with `helm template` and {}: {}",
            match charts.roots.len() {
                1 => "1 chart".to_string(),
                n => format!("{n} charts"),
            },
            if opts.values.is_empty() {
                "the charts' default values".to_string()
            } else {
                format!(
                    "the values of {}",
                    first_names(opts.values.iter().map(|p| p.display().to_string()))
                )
            },
            first_names(charts.roots.iter().map(|p| p.display().to_string()))
        ),
    });
    let mut docs = Vec::new();
    let namespace = opts.namespace.as_deref();
    let rendered = helm::render_all(&helm, &charts.roots, &opts.values, namespace, load);
    for (root, r) in charts.roots.iter().zip(rendered) {
        if let Rendered::Without { missing, .. } = &r {
            stand_ins.insert_without(root, missing);
        }
        r.sort_into(&mut docs, &mut report.errors, &mut report.notices);
    }
    docs
}
