//! Static type checking, as cel-go's checker does it when kube-apiserver
//! creates a policy: overload resolution with type parameters,
//! homogeneous aggregate literals, field selection on declared object
//! types. Runs once per expression at load time.
//!
//! The checker only refuses what it knows: a function missing from
//! `decls.txt` (host functions, most Kubernetes library functions) is
//! left to the compiler and its result has the unknown type
//! ([`Ty::Unknown`]), which is assignable to everything, exempt from the
//! literal validation and from the policy's result-type check. An
//! expression that failed to check has cel-go's error type
//! ([`Ty::Error`]): checking goes on around it as cel-go's does, so the
//! error reported first is the one cel-go reports first.

use super::ast::{Expr, ExprKind, Literal, Pos};
use super::error::CompileError;
use super::parser::qualified_name;
use super::types::{self, Mapping, Ty};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

mod format;

pub use super::types::StructTy;

struct Overload {
    member: bool,
    args: Vec<Ty>,
    result: Ty,
    params: Vec<Arc<str>>,
}

fn table() -> &'static HashMap<&'static str, Vec<Overload>> {
    static TABLE: OnceLock<HashMap<&'static str, Vec<Overload>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: HashMap<&'static str, Vec<Overload>> = HashMap::new();
        for line in include_str!("decls.txt").lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, sig) = line.split_once(' ').expect("NAME SIGNATURE");
            t.entry(name).or_default().push(parse_overload(sig));
        }
        t
    })
}

fn parse_overload(sig: &str) -> Overload {
    let (call, result) = sig.split_once("->").expect("a result type");
    let call = call.trim();
    let (receiver, args) = match call.find(".(") {
        Some(i) if !call.starts_with('(') => (Some(&call[..i]), &call[i + 1..]),
        _ => (None, call),
    };
    let inner = &args[1..args.len() - 1];
    let mut arg_types: Vec<Ty> = receiver.into_iter().map(types::parse).collect();
    arg_types.extend(types::split_top(inner).into_iter().map(types::parse));
    let result = types::parse(result);
    let mut params = Vec::new();
    for t in arg_types.iter().chain([&result]) {
        types::collect_params(t, &mut params);
    }
    Overload {
        member: receiver.is_some(),
        args: arg_types,
        result,
        params,
    }
}

/// The declared argument types of every overload of `name` that takes
/// `arity` arguments (a member call's receiver counts), in declaration
/// order: cel-go's dispatcher tries each overload's guard in turn when the
/// checker left several candidates. `None` for a function not declared.
pub fn overloads_of(name: &str, arity: usize) -> Option<Vec<Arc<[Ty]>>> {
    let overloads = table().get(name)?;
    Some(
        overloads
            .iter()
            .filter(|o| o.args.len() == arity)
            .map(|o| o.args.clone().into())
            .collect(),
    )
}

