//! `interlock eval`: expressions with the variables a policy sees. A
//! [`Session`] loads the context once (files, inventory, the policy), so
//! `eval -i` evaluates line after line without reading them again.

use crate::cel::{Activation, Env, Value};
use crate::inventory::{Inventory, ObjectKey, Source};
use crate::manifest::{self, LoadOptions};
use crate::policy::host::{self, InventoryHost, SelfIdentity};
use crate::policy::{self, Operation, PolicySet, Request, RequestShape};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::path::PathBuf;

/// What `interlock eval` is asked (the command line's flags, parsed).
#[derive(Debug, Default, Clone)]
pub struct EvalOptions {
    /// The CEL expression.
    pub expr: Option<String>,
    /// Read expressions from standard input, one a line, with the context
    /// loaded once (:help lists the commands).
    pub interactive: bool,
    /// Evaluate in this policy's context: its variables, params and
    /// indexes, with `request` made from --object as admission sends it.
    pub policy: Option<PathBuf>,
    /// With --policy: evaluate spec.validations[N].expression (and its
    /// message when it fails) instead of --expr.
    pub validation: Option<usize>,
    /// With --policy: the request's operation (CREATE, UPDATE or DELETE;
    /// a DELETE sends --old-object, or --object, as oldObject).
    pub operation: String,
    /// With --policy: the requesting user.
    pub user: String,
    /// With --policy: the user's groups (repeatable; default system:authenticated).
    pub groups: Vec<String>,
    /// With --policy: the subresource (status, scale, ...).
    pub subresource: String,
    /// With --policy: a dry-run request.
    pub dry_run: bool,
    /// The `object` variable (JSON or YAML file).
    pub object: Option<PathBuf>,
    /// The `oldObject` variable.
    pub old_object: Option<PathBuf>,
    /// The `params` variable.
    pub params: Option<PathBuf>,
    /// The `namespaceObject` variable.
    pub namespace_object: Option<PathBuf>,
    /// The `request` variable.
    pub request: Option<PathBuf>,
    /// Objects the inventory functions can find (files or folders).
    pub inventory: Vec<PathBuf>,
    /// Exactly kube-apiserver's environment (what a ValidatingAdmissionPolicy gets).
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
    let session = Session::open(opts)?;
    match opts.validation {
        Some(n) => session.validation(n),
        None => session.eval(opts.expr.as_deref().unwrap_or_default()),
    }
}

/// The objects of `paths` into `inventory`; returns how many.
fn load_inventory(paths: &[PathBuf], inventory: &mut Inventory) -> Result<usize, EvalCommandError> {
    if paths.is_empty() {
        return Ok(0);
    }
    let loaded = manifest::load_paths(paths, &LoadOptions::default());
    if let Some(e) = loaded.errors.first() {
        return Err(EvalCommandError::Input(e.to_string()));
    }
    let count = loaded.documents.len();
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
    Ok(count)
}

/// What expressions are evaluated against, loaded once.
pub struct Session {
    inventory: Inventory,
    object: Option<Json>,
    old: Option<Json>,
    params: Option<Json>,
    mode: Mode,
}

enum Mode {
    /// `--policy`: the policy's environment, `request` made from the object.
    Policy {
        set: PolicySet,
        spec: Json,
        shape: RequestShape,
    },
    /// The variables given as files, in a bare environment.
    Bare {
        env: Env,
        slots: Vec<usize>,
        namespace_object: Json,
        request: Json,
    },
}

impl Session {
    /// Reads every file the options name and compiles the policy, if any.
    pub fn open(opts: &EvalOptions) -> Result<Session, EvalCommandError> {
        let read = |f: &Option<PathBuf>| f.as_ref().map(read_value).transpose();
        let mut inventory = Inventory::new();
        let mode = match &opts.policy {
            Some(file) => policy_mode(file, opts, &mut inventory)?,
            None => bare_mode(opts)?,
        };
        load_inventory(&opts.inventory, &mut inventory)?;
        let session = Session {
            inventory,
            object: read(&opts.object)?,
            old: read(&opts.old_object)?,
            params: read(&opts.params)?,
            mode,
        };
        if let Mode::Policy { shape, .. } = &session.mode {
            session.request(shape)?;
        }
        Ok(session)
    }

    /// Adds the objects of a file or folder to the inventory; returns how many.
    pub fn load(&mut self, path: &std::path::Path) -> Result<usize, EvalCommandError> {
        load_inventory(&[path.to_path_buf()], &mut self.inventory)
    }

