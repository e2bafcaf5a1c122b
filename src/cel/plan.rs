//! What cel-go does between type-checking an expression and evaluating it,
//! in kube-apiserver's order (`admission/plugin/cel/compile.go`): the AST
//! validators run on the checked expression and report every issue, the
//! first by position shown; then the caller compares the result type;
//! then the planner builds the program (`OptOptimize`), folding constant
//! conversions and aggregates and refusing constant qualifiers of the
//! wrong type. A planning error has no position: `program instantiation
//! failed: ...`.

use super::ast::{Expr, ExprKind, Literal, Pos};
use super::compile::{children, Env};
use super::error::CompileError;
use super::functions::{self, Style};
use super::parser::qualified_name;
use super::program::Program;
use super::types::Ty;
use super::value::Type;
use std::sync::Arc;

/// A parsed, checked and validated expression whose program is planned
/// but not yet given out: kube-apiserver checks the result type first, so
/// `uint(-1)` as a validation is `must evaluate to bool but got uint`.
#[derive(Debug)]
pub struct Planned {
    pub(super) program: Program,
    pub(super) planning: Option<CompileError>,
}

impl Planned {
    /// The expression's static type, when the environment checks types.
    pub fn static_type(&self) -> Option<&Ty> {
        self.program.static_type()
    }

    /// The program, or cel-go's planning error.
    pub fn plan(self) -> Result<Program, CompileError> {
        match self.planning {
            Some(e) => Err(e),
            None => Ok(self.program),
        }
    }
}

/// The standard type conversions, which cel-go's planner evaluates when
/// their argument is a constant (`overloads.IsTypeConversionFunction`).
const CONVERSIONS: [&str; 10] = [
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "string",
    "timestamp",
    "type",
    "uint",
];

impl Env {
    /// cel-go's validators on a checked expression, in kube-apiserver's
    /// configuration: homogeneous aggregate literals (found by the
    /// checker, `homogeneous`), `format` calls, and duration, timestamp
    /// and `matches` literals. cel-go reports them sorted by position.
    pub(super) fn validate(
        &self,
        src: &str,
        ast: &Expr,
        homogeneous: Vec<(Pos, String)>,
    ) -> Option<CompileError> {
        self.validation_issues(src, ast, homogeneous)
            .into_iter()
            .next()
    }

    /// Every issue of cel-go's validators, in its order (stable by
    /// position).
    pub(super) fn validation_issues(
        &self,
        src: &str,
        ast: &Expr,
        homogeneous: Vec<(Pos, String)>,
    ) -> Vec<CompileError> {
        let mut issues: Vec<CompileError> = homogeneous
            .into_iter()
            .map(|(pos, msg)| CompileError::new(src, pos, msg))
            .collect();
        self.literal_issues(src, ast, &mut issues);
        issues.sort_by_key(|e| (e.line, e.column));
        issues
    }

    fn literal_issues(&self, src: &str, e: &Expr, out: &mut Vec<CompileError>) {
        stacker::maybe_grow(64 * 1024, 1024 * 1024, || {
            if let ExprKind::Call { function, args, .. } = &e.kind {
                // cel-go validates the first argument of the call, which
                // for the global `matches(s, re)` is the string, not the
                // pattern.
                if let Some((arg, ExprKind::Literal(l))) = args.first().map(|a| (a, &a.kind)) {
                    let invalid = match (&**function, l) {
                        // kube-apiserver's validator cannot evaluate
                        // `duration(1)`, which its checker accepts.
                        ("duration", Literal::String(_)) | ("timestamp", _) => {
                            self.fold(e).is_err()
                        }
                        ("duration", _) => true,
                        ("matches", Literal::String(s)) => functions::regex::compile(s).is_err(),
                        _ => false,
                    };
                    if invalid {
                        let msg = format!("invalid {function} argument");
                        out.push(CompileError::new(src, arg.pos, msg));
                    }
                }
            }
            for child in children(e) {
                self.literal_issues(src, child, out);
            }
        })
    }

    /// The first error cel-go's planner meets building `ast`'s program,
    /// as a planning [`CompileError`].
    pub(super) fn planning_failure(
        &self,
        src: &str,
        ast: &Expr,
        type_valued_locals: &[(Pos, Arc<str>)],
    ) -> Option<CompileError> {
        let planner = Planner {
            env: self,
            type_valued_locals,
        };
        let message = planner.plan(ast).err()?;
        Some(CompileError {
            planning: true,
            ..CompileError::new(src, 0, message.to_string())
        })
    }
}

/// Why cel-go's planner refuses a program, in its words.
#[derive(Debug, thiserror::Error)]
enum PlanError {
    #[error("reference to undefined type: {0}")]
    UndefinedType(Arc<str>),
    #[error("no such overload: {function}({arg})")]
    NoSuchOverload { function: String, arg: String },
    #[error(transparent)]
    Fold(#[from] super::compile::FoldError),
    #[error("invalid qualifier type: {0}")]
    InvalidQualifier(&'static str),
    /// A constant pattern that does not compile.
    #[error(transparent)]
    Pattern(#[from] super::k8s::regex::RegexError),
}

/// cel-go's planner, as far as it can fail.
struct Planner<'e> {
    env: &'e Env,
    type_valued_locals: &'e [(Pos, Arc<str>)],
}

impl Planner<'_> {
    /// Plans `e` as cel-go does, children first; whether it plans to a
    /// constant.
    fn plan(&self, e: &Expr) -> Result<bool, PlanError> {
        stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.plan_node(e))
    }

