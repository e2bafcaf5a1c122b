//! Environments and compilation: names are resolved to slots and functions
//! to implementations once, so evaluation does no lookups by name.

use super::ast::{Expr, ExprKind, Literal, Pos};
use super::error::CompileError;
use super::functions::{self, FnDecl, Lib, LibSet, Style};
use super::parser::{self, qualified_name, ParseLimits, ACCU};
use super::plan::Planned;
use super::program::{Guard, Node, OptionalEnd, Program};
use super::types::Ty;
use super::value::{Type, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// A function the host provides at evaluation time (inventory lookups).
#[derive(Debug, Clone)]
pub struct HostFunction {
    pub name: Arc<str>,
    pub arities: Vec<usize>,
}

/// Which names and functions an expression may use.
#[derive(Debug, Clone)]
pub struct Env {
    libs: LibSet,
    variables: Vec<Arc<str>>,
    /// Static types of `variables` (same order; `dyn` unless declared).
    variable_types: Vec<Ty>,
    /// Names reachable as `variables.NAME`, in declaration order.
    lazy: Vec<Arc<str>>,
    lazy_types: Vec<Ty>,
    /// Variables that have a slot but that the checker reports as
    /// undeclared (`params` of a policy without a paramKind).
    hidden: Vec<Arc<str>>,
    lazy_enabled: bool,
    host: Vec<HostFunction>,
    limits: ParseLimits,
    /// Undeclared names and functions fail at evaluation instead of at
    /// compile time (cel-go without its checker; conformance tests only).
    pub unchecked: bool,
    /// Per-evaluation cost limit.
    pub cost_limit: u64,
}

/// kube-apiserver's per-expression runtime cost limit.
pub const DEFAULT_COST_LIMIT: u64 = 1_000_000;

impl Env {
    /// Exactly what kube-apiserver v1.36 gives a ValidatingAdmissionPolicy.
    pub fn kubernetes() -> Env {
        Env::with_libs(LibSet::KUBERNETES)
    }

    /// What kube-apiserver v1.36 gives a MutatingAdmissionPolicy: a
    /// ValidatingAdmissionPolicy's libraries, `JSONPatch{...}`,
    /// `jsonpatch.escapeKey` and `Object{...}` initializers.
    pub fn kubernetes_mutating() -> Env {
        Env::with_libs(LibSet::MUTATING)
    }

    /// Kubernetes plus `cel.bind`, math and base64; inventory functions are
    /// added by the policy engine as host functions.
    pub fn interlock() -> Env {
        Env::with_libs(LibSet::INTERLOCK)
    }

    /// Every library we have, for the CEL specification's conformance cases.
    pub fn conformance() -> Env {
        Env::with_libs(LibSet::ALL)
    }

    fn with_libs(libs: LibSet) -> Env {
        Env {
            libs,
            variables: Vec::new(),
            variable_types: Vec::new(),
            lazy: Vec::new(),
            lazy_types: Vec::new(),
            hidden: Vec::new(),
            lazy_enabled: false,
            host: Vec::new(),
            limits: ParseLimits::default(),
            unchecked: false,
            cost_limit: DEFAULT_COST_LIMIT,
        }
    }

    pub fn libs(&self) -> LibSet {
        self.libs
    }

    pub fn add_variable(&mut self, name: &str) -> usize {
        if let Some(i) = self.variable_slot(name) {
            return i;
        }
        self.variables.push(name.into());
        self.variable_types.push(Ty::Dyn);
        self.variables.len() - 1
    }

    /// Declares a variable with a static type (the checker's; evaluation
    /// does not depend on it).
    pub fn add_typed_variable(&mut self, name: &str, ty: Ty) -> usize {
        let slot = self.add_variable(name);
        self.variable_types[slot] = ty;
        slot
    }

    pub fn with_variables(mut self, names: &[&str]) -> Env {
        for n in names {
            self.add_variable(n);
        }
        self
    }

    pub fn variable_slot(&self, name: &str) -> Option<usize> {
        self.variables.iter().position(|v| &**v == name)
    }

    pub fn variables(&self) -> &[Arc<str>] {
        &self.variables
    }

    /// Declares `variables.NAME` (a policy's variables, evaluated lazily).
    pub fn add_lazy_variable(&mut self, name: &str) -> usize {
        self.add_typed_lazy_variable(name, Ty::Dyn)
    }

    /// Keeps `name`'s slot but refuses expressions that read it, as
    /// kube-apiserver does not declare it.
    pub fn hide_variable(&mut self, name: &str) {
        self.hidden.push(name.into());
    }

    /// [`Env::add_lazy_variable`] with the static type of its expression.
    pub fn add_typed_lazy_variable(&mut self, name: &str, ty: Ty) -> usize {
        self.lazy_enabled = true;
        self.lazy_types.push(ty);
        self.lazy.push(name.into());
        self.lazy.len() - 1
    }

    /// Gives the `i`th `variables.NAME` another static type.
    pub fn retype_lazy_variable(&mut self, i: usize, ty: Ty) {
        self.lazy_types[i] = ty;
    }

    /// Makes `variables.x` resolve (or fail to compile) even before any
    /// variable is declared.
    pub fn enable_lazy_variables(&mut self) {
        self.lazy_enabled = true;
    }

    pub fn add_host_function(&mut self, name: &str, arities: &[usize]) -> usize {
        self.host.push(HostFunction {
            name: name.into(),
            arities: arities.to_vec(),
        });
        self.host.len() - 1
    }

    /// Whether expressions are type-checked as kube-apiserver does.
    pub fn checks_types(&self) -> bool {
        self.libs.has(Lib::Homogeneous) && !self.unchecked
    }

    pub fn compile(&self, src: &str) -> Result<Program, CompileError> {
        self.check_expression(src)?.plan()
    }

    /// Parses, checks and validates `src` as kube-apiserver's cel-go
    /// compiles it, and plans its program (see [`Planned`]).
    pub fn check_expression(&self, src: &str) -> Result<Planned, CompileError> {
        let ast = parser::parse(src, self.limits)?;
        let checked = self
            .checks_types()
            .then(|| self.check(src, &ast))
            .transpose()?;
        let (tracked, resolved) = checked
            .as_ref()
            .map(|c| (c.tracked.clone(), c.resolved.clone()))
            .unwrap_or_default();
        let mut c = Compiler {
            env: self,
            src,
            scope: Vec::new(),
            tracked,
            resolved,
        };
        let root = c.compile(&ast)?;
        let Some(checked) = checked else {
            return Ok(Planned {
                program: Program::new(root, src, None),
                planning: None,
            });
        };
        if let Some(issue) = self.validate(src, &ast, checked.homogeneous) {
            return Err(issue);
        }
        Ok(Planned {
            program: Program::new(root, src, Some(checked.ty)),
            planning: self.planning_failure(src, &ast, &checked.type_valued_locals),
        })
    }

    /// Every issue cel-go's `Env.Compile` (parse, check, validators)
    /// reports for `src`, in its order: what kube-apiserver's
    /// type-checking controller writes into a policy's status. Empty when
    /// the expression compiles.
    pub fn type_issues(&self, src: &str) -> Vec<CompileError> {
        let ast = match parser::parse(src, self.limits) {
            Ok(ast) => ast,
            Err(e) => return vec![e],
        };
        match self.check_all(src, &ast) {
            Err(errors) => errors,
            Ok(checked) => self.validation_issues(src, &ast, checked.homogeneous),
        }
    }

    /// Evaluates a constant subexpression (literals, type names,
    /// conversions and aggregates of them), as cel-go's planner folds it.
    pub(super) fn fold(&self, e: &Expr) -> Result<Value<'static>, FoldError> {
        let mut c = Compiler {
            env: self,
            src: "",
            scope: Vec::new(),
            tracked: Vec::new(),
            resolved: HashMap::new(),
        };
        let node = c.compile(e).map_err(FoldError::Compile)?;
        Program::new(node, "", None)
            .eval(&super::program::Activation::new(self))
            .map_err(FoldError::Eval)
    }

    fn check(&self, src: &str, ast: &Expr) -> Result<super::checker::TypeChecked, CompileError> {
        self.check_all(src, ast)
            .map_err(|mut errors| errors.swap_remove(0))
    }

    fn check_all(
        &self,
        src: &str,
        ast: &Expr,
    ) -> Result<super::checker::TypeChecked, Vec<CompileError>> {
        let variables: Vec<(Arc<str>, Ty)> = self
            .variables
            .iter()
            .cloned()
            .zip(self.variable_types.iter().cloned())
            .filter(|(n, _)| !self.hidden.contains(n))
            .collect();
        let lazy: Vec<(Arc<str>, Ty)> = self
            .lazy
            .iter()
            .cloned()
            .zip(self.lazy_types.iter().cloned())
            .collect();
        let is_global_function = |name: &str| {
            self.host.iter().any(|h| &*h.name == name)
                || !functions::lookup(self.libs, name, Style::Global).is_empty()
        };
        let type_name = |name: &str| {
            Type::from_name(name)
                .or_else(|| functions::named_type(self.libs, name))
                .map(|t| static_type_of(&t))
        };
        let scope = super::checker::Scope {
            variables: &variables,
            hidden: &self.hidden,
            lazy: self.lazy_enabled.then_some(lazy.as_slice()),
            is_global_function: &is_global_function,
            is_member_function: &|name: &str| {
                !functions::lookup(self.libs, name, Style::Member).is_empty()
            },
            bind_enabled: self.libs.has(Lib::Bind),
            type_name: &type_name,
        };
        super::checker::check_all(src, ast, &scope)
    }
}