/// Every declared overload as (function, member call), for the library
/// surface tests.
#[cfg(test)]
fn declarations() -> Vec<(&'static str, bool)> {
    let mut out: Vec<(&'static str, bool)> = table()
        .iter()
        .flat_map(|(name, overloads)| overloads.iter().map(move |o| (*name, o.member)))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// What the checker needs to know about the environment.
pub struct Scope<'e> {
    /// Declared variables and their types (`object` is `dyn`).
    pub variables: &'e [(Arc<str>, Ty)],
    /// Names that are undeclared for the checker although the runtime has
    /// a slot for them.
    pub hidden: &'e [Arc<str>],
    /// `variables.NAME` of a policy, when enabled.
    pub lazy: Option<&'e [(Arc<str>, Ty)]>,
    /// Resolves a global function the compiler knows but the checker does
    /// not declare (host and library functions): such calls are `dyn`.
    pub is_global_function: &'e dyn Fn(&str) -> bool,
    /// Resolves a member function the checker does not declare.
    pub is_member_function: &'e dyn Fn(&str) -> bool,
    /// `cel.bind` is declared.
    pub bind_enabled: bool,
    /// Type names (`int`, `net.IP`) to the type they denote.
    pub type_name: &'e dyn Fn(&str) -> Option<Ty>,
}

/// What the checker leaves for the validators and the planner.
#[derive(Debug)]
pub struct TypeChecked {
    /// The expression's static type.
    pub ty: Ty,
    /// The homogeneous-literal validator's issues.
    pub homogeneous: Vec<(Pos, String)>,
    /// References to comprehension variables whose type is a type
    /// (`[int].filter(t, ...)`), which cel-go's planner resolves as type
    /// names (a macro's own references share the call's position).
    pub type_valued_locals: Vec<(Pos, Arc<str>)>,
    /// The positions of the `sort` and `@sortByAssociatedKeys` calls cel-go
    /// resolves to one overload (the list's element type is known), which
    /// kube-apiserver plans with a cost tracker of their own.
    pub tracked: Vec<Pos>,
    /// The calls (position, function) the checker resolved to exactly one
    /// overload, with that overload's declared argument types: cel-go's
    /// interpreter calls that overload, whose guard refuses arguments of
    /// other runtime types, even where another overload would take them.
    pub resolved: HashMap<(Pos, String), Arc<[Ty]>>,
}

/// Checks `ast`, or returns every checker error in cel-go's order (it
/// sorts its issues by location, stably, and runs its validators only on a
/// checked AST). Policy loads report the first; kube-apiserver's
/// type-checking controller lists them all.
pub fn check_all(src: &str, ast: &Expr, scope: &Scope) -> Result<TypeChecked, Vec<CompileError>> {
    let mut c = Checker {
        tracked: Vec::new(),
        resolved: HashMap::new(),
        single: None,
        src,
        scope,
        locals: Vec::new(),
        mapping: Mapping::default(),
        fresh: 0,
        errors: Vec::new(),
        exempt: 0,
        literals: Vec::new(),
        formats: 0,
        format_types: HashMap::new(),
        local_refs: Vec::new(),
        optional_targets: Vec::new(),
    };
    let t = c.check(ast);
    if !c.errors.is_empty() {
        let mut errors = std::mem::take(&mut c.errors);
        errors.sort_by_key(|(pos, _)| *pos);
        return Err(errors
            .into_iter()
            .map(|(pos, msg)| CompileError::new(src, pos, msg))
            .collect());
    }
    c.validate_literals();
    c.validate_formats(ast);
    let type_valued_locals = c
        .local_refs
        .iter()
        .filter(|(_, _, t)| matches!(types::substitute(&c.mapping, t, true), Ty::Type(_)))
        .map(|(pos, name, _)| (*pos, name.clone()))
        .collect();
    Ok(TypeChecked {
        ty: types::substitute(&c.mapping, &t, true),
        homogeneous: c.errors,
        type_valued_locals,
        tracked: c.tracked,
        resolved: c.resolved,
    })
}

struct Checker<'s, 'e> {
    /// See [`TypeChecked::tracked`].
    tracked: Vec<Pos>,
    /// See [`TypeChecked::resolved`].
    resolved: HashMap<(Pos, String), Arc<[Ty]>>,
    /// The overload the last resolution found, when it found one only.
    single: Option<Arc<[Ty]>>,
    src: &'s str,
    scope: &'s Scope<'e>,
    locals: Vec<(Arc<str>, Ty)>,
    mapping: Mapping,
    fresh: usize,
    errors: Vec<(Pos, String)>,
    /// Inside the arguments of `format`, which cel-go exempts from the
    /// homogeneous-literal validation.
    exempt: usize,
    /// Element types of each aggregate literal, validated once all types
    /// are known (cel-go's homogeneous aggregate literal validator).
    literals: Vec<Vec<(Pos, Ty)>>,
    /// Inside a `format` call that cel-go's format validator inspects.
    formats: usize,
    /// The types of the expressions inside such calls, by address, for the
    /// validator once all types are known.
    format_types: HashMap<*const Expr, Ty>,
    /// Each reference to a local, its name and its type.
    local_refs: Vec<(Pos, Arc<str>, Ty)>,
    /// The targets of the `optMap`/`optFlatMap` expansions being checked.
    optional_targets: Vec<Expr>,
}

/// The binding the parser's `optMap` expansion gives its target.
const OPTIONAL_TARGET: &str = "@optional";

impl Checker<'_, '_> {
    fn validate_literals(&mut self) {
        for group in std::mem::take(&mut self.literals) {
            if group.iter().any(|(_, t)| contains_unknown(&self.sub(t))) {
                continue;
            }
            // cel-go validates the final types, type parameters as `dyn`.
            let mut items = group
                .iter()
                .map(|(p, t)| (*p, types::substitute(&self.mapping, t, true)));
            let Some((_, first)) = items.next() else {
                continue;
            };
            if let Some((pos, other)) = items.find(|(_, t)| *t != first) {
                self.error(pos, format!("expected type '{first}' but found '{other}'"));
            }
        }
    }

    /// cel-go's `string.format` validator, after the checker: each
    /// clause against the final type of its argument.
    fn validate_formats(&mut self, root: &Expr) {
        if self.format_types.is_empty() {
            return;
        }
        let mut stack = vec![root];
        while let Some(e) = stack.pop() {
            stack.extend(super::compile::children(e));
            let ExprKind::Call {
                function,
                target,
                args,
            } = &e.kind
            else {
                continue;
            };
            let Some((text, args)) = format::candidate(function, target.as_deref(), args) else {
                continue;
            };
            let pos = self.open_paren(e.pos, function);
            let call = format::FormatCall { pos, text, args };
            if let Some(error) = format::validate(&call, self) {
                self.errors.push(error);
            }
        }
    }

    fn record_literal(&mut self, group: Vec<(Pos, Ty)>) {
        if self.exempt == 0 && group.len() > 1 {
            self.literals.push(group);
        }
    }

    fn undeclared(&mut self, pos: Pos, name: &str) -> Ty {
        self.error(
            pos,
            format!("undeclared reference to '{name}' (in container '')"),
        )
    }

    /// `JSONPatch{...}` (its string fields checked, at the field's colon
    /// as cel-go places them) and `Object.x.y{...}` (fields unchecked) are
    /// of the named type; kube-apiserver checks a mutation's result type.
    fn structure(&mut self, name: &str, fields: &[(Arc<str>, Expr, bool)]) -> Ty {
        let name = name.trim_start_matches('.');
        for (f, v, _) in fields {
            let t = self.check(v);
            let at = self.src[..v.pos as usize]
                .rfind(':')
                .unwrap_or(v.pos as usize) as Pos;
            let expected = match (name, &**f) {
                ("JSONPatch", "op" | "path" | "from") => "string",
                ("JSONPatch", "value") => continue,
                // cel-go's message for a field the type does not have.
                ("JSONPatch", _) => "",
                _ => continue,
            };
            if expected.is_empty() || !matches!(t, Ty::String | Ty::Dyn | Ty::Error | Ty::Param(_))
            {
                let message = format!(
                    "expected type of field '{f}' is '{expected}' but provided type is '{}'",
                    t.declared_name()
                );
                self.error(at, message);
            }
        }
        if name == "JSONPatch" || name == "Object" || name.starts_with("Object.") {
            Ty::Named(name.into())
        } else {
            Ty::Dyn
        }
    }

    fn error(&mut self, pos: Pos, msg: String) -> Ty {
        self.errors.push((pos, msg));
        Ty::Error
    }

    fn fresh_var(&mut self) -> Ty {
        self.fresh += 1;
        Ty::Param(format!("_var{}", self.fresh - 1).into())
    }

    fn sub(&self, t: &Ty) -> Ty {
        types::substitute(&self.mapping, t, false)
    }

    fn local(&self, name: &str) -> Option<Ty> {
        self.locals
            .iter()
            .rev()
            .find(|(n, _)| &**n == name)
            .map(|(_, t)| t.clone())
    }

    fn check(&mut self, e: &Expr) -> Ty {
        let t = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.check_node(e));
        if self.formats > 0 {
            self.format_types.insert(e, t.clone());
        }
        t
    }

    fn check_node(&mut self, e: &Expr) -> Ty {
        match &e.kind {
            ExprKind::Literal(l) => literal(l),
            ExprKind::Ident(name) => self.ident(e.pos, name),
            ExprKind::Select {
                operand,
                field,
                optional,
            } => {
                if !optional {
                    if let Some(t) = self.qualified(e) {
                        return t;
                    }
                }
                self.select(e.pos, operand, field, *optional)
            }
            ExprKind::Has { operand, field } => {
                let pos = self.open_paren(e.pos, "has");
                self.select(pos, operand, field, false);
                Ty::Bool
            }
            ExprKind::Index {
                operand,
                index,
                optional,
            } => {
                let name = if *optional { "_[?_]" } else { "_[_]" };
                let args = [self.check(operand), self.check(index)];
                self.resolve(e.pos, name, &args, false)
            }
            ExprKind::Call {
                function,
                target,
                args,
            } => self.call(e.pos, function, target.as_deref(), args),
            ExprKind::List { elements, optional } => self.list(elements, optional),
            ExprKind::Map { entries } => self.map(entries),
            ExprKind::Struct { name, fields } => self.structure(name, fields),
            ExprKind::And(a, b) | ExprKind::Or(a, b) => {
                let mut result = Ty::Bool;
                for x in [a, b] {
                    let t = self.check(x);
                    let pos = self.node_pos(x);
                    if !self.assert_type(pos, &Ty::Bool, &t) {
                        // cel-go's logical operators fail to resolve then.
                        result = Ty::Error;
                    }
                }
                result
            }
            ExprKind::Conditional(c, t, f) => {
                let args = [self.check(c), self.check(t), self.check(f)];
                // A macro's conditional sits at the macro's `.`; cel-go
                // places it at the macro call's parenthesis.
                let pos = match self.src.as_bytes().get(e.pos as usize) {
                    Some(b'.') => self.open_paren(e.pos, "."),
                    _ => e.pos,
                };
                self.resolve(pos, "_?_:_", &args, false)
            }
            ExprKind::Comprehension(c) => self.comprehension(c),
            ExprKind::Bind {
                from_macro: false, ..
            } if !self.scope.bind_enabled => {
                let pos = self.src[..e.pos as usize]
                    .rfind("cel")
                    .map_or(e.pos, |p| p as Pos);
                self.error(
                    pos,
                    "undeclared reference to 'cel' (in container '')".into(),
                )
            }
            ExprKind::Bind {
                name, init, body, ..
            } => {
                let optional_target = &**name == OPTIONAL_TARGET;
                let t = if optional_target {
                    self.optional_targets.push((**init).clone());
                    self.check(init)
                } else {
                    self.bound_init(init)
                };
                let t = self.sub(&t);
                self.locals.push((name.clone(), t));
                let r = self.check(body);
                self.locals.pop();
                if optional_target {
                    self.optional_targets.pop();
                }
                r
            }
        }
    }

    /// The value a binding introduces. cel-go expands `cel.bind`, `sortBy`
    /// and the inner binding of `optMap` to a comprehension over an empty
    /// list (a fresh type variable), and `optMap` reads its target a
    /// second time for `value()`: the same steps in the same order give
    /// the same type variables in messages (`_var24`).
    fn bound_init(&mut self, init: &Expr) -> Ty {
        self.fresh_var();
        let reads_optional = matches!(
            &init.kind,
            ExprKind::Call { function, target: Some(t), .. }
                if &**function == "value" && matches!(&t.kind, ExprKind::Ident(n) if &**n == OPTIONAL_TARGET)
        );
        match self.optional_targets.last().cloned() {
            Some(target) if reads_optional => {
                let t = self.check(&target);
                let pos = self.node_pos(init);
                self.resolve(pos, "value", &[t], true)
            }
            _ => self.check(init),
        }
    }

    fn ident(&mut self, pos: Pos, name: &str) -> Ty {
        if let Some(rooted) = name.strip_prefix('.') {
            return self.global(rooted).unwrap_or(Ty::Unknown);
        }
        if let Some(t) = self.local(name) {
            self.local_refs.push((pos, name.into(), t.clone()));
            return t;
        }
        if name == "variables" && self.scope.lazy.is_some_and(|l| !l.is_empty()) {
            return Ty::Dyn;
        }
        match self.global(name) {
            Some(t) if !self.scope.hidden.iter().any(|h| &**h == name) => t,
            _ => self.error(
                pos,
                format!("undeclared reference to '{name}' (in container '')"),
            ),
        }
    }

    fn global(&self, name: &str) -> Option<Ty> {
        if let Some((_, t)) = self.scope.variables.iter().find(|(n, _)| &**n == name) {
            return Some(t.clone());
        }
        (self.scope.type_name)(name).map(Ty::type_of)
    }

    /// `a.b.c` as a qualified variable or type name, when no local
    /// shadows its root.
    fn qualified(&mut self, e: &Expr) -> Option<Ty> {
        let q = qualified_name(e)?;
        let rooted = q.starts_with('.');
        let q = q.trim_start_matches('.');
        let root = q.split('.').next().unwrap_or("");
        if !rooted && self.local(root).is_some() {
            return None;
        }
        if let Some(t) = self.global(q) {
            return Some(t);
        }
        let field = q.strip_prefix("variables.")?;
        let lazy = self.scope.lazy.filter(|l| !l.is_empty())?;
        if field.contains('.') {
            return None;
        }
        Some(
            lazy.iter()
                .find(|(n, _)| &**n == field)
                .map_or(Ty::Unknown, |(_, t)| t.clone()),
        )
    }

    fn select(&mut self, pos: Pos, operand: &Expr, field: &str, optional: bool) -> Ty {
        let operand_type = self.check(operand);
        let operand_type = self.sub(&operand_type);
        let (target, was_optional) = match operand_type {
            Ty::Optional(inner) => (*inner, true),
            t => (t, false),
        };
        let result = match &target {
            Ty::Map(_, v) => (**v).clone(),
            Ty::Struct(s) => match struct_field(s, field) {
                Some(t) => t.clone(),
                None => self.error(pos, format!("undefined field '{field}'")),
            },
            Ty::Param(_) => {
                types::is_assignable(&mut self.mapping, &Ty::Dyn, &target);
                Ty::Dyn
            }
            Ty::Unknown | Ty::Named(_) => Ty::Unknown,
            // cel-go selects on an expression that failed to check as on `dyn`.
            Ty::Dyn | Ty::Error => Ty::Dyn,
            other => {
                let msg = format!("type '{other}' does not support field selection");
                self.error(pos, msg);
                Ty::Dyn
            }
        };
        if optional || was_optional {
            Ty::optional(result)
        } else {
            result
        }
    }

    fn call(&mut self, pos: Pos, name: &str, target: Option<&Expr>, args: &[Expr]) -> Ty {
        let at = pos;
        let pos = self.open_paren(pos, name);
        if let Some(t) = target {
            if let Some(q) = qualified_name(t) {
                let root = q.trim_start_matches('.').split('.').next().unwrap_or("");
                let shadowed = self.local(root).is_some()
                    || self.scope.variables.iter().any(|(n, _)| &**n == root);
                let full = format!("{}.{name}", q.trim_start_matches('.'));
                let known =
                    table().contains_key(full.as_str()) || (self.scope.is_global_function)(&full);
                if known && (!shadowed || q.starts_with('.')) {
                    return self.global_call(at, pos, &full, args);
                }
            }
        }
        match target {
            None => self.global_call(at, pos, name.trim_start_matches('.'), args),
            Some(t) => {
                let exempt = usize::from(name == "format");
                let validated = usize::from(format::candidate(name, target, args).is_some());
                self.exempt += exempt;
                self.formats += validated;
                // cel-go checks a member call's arguments before its target.
                let mut types: Vec<Ty> = args.iter().map(|a| self.check(a)).collect();
                types.insert(0, self.check(t));
                self.exempt -= exempt;
                if name == "sort" && args.is_empty() {
                    self.note_sort(at, &types[0]);
                }
                self.formats -= validated;
                if !table().contains_key(name) {
                    if !(self.scope.is_member_function)(name) {
                        return self.undeclared(pos, name);
                    }
                    return Ty::Unknown;
                }
                self.resolve_call(at, pos, name, &types, true)
            }
        }
    }

    /// Where cel-go places `e` in its messages.
    fn node_pos(&self, e: &Expr) -> Pos {
        let at_dot = self.src.as_bytes().get(e.pos as usize) == Some(&b'.');
        match &e.kind {
            // A macro's expansion (`all`, `map`, `optMap`, `sortBy`...)
            // sits at the macro's dot; cel-go places it at its parenthesis.
            ExprKind::Comprehension(_)
            | ExprKind::Conditional(..)
            | ExprKind::Bind { .. }
            | ExprKind::Call { .. }
                if at_dot =>
            {
                self.open_paren(e.pos, ".")
            }
            ExprKind::Call { function, .. } => self.open_paren(e.pos, function),
            ExprKind::Has { .. } => self.open_paren(e.pos, "has"),
            _ => e.pos,
        }
    }

    /// cel-go places a call at its opening parenthesis; our parser at the
    /// function name (or the dot before it).
    fn open_paren(&self, pos: Pos, name: &str) -> Pos {
        let named = name
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '.');
        if !named {
            return pos;
        }
        match self.src.get(pos as usize..).and_then(|rest| rest.find('(')) {
            Some(off) => pos + off as Pos,
            None => pos,
        }
    }

    /// [`Checker::resolve`] for the call written at `at`, noting the
    /// overload when it is the only one (see [`TypeChecked::resolved`]).
    fn resolve_call(&mut self, at: Pos, pos: Pos, name: &str, args: &[Ty], member: bool) -> Ty {
        let t = self.resolve(pos, name, args, member);
        if let Some(params) = self.single.take() {
            self.resolved.insert((at, name.to_string()), params);
        }
        t
    }

    fn global_call(&mut self, at: Pos, pos: Pos, name: &str, args: &[Expr]) -> Ty {
        if name == "@append" && args.len() == 2 {
            // `accu + [x]` in cel-go's expansion of map and filter.
            let types = [self.check(&args[0]), Ty::list(self.check(&args[1]))];
            return self.resolve(pos, "_+_", &types, false);
        }
        let types: Vec<Ty> = args.iter().map(|a| self.check(a)).collect();
        if name == "@sortByAssociatedKeys" {
            if let [_, keys] = types.as_slice() {
                self.note_sort(pos, keys);
            }
            // A member call in cel-go's expansion of sortBy.
            return self.resolve(pos, name, &types, true);
        }
        if !table().contains_key(name) {
            if !(self.scope.is_global_function)(name) && !name.starts_with('@') {
                return self.undeclared(pos, name);
            }
            return Ty::Unknown;
        }
        self.resolve_call(at, pos, name, &types, false)
    }

    /// Notes the call at `pos` when cel-go resolves it to one of its
    /// overloads per element type: the list's elements are of a comparable
    /// type, or of a type parameter the first overload binds.
    fn note_sort(&mut self, pos: Pos, list: &Ty) {
        if let Ty::List(e) = self.sub(list) {
            if matches!(
                *e,
                Ty::Int
                    | Ty::Uint
                    | Ty::Double
                    | Ty::Bool
                    | Ty::String
                    | Ty::Bytes
                    | Ty::Duration
                    | Ty::Timestamp
                    | Ty::Param(_)
            ) {
                self.tracked.push(pos);
            }
        }
    }

    /// cel-go's `resolveOverload`.
    fn resolve(&mut self, pos: Pos, name: &str, args: &[Ty], member: bool) -> Ty {
        let overloads = &table()[name];
        let mut result: Option<Ty> = None;
        let mut matched: Vec<&Overload> = Vec::new();
        self.single = None;
        for o in overloads.iter().filter(|o| o.member == member) {
            let fresh: HashMap<Arc<str>, Ty> = o
                .params
                .iter()
                .map(|p| (p.clone(), self.fresh_var()))
                .collect();
            let params: Vec<Ty> = o
                .args
                .iter()
                .map(|t| types::instantiate(t, &fresh))
                .collect();
            if !types::is_assignable_list(&mut self.mapping, args, &params) {
                continue;
            }
            matched.push(o);
            let r = self.sub(&types::instantiate(&o.result, &fresh));
            result = Some(match result {
                None => r,
                Some(prev) if prev == Ty::Dyn || prev == r => prev,
                Some(_) => Ty::Dyn,
            });
        }
        if let Some(r) = result {
            // With an argument of unknown type, a result cel-go would
            // narrow (a type parameter, several overloads) stays unknown.
            let unknown_arg = args.iter().any(|t| contains_unknown(&self.sub(t)));
            if unknown_arg && (r == Ty::Dyn || has_param(&r)) {
                return Ty::Unknown;
            }
            if let ([o], false) = (matched.as_slice(), unknown_arg) {
                self.single = Some(o.args.clone().into());
            }
            return r;
        }
        let shown: Vec<String> = args
            .iter()
            .map(|t| types::substitute(&self.mapping, t, true).to_string())
            .collect();
        let signature = if member {
            format!("{}.({})", shown[0], shown[1..].join(", "))
        } else {
            format!("({})", shown.join(", "))
        };
        self.error(
            pos,
            format!("found no matching overload for '{name}' applied to '{signature}'"),
        )
    }

    fn list(&mut self, elements: &[Expr], optional: &[usize]) -> Ty {
        let mut elem: Option<Ty> = None;
        let mut group = Vec::with_capacity(elements.len());
        for (i, e) in elements.iter().enumerate() {
            let mut t = self.check(e);
            if optional.contains(&i) {
                t = self.unwrap_optional(self.node_pos(e), t);
            }
            group.push((self.node_pos(e), t.clone()));
            elem = Some(self.join(elem, t));
        }
        self.record_literal(group);
        let elem = elem.unwrap_or_else(|| self.fresh_var());
        Ty::list(elem)
    }

    fn map(&mut self, entries: &[super::ast::MapEntry]) -> Ty {
        let (mut kt, mut vt): (Option<Ty>, Option<Ty>) = (None, None);
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for en in entries {
            let k = self.check(&en.key);
            keys.push((self.node_pos(&en.key), k.clone()));
            kt = Some(self.join(kt, k));
            let mut v = self.check(&en.value);
            if en.optional {
                v = self.unwrap_optional(self.node_pos(&en.value), v);
            }
            values.push((self.node_pos(&en.value), v.clone()));
            vt = Some(self.join(vt, v));
        }
        self.record_literal(keys);
        self.record_literal(values);
        match (kt, vt) {
            (Some(k), Some(v)) => Ty::map(k, v),
            _ => Ty::map(self.fresh_var(), self.fresh_var()),
        }
    }

    fn unwrap_optional(&mut self, pos: Pos, t: Ty) -> Ty {
        match t {
            Ty::Optional(inner) => *inner,
            Ty::Dyn | Ty::Unknown => t,
            other => {
                let msg = format!(
                    "expected type '{}' but found '{other}'",
                    Ty::optional(other.clone())
                );
                self.error(pos, msg);
                other
            }
        }
    }

    /// The checker itself joins mismatched element types to `dyn`; the
    /// literal validation refuses them afterwards.
    fn join(&mut self, previous: Option<Ty>, current: Ty) -> Ty {
        let Some(previous) = previous else {
            return current;
        };
        types::join(&mut self.mapping, &previous, &current).unwrap_or(Ty::Dyn)
    }

    fn assert_type(&mut self, pos: Pos, expected: &Ty, actual: &Ty) -> bool {
        if types::is_assignable(&mut self.mapping, expected, actual) {
            return true;
        }
        self.error(
            pos,
            format!("expected type '{expected}' but found '{actual}'"),
        );
        false
    }

    fn comprehension(&mut self, c: &super::ast::Comprehension) -> Ty {
        let range = self.check(&c.range);
        let accu = self.check(&c.accu_init);
        let range = self.sub(&range);
        let two = c.iter_var2.is_some();
        let (v1, v2) = match &range {
            Ty::List(e) if two => (Ty::Int, (**e).clone()),
            Ty::List(e) => ((**e).clone(), Ty::Dyn),
            Ty::Map(k, v) => ((**k).clone(), (**v).clone()),
            Ty::Unknown => (Ty::Unknown, Ty::Unknown),
            Ty::Dyn | Ty::Error | Ty::Param(_) => {
                types::is_assignable(&mut self.mapping, &Ty::Dyn, &range);
                (Ty::Dyn, Ty::Dyn)
            }
            other => {
                let msg = format!(
                    "expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"
                );
                let pos = self.node_pos(&c.range);
                self.error(pos, msg);
                (Ty::Error, Ty::Error)
            }
        };
        self.locals.push((c.accu_var.clone(), accu.clone()));
        self.locals.push((c.iter_var.clone(), v1));
        if let Some(n) = &c.iter_var2 {
            self.locals.push((n.clone(), v2));
        }
        let cond = self.check(&c.loop_cond);
        self.assert_type(c.loop_cond.pos, &Ty::Bool, &cond);
        let step = self.check(&c.loop_step);
        self.assert_type(c.loop_step.pos, &accu, &step);
        self.locals
            .truncate(self.locals.len() - if two { 2 } else { 1 });
        let r = self.check(&c.result);
        self.locals.pop();
        self.sub(&r)
    }
}

