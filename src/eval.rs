//! `interlock eval`: one expression, with the variables a policy sees.

use crate::cel::{Activation, Env, Value};
use crate::inventory::{Inventory, ObjectKey, Source};
use crate::manifest::{self, LoadOptions};
use crate::policy::host::{self, InventoryHost, SelfIdentity};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::path::PathBuf;

#[derive(Debug, Default, clap::Args)]
pub struct EvalOptions {
    /// The CEL expression.
    #[arg(short, long, allow_hyphen_values = true)]
    pub expr: String,
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
        .compile(&opts.expr)
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
    if !opts.inventory.is_empty() {
        let loaded = manifest::load_paths(&opts.inventory, &LoadOptions::default());
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
    }
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