/// The checker's type for a runtime type name (`list` is `list(dyn)`).
fn static_type_of(t: &Type) -> Ty {
    match t {
        Type::Null => Ty::Null,
        Type::Bool => Ty::Bool,
        Type::Int => Ty::Int,
        Type::Uint => Ty::Uint,
        Type::Double => Ty::Double,
        Type::String => Ty::String,
        Type::Bytes => Ty::Bytes,
        // cel-go declares the type names `list` and `map` with its
        // standard library's type parameters.
        Type::List => Ty::list(Ty::Param("A".into())),
        Type::Map => Ty::map(Ty::Param("A".into()), Ty::Param("B".into())),
        Type::Type => Ty::Type(None),
        Type::Duration => Ty::Duration,
        Type::Timestamp => Ty::Timestamp,
        Type::Optional => Ty::optional(Ty::Dyn),
        Type::Dyn => Ty::Dyn,
        Type::Named(n) => Ty::Named(n.clone()),
    }
}

struct Compiler<'e> {
    env: &'e Env,
    src: &'e str,
    /// Local names in scope, innermost last; the index is the runtime slot.
    scope: Vec<Arc<str>>,
    /// Where the checker resolved `sort` or `sortBy` to one overload
    /// ([`super::checker::TypeChecked::tracked`]).
    tracked: Vec<Pos>,
    /// The calls the checker resolved to one overload
    /// ([`super::checker::TypeChecked::resolved`]).
    resolved: HashMap<(Pos, String), Arc<[Ty]>>,
}

