//! `interlock eval`: one expression, with the variables a policy sees.

use crate::cel::{Activation, Env, Value};
use crate::inventory::{Inventory, ObjectKey, Source};
use crate::manifest::{self, LoadOptions};
use crate::policy::host::{self, InventoryHost, SelfIdentity};
use crate::policy::{self, Operation, PolicySet, Request, RequestShape};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::path::PathBuf;

#[derive(Debug, Default, clap::Args)]
pub struct EvalOptions {
    /// The CEL expression.
    #[arg(
        short,
        long,
        allow_hyphen_values = true,
        required_unless_present = "validation"
    )]
    pub expr: Option<String>,
    /// Evaluate in this policy's context: its variables, params and
    /// indexes, with `request` made from --object as admission sends it.
    #[arg(long, conflicts_with_all = ["request", "namespace_object", "strict"])]
    pub policy: Option<PathBuf>,
    /// With --policy: evaluate spec.validations[N].expression (and its
    /// message when it fails) instead of --expr.
    #[arg(long, requires = "policy", conflicts_with = "expr")]
    pub validation: Option<usize>,
    /// With --policy: the request's operation (CREATE, UPDATE or DELETE;
    /// a DELETE sends --old-object, or --object, as oldObject).
    #[arg(long, requires = "policy", default_value = "CREATE", value_parser = ["CREATE", "UPDATE", "DELETE"])]
    pub operation: String,
    /// With --policy: the requesting user.
    #[arg(long, requires = "policy", default_value = policy::OFFLINE_USER)]
    pub user: String,
    /// With --policy: the user's groups (repeatable; default system:authenticated).
    #[arg(long = "group", requires = "policy")]
    pub groups: Vec<String>,
    /// With --policy: the subresource (status, scale, ...).
    #[arg(long, requires = "policy", default_value = "")]
    pub subresource: String,
    /// With --policy: a dry-run request.
    #[arg(long, requires = "policy")]
    pub dry_run: bool,
    /// The `object` variable (JSON or YAML file).
    #[arg(long)]
    pub object: Option<PathBuf>,
    /// The `oldObject` variable.
    #[arg(long)]
    pub old_object: Option<PathBuf>,
    /// The `params` variable.
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// The `namespaceObject` variable.
    #[arg(long)]
    pub namespace_object: Option<PathBuf>,
    /// The `request` variable.
    #[arg(long)]
    pub request: Option<PathBuf>,
    /// Objects the inventory functions can find (files or folders).
    #[arg(long)]
    pub inventory: Vec<PathBuf>,
    /// Exactly kube-apiserver's environment (what a ValidatingAdmissionPolicy gets).
    #[arg(long)]
    pub strict: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum EvalCommandError {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Compile(String),
    #[error("{0}")]
    Eval(String),
}

impl EvalCommandError {
    /// 1 for an evaluation error, 2 for anything found before evaluation.
    pub fn exit_code(&self) -> i32 {
        match self {
            EvalCommandError::Eval(_) => 1,
            _ => 2,
        }
    }
}

/// Reads one JSON or YAML value (any shape) from a file.
fn read_value(path: &PathBuf) -> Result<Json, EvalCommandError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EvalCommandError::Input(format!("{}: {e}", path.display())))?;
    if let Ok(v) = serde_json::from_str(&text) {
        return Ok(v);
    }
    let loaded = manifest::load_str(
        manifest::Source::file(path),
        &text,
        manifest::Format::Yaml,
        &LoadOptions::default(),
    );
    if let Some(e) = loaded.errors.first() {
        return Err(EvalCommandError::Input(e.to_string()));
    }
    loaded
        .documents
        .into_iter()
        .next()
        .map(|d| d.value)
        .ok_or_else(|| EvalCommandError::Input(format!("{}: no document", path.display())))
}

/// Evaluates and returns `{"type": T, "value": V}`.
pub fn run(opts: &EvalOptions) -> Result<Json, EvalCommandError> {
    match &opts.policy {
        Some(policy) => in_policy(policy, opts),
        None => bare(opts, opts.expr.as_deref().unwrap_or_default()),
    }
}

/// The objects of `--inventory`, into `inventory`.
fn load_inventory(paths: &[PathBuf], inventory: &mut Inventory) -> Result<(), EvalCommandError> {
    if paths.is_empty() {
        return Ok(());
    }
    let loaded = manifest::load_paths(paths, &LoadOptions::default());
    if let Some(e) = loaded.errors.first() {
        return Err(EvalCommandError::Input(e.to_string()));
    }
    for d in loaded.documents {
        let source = Source {
            file: d.source.to_string(),
            line: d.line,
        };
        inventory
            .upsert(&d.value, Some(source.clone()))
            .map_err(|e| {
                EvalCommandError::Input(format!("{}:{}: {e}", source.file, source.line))
            })?;
    }
    Ok(())
}