impl format::Types for Checker<'_, '_> {
    fn type_of(&self, e: &Expr) -> Option<Ty> {
        let t = self.format_types.get(&(e as *const Expr))?;
        Some(types::substitute(&self.mapping, t, true))
    }

    fn pos_of(&self, e: &Expr) -> Pos {
        self.node_pos(e)
    }
}

/// A field of an object type; a reserved word also finds its escaped
/// name (`metadata.namespace` is `__namespace__` in a schema's type, and
/// kube-apiserver's type provider accepts both).
fn struct_field<'t>(s: &'t StructTy, field: &str) -> Option<&'t Ty> {
    s.field(field).or_else(|| {
        super::schema::is_escaped_word(field)
            .then(|| s.field(&format!("__{field}__")))
            .flatten()
    })
}

fn contains_unknown(t: &Ty) -> bool {
    match t {
        Ty::Unknown => true,
        Ty::List(e) | Ty::Optional(e) => contains_unknown(e),
        Ty::Map(k, v) => contains_unknown(k) || contains_unknown(v),
        Ty::Type(Some(e)) => contains_unknown(e),
        _ => false,
    }
}

fn has_param(t: &Ty) -> bool {
    match t {
        Ty::Param(_) => true,
        Ty::List(e) | Ty::Optional(e) => has_param(e),
        Ty::Map(k, v) => has_param(k) || has_param(v),
        Ty::Type(Some(e)) => has_param(e),
        _ => false,
    }
}