type CResult = Result<Node, CompileError>;

impl<'e> Compiler<'e> {
    fn err(&self, pos: Pos, msg: impl Into<String>) -> CompileError {
        CompileError::new(self.src, pos, msg)
    }

    fn local(&self, name: &str) -> Option<usize> {
        self.scope.iter().rposition(|n| &**n == name)
    }

    fn compile(&mut self, e: &Expr) -> CResult {
        stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.compile_node(e))
    }

    fn compile_node(&mut self, e: &Expr) -> CResult {
        Ok(match &e.kind {
            ExprKind::Literal(l) => Node::Const(literal(l)),
            ExprKind::Ident(name) => self.ident(e.pos, name)?,
            ExprKind::Select {
                operand,
                field,
                optional,
            } => {
                if !optional {
                    if let Some(n) = self.qualified(e)? {
                        return Ok(n);
                    }
                }
                Node::Select {
                    operand: Box::new(self.compile(operand)?),
                    field: field.clone(),
                    optional: *optional,
                }
            }
            ExprKind::Has { operand, field } => Node::Has {
                operand: Box::new(self.compile(operand)?),
                field: field.clone(),
            },
            ExprKind::Index {
                operand,
                index,
                optional,
            } => Node::Index {
                operand: Box::new(self.compile(operand)?),
                index: Box::new(self.compile(index)?),
                optional: *optional,
            },
            ExprKind::Call {
                function,
                target,
                args,
            } => self.call(e.pos, function, target.as_deref(), args)?,
            ExprKind::List { elements, optional } => {
                if !optional.is_empty() && !self.env.libs.has(Lib::Optional) {
                    return Err(self.err(e.pos, "optional syntax is not enabled"));
                }
                let mut items = Vec::with_capacity(elements.len());
                for (i, el) in elements.iter().enumerate() {
                    items.push((self.compile(el)?, optional.contains(&i)));
                }
                Node::List(items)
            }
            ExprKind::Map { entries } => {
                let mut items = Vec::with_capacity(entries.len());
                // cel-go builds a map literal as a Go map at evaluation,
                // keyed by any value Go can hash (see `Evaluator::map`);
                // the CEL specification allows four key types only.
                let spec = self.env.libs.has(Lib::Spec);
                for en in entries {
                    let refused = matches!(
                        &en.key.kind,
                        ExprKind::Literal(Literal::Double(_) | Literal::Null)
                    );
                    if spec && refused {
                        return Err(self.err(en.key.pos, "unsupported map key type"));
                    }
                    let key = self.compile(&en.key)?;
                    let value = self.compile(&en.value)?;
                    items.push((key, value, en.optional));
                }
                Node::Map(items, spec)
            }
            ExprKind::Struct { name, fields } => self.structure(e.pos, name, fields)?,
            ExprKind::And(a, b) => {
                Node::And(Box::new(self.compile(a)?), Box::new(self.compile(b)?))
            }
            ExprKind::Or(a, b) => Node::Or(Box::new(self.compile(a)?), Box::new(self.compile(b)?)),
            ExprKind::Conditional(c, t, f) => Node::Conditional(
                Box::new(self.compile(c)?),
                Box::new(self.compile(t)?),
                Box::new(self.compile(f)?),
            ),
            ExprKind::Comprehension(c) => {
                if c.iter_var2.is_some() && !self.env.libs.has(Lib::TwoVar) {
                    return Err(self.err(e.pos, "two-variable comprehensions are not enabled"));
                }
                let range = self.compile(&c.range)?;
                let accu_init = self.compile(&c.accu_init)?;
                self.scope.push(c.accu_var.clone());
                self.scope.push(c.iter_var.clone());
                if let Some(v2) = &c.iter_var2 {
                    self.scope.push(v2.clone());
                }
                let cond = self.compile(&c.loop_cond);
                let step = self.compile(&c.loop_step);
                let vars = if c.iter_var2.is_some() { 2 } else { 1 };
                self.scope.truncate(self.scope.len() - vars);
                let result = self.compile(&c.result);
                self.scope.pop();
                Node::Comprehension(Box::new(super::program::Comprehension {
                    two_vars: c.iter_var2.is_some(),
                    range,
                    accu_init,
                    cond: cond?,
                    step: step?,
                    result: result?,
                }))
            }
            ExprKind::Bind {
                name,
                init,
                body,
                from_macro,
            } => {
                if !from_macro && !self.env.libs.has(Lib::Bind) {
                    return Err(self.err(
                        e.pos,
                        "undeclared reference to 'bind' (in container 'cel'): cel.bind is not available in this environment",
                    ));
                }
                let init = self.compile(init)?;
                self.scope.push(name.clone());
                let body = self.compile(body);
                self.scope.pop();
                Node::Bind(Box::new(init), Box::new(body?))
            }
        })
    }

    fn ident(&mut self, pos: Pos, name: &str) -> CResult {
        if let Some(rooted) = name.strip_prefix('.') {
            return self.global_name(pos, rooted);
        }
        if let Some(slot) = self.local(name) {
            return Ok(Node::Local(slot));
        }
        self.global_name(pos, name)
    }

    fn global_name(&self, pos: Pos, name: &str) -> CResult {
        if let Some(slot) = self.env.variable_slot(name) {
            return Ok(Node::Global(slot));
        }
        if let Some(t) = Type::from_name(name) {
            return Ok(Node::Const(Value::Type(t)));
        }
        if let Some(t) = functions::named_type(self.env.libs, name) {
            return Ok(Node::Const(Value::Type(t)));
        }
        self.undeclared(pos, name)
    }

    fn undeclared(&self, pos: Pos, name: &str) -> CResult {
        let msg = format!("undeclared reference to '{name}' (in container '')");
        if self.env.unchecked {
            return Ok(Node::Error(msg.into()));
        }
        Err(self.err(pos, msg))
    }

    /// Resolves `a.b.c` to a qualified global (a type name, or
    /// `variables.x`), when no local shadows its root.
    fn qualified(&mut self, e: &Expr) -> Result<Option<Node>, CompileError> {
        let Some(q) = qualified_name(e) else {
            return Ok(None);
        };
        let rooted = q.starts_with('.');
        let q = q.trim_start_matches('.');
        let root = q.split('.').next().unwrap_or("");
        if !rooted && self.local(root).is_some() {
            return Ok(None);
        }
        if let Some(slot) = self.env.variable_slot(q) {
            return Ok(Some(Node::Global(slot)));
        }
        if let Some(t) = Type::from_name(q).or_else(|| functions::named_type(self.env.libs, q)) {
            return Ok(Some(Node::Const(Value::Type(t))));
        }
        if let Some(field) = q.strip_prefix("variables.") {
            if self.env.lazy_enabled && !field.contains('.') {
                return match self.env.lazy.iter().position(|n| &**n == field) {
                    Some(i) => Ok(Some(Node::Lazy(i, self.env.lazy[i].clone()))),
                    None => Err(self.err(e.pos, format!("undefined field '{field}'"))),
                };
            }
        }
        Ok(None)
    }

    fn call(&mut self, pos: Pos, name: &str, target: Option<&Expr>, args: &[Expr]) -> CResult {
        // `ns.fn(...)` where `ns.fn` is a global function (math.greatest,
        // optional.of, inventory.get...) unless `ns` is a local or variable.
        if let Some(t) = target {
            if let Some(q) = qualified_name(t) {
                let root = q.trim_start_matches('.').split('.').next().unwrap_or("");
                let shadowed = self.local(root).is_some() || self.env.variable_slot(root).is_some();
                let full = format!("{}.{name}", q.trim_start_matches('.'));
                if !shadowed || q.starts_with('.') {
                    if let Some(n) = self.global_call(pos, &full, args)? {
                        return Ok(n);
                    }
                }
            }
        }
        match target {
            None => match self.global_call(pos, name.trim_start_matches('.'), args)? {
                Some(n) => Ok(n),
                None => self.undeclared(pos, name),
            },
            Some(t) => self.member_call(pos, name, t, args),
        }
    }

    fn compile_args(&mut self, args: &[Expr]) -> Result<Vec<Node>, CompileError> {
        args.iter().map(|a| self.compile(a)).collect()
    }

    fn global_call(
        &mut self,
        pos: Pos,
        name: &str,
        args: &[Expr],
    ) -> Result<Option<Node>, CompileError> {
        if let Some(id) = self.env.host.iter().position(|h| &*h.name == name) {
            let h = &self.env.host[id];
            if !h.arities.contains(&args.len()) {
                return Err(self.err(
                    pos,
                    format!(
                        "found no matching overload for '{name}' with {} arguments",
                        args.len()
                    ),
                ));
            }
            return Ok(Some(Node::Host(id, self.compile_args(args)?)));
        }
        if let Some(special) = self.special(pos, name, args)? {
            return Ok(Some(special));
        }
        let decls = functions::lookup(self.env.libs, name, Style::Global);
        if decls.is_empty() {
            return Ok(None);
        }
        let decl = self.pick(pos, name, &decls, args.len())?;
        let compiled = self.compile_args(args)?;
        Ok(Some(self.finish_call(pos, decl, compiled, args)?))
    }

    fn member_call(&mut self, pos: Pos, name: &str, target: &Expr, args: &[Expr]) -> CResult {
        let decls = functions::lookup(self.env.libs, name, Style::Member);
        if decls.is_empty() {
            return self.undeclared(pos, name);
        }
        let decl = self.pick(pos, name, &decls, args.len() + 1)?;
        let mut compiled = Vec::with_capacity(args.len() + 1);
        compiled.push(self.compile(target)?);
        for a in args {
            compiled.push(self.compile(a)?);
        }
        let mut all_args = Vec::with_capacity(args.len() + 1);
        all_args.push(target.clone());
        all_args.extend(args.iter().cloned());
        self.finish_call(pos, decl, compiled, &all_args)
    }

    fn pick(
        &self,
        pos: Pos,
        name: &str,
        decls: &[&'static FnDecl],
        n: usize,
    ) -> Result<&'static FnDecl, CompileError> {
        decls
            .iter()
            .copied()
            .find(|d| d.arity.accepts(n))
            .ok_or_else(|| {
                self.err(
                    pos,
                    format!("found no matching overload for '{name}' applied to {n} argument(s)"),
                )
            })
    }

    fn finish_call(
        &self,
        pos: Pos,
        decl: &'static FnDecl,
        args: Vec<Node>,
        exprs: &[Expr],
    ) -> CResult {
        // A checked expression's literals are validated, and its constant
        // patterns compiled, after the compilation (`super::plan`).
        let checks = self.env.libs.has(Lib::LiteralChecks) && !self.env.checks_types();
        if let Some(validate) = decl.validate_literal.filter(|_| checks) {
            for (i, e) in exprs.iter().enumerate() {
                if let ExprKind::Literal(Literal::String(s)) = &e.kind {
                    if let Err(msg) = validate(i, s) {
                        return Err(self.err(e.pos, msg.to_string()));
                    }
                }
            }
        }
        // Constant regular expressions are compiled once, here.
        if let (Some(prepare), Some(Node::Const(Value::String(s)))) = (decl.prepare, args.get(1)) {
            match prepare(s.as_str()) {
                Ok(Some(p)) => {
                    return Ok(Node::Prepared {
                        decl,
                        args,
                        prepared: p,
                    })
                }
                Ok(None) => {}
                // cel-go validates only `matches` literals, in its words.
                Err(_) if checks && decl.name == "matches" => {
                    return Err(self.err(exprs[1].pos, "invalid matches argument"))
                }
                // kube-apiserver compiles the Kubernetes regex library's
                // constant patterns when it plans the program.
                Err(m) if checks => {
                    return Err(CompileError {
                        planning: true,
                        ..self.err(exprs[1].pos, m.to_string())
                    })
                }
                Err(_) => {}
            }
        }
        let decl = self.tracked_variant(pos, decl);
        match fuse_optional_selects(decl, args) {
            Node::Call { decl, args } => match self.guard(pos, decl, args.len()) {
                Some(guard) => Ok(Node::Guarded { decl, args, guard }),
                None => Ok(Node::Call { decl, args }),
            },
            // Fused optional selects always hand `hasValue` an optional.
            fused => Ok(fused),
        }
    }

    /// The runtime guard cel-go's interpreter puts on this call: the one
    /// overload the checker resolved it to, or else every overload of the
    /// function with as many arguments, in a type-checked environment. Not
    /// for the functions cel-go binds once for all their overloads (the
    /// operators, `size`, `type`, `dyn`, `matches`, `sort`), nor those
    /// declared without type guards (`contains`, `startsWith`,
    /// `endsWith`, `flatten`), nor `or`/`orValue`, which cel-go
    /// evaluates itself.
    fn guard(&self, pos: Pos, decl: &'static FnDecl, arity: usize) -> Option<Guard> {
        const UNGUARDED: [&str; 27] = [
            "_==_",
            "_!=_",
            "_&&_",
            "_||_",
            "_?_:_",
            "_[_]",
            "_[?_]",
            "in",
            "_+_",
            "_-_",
            "_*_",
            "_/_",
            "_%_",
            "-_",
            "!_",
            "_<_",
            "_<=_",
            "_>_",
            "_>=_",
            "size",
            "type",
            "dyn",
            "matches",
            "contains",
            "startsWith",
            "endsWith",
            "flatten",
        ];
        let special = decl.name.starts_with('@')
            || UNGUARDED.contains(&decl.name)
            || matches!(decl.name, "or" | "orValue" | "sort")
            || decl.tracked.is_some();
        if special || !self.env.checks_types() {
            return None;
        }
        // A guard every argument passes is left out.
        let open = |params: &[Ty]| params.iter().all(Ty::takes_anything);
        if let Some(params) = self.resolved.get(&(pos, decl.name.to_string())) {
            return (!open(params)).then(|| Guard::One(params.clone()));
        }
        let overloads = super::checker::overloads_of(decl.name, arity)?;
        let guarded = !overloads.is_empty() && !overloads.iter().any(|p| open(p));
        guarded.then(|| Guard::Any(overloads.into()))
    }

    /// The variant of `decl` kube-apiserver plans with a cost tracker that
    /// asserts its list argument is a list (`decl` itself elsewhere): in
    /// type-checked environments, `distinct` always and `sort` or `sortBy`
    /// where the checker resolved one overload.
    fn tracked_variant(&self, pos: Pos, decl: &'static FnDecl) -> &'static FnDecl {
        if !self.env.checks_types() || decl.lib != Lib::ListsExt {
            return decl;
        }
        let resolved = self.tracked.contains(&pos);
        match decl.name {
            "distinct" => &functions::lists::DISTINCT_TRACKED,
            "sort" if resolved => &functions::lists::SORT_TRACKED,
            "@sortByAssociatedKeys" if resolved => &functions::lists::SORT_BY_TRACKED,
            _ => decl,
        }
    }

    /// Internal functions of macro expansions that need the accumulator.
    fn special(
        &mut self,
        pos: Pos,
        name: &str,
        args: &[Expr],
    ) -> Result<Option<Node>, CompileError> {
        let accu_first =
            matches!(args.first().map(|a| &a.kind), Some(ExprKind::Ident(n)) if &**n == ACCU);
        let accu = match self.local(ACCU) {
            Some(slot) if accu_first => slot,
            _ => usize::MAX,
        };
        Ok(Some(match (name, args.len()) {
            ("@not_strictly_false", 1) => Node::NotStrictlyFalse(Box::new(self.compile(&args[0])?)),
            ("@append", 2) if accu != usize::MAX => {
                Node::AccuAppend(accu, Box::new(self.compile(&args[1])?))
            }
            ("@mapInsert", 3) if accu != usize::MAX => Node::AccuInsert(
                accu,
                Box::new(self.compile(&args[1])?),
                Box::new(self.compile(&args[2])?),
            ),
            ("@mapMerge", 2) if accu != usize::MAX => {
                Node::AccuMerge(accu, Box::new(self.compile(&args[1])?))
            }
            // cel-go's planner (kube-apiserver optimizes its programs)
            // answers `x in []` with a constant, without evaluating `x`.
            // Compiled all the same, for the compile-time checks of its
            // literals.
            ("@in", 2) if self.env.checks_types() && is_empty_list(&args[1]) => {
                self.compile(&args[0])?;
                Node::Const(Value::Bool(false))
            }
            _ if name.starts_with('@') && !matches!(name, "@in" | "@sortByAssociatedKeys") => {
                return Err(self.err(pos, format!("undeclared reference to '{name}'")))
            }
            _ => return Ok(None),
        }))
    }

    fn structure(&mut self, pos: Pos, name: &str, fields: &[(Arc<str>, Expr, bool)]) -> CResult {
        let name = name.trim_start_matches('.');
        // `Object`, `Object.spec`, `Object.spec.containers`: the object's
        // fields are not declared (kube-apiserver checks names at run time).
        let object_type = name == "Object" || name.starts_with("Object.");
        let allowed: &[&str] = match name {
            "JSONPatch" if self.env.libs.has(Lib::JsonPatch) => &["op", "path", "value", "from"],
            _ if object_type && self.env.libs.has(Lib::JsonPatch) => &[],
            _ => {
                return Err(self.err(
                    pos,
                    format!("undeclared reference to '{name}' (in container '')"),
                ))
            }
        };
        let mut out = Vec::with_capacity(fields.len());
        for (f, e, optional) in fields {
            if !object_type && !allowed.contains(&&**f) {
                return Err(self.err(e.pos, format!("undefined field '{f}'")));
            }
            out.push((super::intern::literal(f), self.compile(e)?, *optional));
        }
        Ok(Node::Struct(out))
    }
}