    fn plan_all<'x>(&self, exprs: impl IntoIterator<Item = &'x Expr>) -> Result<bool, PlanError> {
        let mut constant = true;
        for e in exprs {
            constant &= self.plan(e)?;
        }
        Ok(constant)
    }

    fn plan_node(&self, e: &Expr) -> Result<bool, PlanError> {
        Ok(match &e.kind {
            ExprKind::Literal(_) => true,
            ExprKind::Ident(name) if self.type_valued_locals.contains(&(e.pos, name.clone())) => {
                return Err(PlanError::UndefinedType(name.clone()))
            }
            ExprKind::Ident(name) => self.is_type_name(name),
            ExprKind::Select {
                operand, optional, ..
            } => match qualified_name(e).filter(|_| !optional) {
                Some(q) if self.env.variable_slot(q.trim_start_matches('.')).is_some() => false,
                Some(q) if self.is_type_name(&q) => true,
                _ => {
                    self.plan(operand)?;
                    false
                }
            },
            ExprKind::Index { operand, index, .. } => {
                self.plan(operand)?;
                if self.plan(index)? {
                    self.qualifier(index)?;
                }
                false
            }
            ExprKind::Call {
                function,
                target,
                args,
            } => {
                let all: Vec<&Expr> = target.iter().map(|t| &**t).chain(args).collect();
                let mut constant = Vec::with_capacity(all.len());
                for a in &all {
                    constant.push(self.plan(a)?);
                }
                self.plan_call(e, function, target.is_none(), &all, &constant)?
            }
            ExprKind::List { elements, .. } => self.plan_all(elements)?,
            ExprKind::Map { entries } => {
                self.plan_all(entries.iter().flat_map(|en| [&en.key, &en.value]))?
            }
            ExprKind::Comprehension(c) => {
                self.plan_all([
                    &c.accu_init,
                    &c.range,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ])?;
                false
            }
            ExprKind::Has { .. }
            | ExprKind::Struct { .. }
            | ExprKind::And(..)
            | ExprKind::Or(..)
            | ExprKind::Conditional(..)
            | ExprKind::Bind { .. } => {
                self.plan_all(children(e))?;
                false
            }
        })
    }

    /// A call whose arguments (receiver first) are planned; `constant`
    /// says which are constants.
    fn plan_call(
        &self,
        e: &Expr,
        function: &str,
        global: bool,
        args: &[&Expr],
        constant: &[bool],
    ) -> Result<bool, PlanError> {
        if let (true, [arg], [true]) = (global, args, constant) {
            if CONVERSIONS.contains(&function) {
                return self.fold_conversion(e, function, arg).map(|_| true);
            }
        }
        if function == "@in" {
            // A constant empty list: cel-go plans `x in []` as `false`.
            return Ok(
                matches!(args, [_, Expr { kind: ExprKind::List { elements, .. }, .. }] if elements.is_empty()),
            );
        }
        let style = if global { Style::Global } else { Style::Member };
        let prepare = functions::lookup(self.env.libs(), function, style)
            .into_iter()
            .find_map(|d| d.prepare);
        // cel-go compiles a constant pattern when it plans the call.
        if let (Some(prepare), Some(pattern), Some(true)) = (prepare, args.get(1), constant.get(1))
        {
            if let Some(s) = self
                .env
                .fold(pattern)
                .ok()
                .as_ref()
                .and_then(|v| v.as_str())
            {
                prepare(s)?;
            }
        }
        Ok(false)
    }

    /// Evaluates a conversion of a constant, as cel-go's planner does;
    /// its error refuses the program.
    fn fold_conversion(&self, e: &Expr, function: &str, arg: &Expr) -> Result<(), PlanError> {
        match self.env.fold(e) {
            Ok(_) => Ok(()),
            Err(m) if m.to_string() == "no such overload" => {
                let t = self.env.fold(arg).map(|v| v.type_of()).unwrap_or(Type::Dyn);
                Err(PlanError::NoSuchOverload {
                    function: function.to_string(),
                    arg: t.name().to_string(),
                })
            }
            Err(m) => Err(m.into()),
        }
    }

    /// cel-go qualifies by constant strings, integers, unsigned integers,
    /// booleans and doubles only; any other constant index is refused
    /// with its Go type.
    fn qualifier(&self, index: &Expr) -> Result<(), PlanError> {
        let go_type = match self.env.fold(index).map(|v| v.type_of()) {
            Ok(Type::String | Type::Int | Type::Uint | Type::Bool | Type::Double) => return Ok(()),
            Ok(Type::Null) => "types.Null",
            Ok(Type::Bytes) => "types.Bytes",
            Ok(Type::Duration) => "types.Duration",
            Ok(Type::Timestamp) => "types.Timestamp",
            Ok(Type::List) => "*types.baseList",
            Ok(Type::Map) => "*types.baseMap",
            Ok(Type::Type) => "*types.Type",
            Ok(Type::Optional) => "*types.Optional",
            Ok(_) | Err(_) => "*types.Err",
        };
        Err(PlanError::InvalidQualifier(go_type))
    }

    fn is_type_name(&self, name: &str) -> bool {
        let name = name.trim_start_matches('.');
        self.env.variable_slot(name).is_none()
            && (Type::from_name(name).is_some()
                || functions::named_type(self.env.libs(), name).is_some())
    }
}