/// `--policy`: the expression (or a validation) in the policy's context.
fn in_policy(file: &PathBuf, opts: &EvalOptions) -> Result<Json, EvalCommandError> {
    let loaded = manifest::load_paths(&[file], &LoadOptions::default());
    if let Some(e) = loaded.errors.first() {
        return Err(EvalCommandError::Input(e.to_string()));
    }
    let mut inventory = Inventory::new();
    let docs: Vec<manifest::Document> = loaded
        .documents
        .into_iter()
        .filter(|d| policy::is_policy_document(&d.value))
        .collect();
    let doc_values: Vec<Json> = docs.iter().map(|d| d.value.clone()).collect();
    let (set, errors) = PolicySet::compile_documents(docs, &mut inventory);
    if !errors.is_empty() {
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        return Err(EvalCommandError::Compile(text.join("\n")));
    }
    let compiled = match set.policies.as_slice() {
        [one] => one,
        many => {
            let names: Vec<&str> = many.iter().map(|p| p.name.as_str()).collect();
            return Err(EvalCommandError::Input(format!(
                "{}: --policy needs a file with one policy, this one has {} ({})",
                file.display(),
                many.len(),
                names.join(", ")
            )));
        }
    };
    let spec = doc_values
        .iter()
        .find(|v| v.pointer("/metadata/name").and_then(Json::as_str) == Some(&compiled.name))
        .and_then(|v| v.get("spec"))
        .cloned()
        .unwrap_or(Json::Null);
    load_inventory(&opts.inventory, &mut inventory)?;
    let object = opts.object.as_ref().map(read_value).transpose()?;
    let old = opts.old_object.as_ref().map(read_value).transpose()?;
    let params = opts.params.as_ref().map(read_value).transpose()?;
    let shape = RequestShape {
        operation: Operation::parse(&opts.operation).unwrap_or_default(),
        user: opts.user.clone(),
        groups: (!opts.groups.is_empty()).then(|| opts.groups.clone()),
        subresource: opts.subresource.clone(),
        dry_run: opts.dry_run,
    };
    let target = match shape.operation {
        Operation::Delete => old.as_ref().or(object.as_ref()),
        _ => object.as_ref(),
    };
    let request = target
        .and_then(|t| Request::build(t, old.as_ref(), &shape))
        .ok_or_else(|| {
            EvalCommandError::Input(
                "--policy needs --object (--old-object for a DELETE): a Kubernetes object with apiVersion, kind and metadata.name, from which `request` is made".into(),
            )
        })?;
    let (expr, validation) = match opts.validation {
        None => (opts.expr.clone().unwrap_or_default(), None),
        Some(n) => {
            let v = spec.pointer(&format!("/validations/{n}")).ok_or_else(|| {
                let count = spec
                    .get("validations")
                    .and_then(Json::as_array)
                    .map_or(0, Vec::len);
                EvalCommandError::Input(format!(
                    "--validation {n}: policy {} has {count} validation(s), numbered from 0",
                    compiled.name
                ))
            })?;
            let expr = v
                .get("expression")
                .and_then(Json::as_str)
                .unwrap_or_default();
            (expr.to_string(), Some(v.clone()))
        }
    };
    let eval = |e: &str| {
        compiled
            .evaluate_expression(e, &request, &inventory, params.as_ref())
            .map_err(|e| match e {
                policy::ExpressionError::Compile(c) => EvalCommandError::Compile(c.to_string()),
                policy::ExpressionError::Eval(m) => EvalCommandError::Eval(m),
            })
    };
    let (type_name, value) = eval(&expr)?;
    let mut out = serde_json::json!({"type": type_name, "value": value});
    // A validation that fails gets its message, as a finding would.
    if let (Some(v), false) = (validation, value == Json::Bool(true)) {
        let from_expression = v
            .get("messageExpression")
            .and_then(Json::as_str)
            .map(eval)
            .transpose()?
            .and_then(|(_, m)| m.as_str().map(str::to_string));
        let message = from_expression
            .or_else(|| v.get("message").and_then(Json::as_str).map(str::to_string))
            .unwrap_or_else(|| format!("failed expression: {}", expr.trim()));
        out["message"] = message.into();
    }
    Ok(out)
}

/// An expression on its own, with the variables given as files.
fn bare(opts: &EvalOptions, expr: &str) -> Result<Json, EvalCommandError> {
    let mut env = if opts.strict {
        Env::kubernetes()
    } else {
        Env::interlock()
    };
    let names = [
        "object",
        "oldObject",
        "params",
        "namespaceObject",
        "request",
    ];
    let slots: Vec<usize> = names.iter().map(|n| env.add_variable(n)).collect();
    host::declare(&mut env, !opts.strict);
    let program = env
        .compile(expr)
        .map_err(|e| EvalCommandError::Compile(e.to_string()))?;
    let files = [
        &opts.object,
        &opts.old_object,
        &opts.params,
        &opts.namespace_object,
        &opts.request,
    ];
    let values: Vec<Json> = files
        .iter()
        .map(|f| {
            f.as_ref()
                .map(read_value)
                .transpose()
                .map(|v| v.unwrap_or(Json::Null))
        })
        .collect::<Result<_, _>>()?;
    let mut inventory = Inventory::new();
    load_inventory(&opts.inventory, &mut inventory)?;
    let indexes = HashMap::new();
    let host = InventoryHost {
        inventory: &inventory,
        indexes: &indexes,
        me: SelfIdentity {
            uid: None,
            key: ObjectKey::of(&values[0]),
        },
        related: Default::default(),
    };
    let mut act = Activation::new(&env);
    for (slot, v) in slots.iter().zip(&values) {
        act.set(*slot, Value::from_json(v));
    }
    let act = act.with_host(&host);
    let v = program
        .eval(&act)
        .map_err(|e| EvalCommandError::Eval(e.to_string()))?;
    Ok(serde_json::json!({"type": v.type_name(), "value": v.to_json()}))
}