fn is_empty_list(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::List { elements, .. } if elements.is_empty())
}

/// The direct subexpressions of `e`.
pub(super) fn children(e: &Expr) -> Vec<&Expr> {
    match &e.kind {
        ExprKind::Literal(_) | ExprKind::Ident(_) => vec![],
        ExprKind::Select { operand, .. } | ExprKind::Has { operand, .. } => vec![operand],
        ExprKind::Index { operand, index, .. } => vec![operand, index],
        ExprKind::Call { target, args, .. } => target.iter().map(|t| &**t).chain(args).collect(),
        ExprKind::List { elements, .. } => elements.iter().collect(),
        ExprKind::Map { entries } => entries.iter().flat_map(|en| [&en.key, &en.value]).collect(),
        ExprKind::Struct { fields, .. } => fields.iter().map(|(_, v, _)| v).collect(),
        ExprKind::And(a, b) | ExprKind::Or(a, b) => vec![a, b],
        ExprKind::Conditional(a, b, c) => vec![a, b, c],
        ExprKind::Comprehension(c) => vec![
            &c.range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        ExprKind::Bind { init, body, .. } => vec![init, body],
    }
}

fn literal(l: &Literal) -> Value<'static> {
    match l {
        Literal::Null => Value::Null,
        Literal::Bool(b) => Value::Bool(*b),
        Literal::Int(i) => Value::Int(*i),
        Literal::Uint(u) => Value::Uint(*u),
        Literal::Double(d) => Value::Double(*d),
        Literal::String(s) => Value::String(super::intern::literal(s)),
        Literal::Bytes(b) => Value::Bytes(b.clone()),
    }
}