fn literal(l: &Literal) -> Ty {
    match l {
        Literal::Null => Ty::Null,
        Literal::Bool(_) => Ty::Bool,
        Literal::Int(_) => Ty::Int,
        Literal::Uint(_) => Ty::Uint,
        Literal::Double(_) => Ty::Double,
        Literal::String(_) => Ty::String,
        Literal::Bytes(_) => Ty::Bytes,
    }
}

/// The object types kube-apiserver declares for a policy's `request` and
/// `namespaceObject` (admission/plugin/cel/compile.go).
pub fn request_type() -> Ty {
    let s = |n| (n, Ty::String);
    let gvk = Arc::new(StructTy::new(
        "kubernetes.GroupVersionKind",
        vec![s("group"), s("version"), s("kind")],
    ));
    let gvr = Arc::new(StructTy::new(
        "kubernetes.GroupVersionResource",
        vec![s("group"), s("version"), s("resource")],
    ));
    let user = Arc::new(StructTy::new(
        "kubernetes.UserInfo",
        vec![
            s("username"),
            s("uid"),
            ("groups", Ty::list(Ty::String)),
            ("extra", Ty::map(Ty::String, Ty::list(Ty::String))),
        ],
    ));
    Ty::Struct(Arc::new(StructTy::new(
        "kubernetes.AdmissionRequest",
        vec![
            ("kind", Ty::Struct(gvk.clone())),
            ("resource", Ty::Struct(gvr.clone())),
            s("subResource"),
            ("requestKind", Ty::Struct(gvk)),
            ("requestResource", Ty::Struct(gvr)),
            s("requestSubResource"),
            s("name"),
            s("namespace"),
            s("operation"),
            ("userInfo", Ty::Struct(user)),
            ("dryRun", Ty::Bool),
            ("options", Ty::Dyn),
        ],
    )))
}