    /// The request admission would send for the object.
    fn request(&self, shape: &RequestShape) -> Result<Request<'_>, EvalCommandError> {
        let target = match shape.operation {
            Operation::Delete => self.old.as_ref().or(self.object.as_ref()),
            _ => self.object.as_ref(),
        };
        target
            .and_then(|t| Request::build(t, self.old.as_ref(), shape))
            .ok_or_else(|| {
                EvalCommandError::Input(
                    "--policy needs --object (--old-object for a DELETE): a Kubernetes object with apiVersion, kind and metadata.name, from which `request` is made".into(),
                )
            })
    }

    /// Evaluates `expr`: `{"type": T, "value": V}`.
    pub fn eval(&self, expr: &str) -> Result<Json, EvalCommandError> {
        let (type_name, value) = match &self.mode {
            Mode::Policy { set, shape, .. } => {
                let request = self.request(shape)?;
                set.policies[0]
                    .evaluate_expression(expr, &request, &self.inventory, self.params.as_ref())
                    .map_err(|e| match e {
                        policy::ExpressionError::Compile(c) => {
                            EvalCommandError::Compile(c.to_string())
                        }
                        policy::ExpressionError::Eval(m) => EvalCommandError::Eval(m),
                    })?
            }
            Mode::Bare {
                env,
                slots,
                namespace_object,
                request,
            } => self.eval_bare(env, slots, [namespace_object, request], expr)?,
        };
        Ok(serde_json::json!({"type": type_name, "value": value}))
    }

    /// `--validation N`: the policy's Nth validation, with its message when
    /// it fails, as a finding would have it.
    pub fn validation(&self, n: usize) -> Result<Json, EvalCommandError> {
        let Mode::Policy { set, spec, .. } = &self.mode else {
            return Err(EvalCommandError::Input(
                "--validation needs --policy".into(),
            ));
        };
        let v = spec.pointer(&format!("/validations/{n}")).ok_or_else(|| {
            let count = spec
                .get("validations")
                .and_then(Json::as_array)
                .map_or(0, Vec::len);
            EvalCommandError::Input(format!(
                "--validation {n}: policy {} has {count} validation(s), numbered from 0",
                set.policies[0].name
            ))
        })?;
        let text = |field: &str| v.get(field).and_then(Json::as_str);
        let expr = text("expression").unwrap_or_default();
        let mut out = self.eval(expr)?;
        if out["value"] != Json::Bool(true) {
            let from_expression = text("messageExpression")
                .map(|m| self.eval(m))
                .transpose()?
                .and_then(|m| m["value"].as_str().map(str::to_string));
            let message = from_expression
                .or_else(|| text("message").map(str::to_string))
                .unwrap_or_else(|| format!("failed expression: {}", expr.trim()));
            out["message"] = message.into();
        }
        Ok(out)
    }

    fn eval_bare(
        &self,
        env: &Env,
        slots: &[usize],
        [namespace_object, request]: [&Json; 2],
        expr: &str,
    ) -> Result<(String, Json), EvalCommandError> {
        let program = env
            .compile(expr)
            .map_err(|e| EvalCommandError::Compile(e.to_string()))?;
        let null = Json::Null;
        let values = [
            self.object.as_ref().unwrap_or(&null),
            self.old.as_ref().unwrap_or(&null),
            self.params.as_ref().unwrap_or(&null),
            namespace_object,
            request,
        ];
        let indexes = HashMap::new();
        let host = InventoryHost {
            inventory: &self.inventory,
            confined: None,
            indexes: &indexes,
            me: SelfIdentity {
                uid: None,
                key: ObjectKey::of(values[0]),
            },
            related: Default::default(),
        };
        let mut act = Activation::new(env);
        for (slot, v) in slots.iter().zip(values) {
            act.set(*slot, Value::from_json(v));
        }
        let act = act.with_host(&host);
        let v = program
            .eval(&act)
            .map_err(|e| EvalCommandError::Eval(e.to_string()))?;
        Ok((v.type_name().to_string(), v.to_json()))
    }
}

/// `--policy`: the one policy of the file, compiled (its indexes declared
/// in `inventory`).
fn policy_mode(
    file: &PathBuf,
    opts: &EvalOptions,
    inventory: &mut Inventory,
) -> Result<Mode, EvalCommandError> {
    let loaded = manifest::load_paths(&[file], &LoadOptions::default());
    if let Some(e) = loaded.errors.first() {
        return Err(EvalCommandError::Input(e.to_string()));
    }
    let docs: Vec<manifest::Document> = loaded
        .documents
        .into_iter()
        .filter(|d| policy::is_policy_document(&d.value))
        .collect();
    let doc_values: Vec<Json> = docs.iter().map(|d| d.value.clone()).collect();
    let (set, errors) = PolicySet::compile_documents(docs);
    if !errors.is_empty() {
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        return Err(EvalCommandError::Compile(text.join("\n")));
    }
    inventory
        .set_indexes(&set.index_decls())
        .map_err(|e| EvalCommandError::Compile(e.to_string()))?;
    if set.policies.len() != 1 {
        let names: Vec<&str> = set.policies.iter().map(|p| p.name.as_str()).collect();
        return Err(EvalCommandError::Input(format!(
            "{}: --policy needs a file with one policy, this one has {} ({})",
            file.display(),
            set.policies.len(),
            names.join(", ")
        )));
    }
    let name = &set.policies[0].name;
    let spec = doc_values
        .iter()
        .find(|v| v.pointer("/metadata/name").and_then(Json::as_str) == Some(name))
        .and_then(|v| v.get("spec"))
        .cloned()
        .unwrap_or(Json::Null);
    let shape = RequestShape {
        operation: Operation::parse(&opts.operation).unwrap_or_default(),
        user: opts.user.clone(),
        groups: (!opts.groups.is_empty()).then(|| opts.groups.clone()),
        subresource: opts.subresource.clone(),
        dry_run: opts.dry_run,
    };
    Ok(Mode::Policy { set, spec, shape })
}

/// An expression on its own: the five variables declared, `namespaceObject`
/// and `request` read from their files.
fn bare_mode(opts: &EvalOptions) -> Result<Mode, EvalCommandError> {
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
    let read = |f: &Option<PathBuf>| {
        f.as_ref()
            .map(read_value)
            .transpose()
            .map(|v| v.unwrap_or(Json::Null))
    };
    Ok(Mode::Bare {
        env,
        slots,
        namespace_object: read(&opts.namespace_object)?,
        request: read(&opts.request)?,
    })
}