/// `x.?a.?b.orValue(d)` and `x.?a.?b.hasValue()` as one
/// [`Node::OptionalSelects`]; any other call as is.
fn fuse_optional_selects(decl: &'static FnDecl, mut args: Vec<Node>) -> Node {
    let fusable = matches!((decl.name, args.len()), ("orValue", 2) | ("hasValue", 1))
        && matches!(args[0], Node::Select { optional: true, .. });
    if !fusable {
        return Node::Call { decl, args };
    }
    let end = match decl.name {
        "orValue" => OptionalEnd::OrValue(Box::new(args.pop().expect("two arguments"))),
        _ => OptionalEnd::HasValue,
    };
    let mut operand = args.pop().expect("an operand");
    let mut fields = Vec::new();
    while let Node::Select {
        operand: inner,
        field,
        optional: true,
    } = operand
    {
        fields.push(field);
        operand = *inner;
    }
    fields.reverse();
    Node::OptionalSelects {
        operand: Box::new(operand),
        fields: fields.into(),
        end,
    }
}

/// Why a constant subexpression does not fold: the message (without a
/// position) cel-go's planner gives.
#[derive(Debug, thiserror::Error)]
pub(super) enum FoldError {
    #[error("{}", .0.message)]
    Compile(CompileError),
    #[error("{}", .0.message())]
    Eval(super::error::EvalError),
}