pub fn namespace_type() -> Ty {
    let s = |n| (n, Ty::String);
    let strings = || Ty::list(Ty::String);
    let condition = Arc::new(StructTy::new(
        "kubernetes.NamespaceCondition",
        vec![
            s("status"),
            s("type"),
            ("lastTransitionTime", Ty::Timestamp),
            s("message"),
            s("reason"),
        ],
    ));
    let metadata = StructTy::new(
        "kubernetes.NamespaceMetadata",
        vec![
            s("name"),
            s("generateName"),
            s("namespace"),
            ("labels", Ty::map(Ty::String, Ty::String)),
            ("annotations", Ty::map(Ty::String, Ty::String)),
            s("UID"),
            ("creationTimestamp", Ty::Timestamp),
            ("deletionGracePeriodSeconds", Ty::Int),
            ("deletionTimestamp", Ty::Timestamp),
            ("generation", Ty::Int),
            s("resourceVersion"),
            ("finalizers", strings()),
        ],
    );
    let spec = StructTy::new("kubernetes.NamespaceSpec", vec![("finalizers", strings())]);
    let status = StructTy::new(
        "kubernetes.NamespaceStatus",
        vec![("conditions", Ty::list(Ty::Struct(condition))), s("phase")],
    );
    Ty::Struct(Arc::new(StructTy::new(
        "kubernetes.Namespace",
        vec![
            ("metadata", Ty::Struct(Arc::new(metadata))),
            ("spec", Ty::Struct(Arc::new(spec))),
            ("status", Ty::Struct(Arc::new(status))),
        ],
    )))
}

#[cfg(test)]
mod fuzz_found_tests;
#[cfg(test)]
mod tests;
