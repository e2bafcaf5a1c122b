//! Static types of the checker, with cel-go's assignability, substitution
//! and formatting rules (checker/types.go, checker/format.go).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// A static CEL type.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    Int,
    Uint,
    Double,
    Bool,
    String,
    Bytes,
    Null,
    Dyn,
    /// The type of an expression that already failed to check (cel-go's
    /// `!error!`): assignable to everything, and checking goes on.
    Error,
    /// The result of a function the checker does not declare (Interlock's
    /// own host functions): assignable to everything, never refused.
    Unknown,
    Duration,
    Timestamp,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    /// `type`, or `type(T)` for the type of values of `T`.
    Type(Option<Box<Ty>>),
    Optional(Box<Ty>),
    /// A library type (`kubernetes.Quantity`, `net.IP`...): an object
    /// type without fields as far as the checker knows.
    Named(Arc<str>),
    /// An object type with declared fields (`kubernetes.AdmissionRequest`).
    Struct(Arc<StructTy>),
    /// A type parameter (`A` in a declaration, `_var0` when fresh).
    Param(Arc<str>),
}

/// An object type. Its name identifies it: kube-apiserver names every
/// object type of a schema by its path (`Deployment.spec.template`), so
/// two types of one name are one type.
#[derive(Debug)]
pub struct StructTy {
    pub name: Arc<str>,
    pub fields: Vec<(Arc<str>, Ty)>,
}

impl PartialEq for StructTy {
    fn eq(&self, other: &StructTy) -> bool {
        self.name == other.name
    }
}

impl StructTy {
    pub fn new(name: &str, fields: Vec<(&str, Ty)>) -> StructTy {
        StructTy {
            name: name.into(),
            fields: fields.into_iter().map(|(n, t)| (n.into(), t)).collect(),
        }
    }

    pub fn field(&self, name: &str) -> Option<&Ty> {
        self.fields
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, t)| t)
    }
}

impl Ty {
    pub fn list(t: Ty) -> Ty {
        Ty::List(Box::new(t))
    }
    pub fn map(k: Ty, v: Ty) -> Ty {
        Ty::Map(Box::new(k), Box::new(v))
    }
    pub fn optional(t: Ty) -> Ty {
        Ty::Optional(Box::new(t))
    }
    pub fn type_of(t: Ty) -> Ty {
        Ty::Type(Some(Box::new(t)))
    }

    pub fn is_dyn_or_error(&self) -> bool {
        matches!(self, Ty::Dyn | Ty::Error | Ty::Unknown)
    }

    fn params(&self) -> Vec<&Ty> {
        match self {
            Ty::List(e) => vec![e],
            Ty::Map(k, v) => vec![k, v],
            Ty::Optional(e) => vec![e],
            Ty::Type(Some(t)) => vec![t],
            _ => vec![],
        }
    }

    fn same_kind(&self, other: &Ty) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }

    /// Whether a value of `t` may be declared as `self`, ignoring type
    /// parameters (cel-go's `IsAssignableType` on concrete types).
    fn accepts_exact(&self, t: &Ty) -> bool {
        match (self, t) {
            (Ty::Named(a), Ty::Named(b)) => a == b,
            (Ty::Struct(a), Ty::Struct(b)) => a.name == b.name,
            _ => self == t,
        }
    }

    /// cel-go's `types.Type.String()`: declared names (`null_type`,
    /// `google.protobuf.Duration`), used in "must evaluate to" messages.
    pub fn declared_name(&self) -> String {
        let base = match self {
            Ty::Null => "null_type",
            Ty::Duration => "google.protobuf.Duration",
            Ty::Timestamp => "google.protobuf.Timestamp",
            Ty::Optional(_) => "optional_type",
            Ty::List(_) => "list",
            Ty::Map(..) => "map",
            Ty::Type(_) => "type",
            _ => return self.to_string(),
        };
        let params: Vec<String> = self.params().iter().map(|p| p.declared_name()).collect();
        if params.is_empty() {
            base.to_string()
        } else {
            format!("{base}({})", params.join(", "))
        }
    }
}

/// cel-go's `FormatCELType`, used in checker messages.
impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let simple = match self {
            Ty::Int => "int",
            Ty::Uint => "uint",
            Ty::Double => "double",
            Ty::Bool => "bool",
            Ty::String => "string",
            Ty::Bytes => "bytes",
            Ty::Null => "null",
            Ty::Dyn | Ty::Unknown => "dyn",
            Ty::Error => "!error!",
            Ty::Duration => "duration",
            Ty::Timestamp => "timestamp",
            Ty::Named(n) => n,
            Ty::Struct(s) => &s.name,
            Ty::Param(p) => p,
            Ty::Type(None) => "type",
            Ty::List(e) => return write!(f, "list({e})"),
            Ty::Map(k, v) => return write!(f, "map({k}, {v})"),
            Ty::Optional(e) => return write!(f, "optional_type({e})"),
            Ty::Type(Some(t)) => return write!(f, "type({t})"),
        };
        f.write_str(simple)
    }
}

/// Substitutions of type parameters found so far.
#[derive(Debug, Clone, Default)]
pub struct Mapping(HashMap<Arc<str>, Ty>);

impl Mapping {
    fn find(&self, t: &Ty) -> Option<&Ty> {
        match t {
            Ty::Param(p) => self.0.get(p),
            _ => None,
        }
    }
    fn add(&mut self, param: &Ty, t: Ty) {
        if let Ty::Param(p) = param {
            self.0.insert(p.clone(), t);
        }
    }
}

fn is_equal_or_less_specific(t1: &Ty, t2: &Ty) -> bool {
    if matches!(t1, Ty::Dyn | Ty::Param(_)) {
        return true;
    }
    if matches!(t2, Ty::Dyn | Ty::Param(_)) {
        return false;
    }
    if !t1.same_kind(t2) {
        return false;
    }
    match (t1, t2) {
        (Ty::Type(_), Ty::Type(_)) => true,
        (Ty::List(_) | Ty::Map(..) | Ty::Optional(_), _) => t1
            .params()
            .iter()
            .zip(t2.params())
            .all(|(a, b)| is_equal_or_less_specific(a, b)),
        _ => t1.accepts_exact(t2),
    }
}

fn most_general(t1: &Ty, t2: &Ty) -> Ty {
    if is_equal_or_less_specific(t1, t2) {
        t1.clone()
    } else {
        t2.clone()
    }
}

fn is_legacy_nullable(t: &Ty) -> bool {
    matches!(
        t,
        Ty::Optional(_) | Ty::Named(_) | Ty::Struct(_) | Ty::Duration | Ty::Timestamp
    )
}

fn internal_is_assignable(m: &mut Mapping, t1: &Ty, t2: &Ty) -> bool {
    if let Ty::Param(_) = t2 {
        let (valid, has_sub) = is_valid_substitution(m, t1, t2);
        if valid {
            return true;
        }
        if has_sub {
            return false;
        }
    }
    if let Ty::Param(_) = t1 {
        return is_valid_substitution(m, t2, t1).0;
    }
    if t1.is_dyn_or_error() || t2.is_dyn_or_error() {
        return true;
    }
    if *t1 == Ty::Null {
        return *t2 == Ty::Null || is_legacy_nullable(t2);
    }
    if *t2 == Ty::Null {
        return is_legacy_nullable(t1);
    }
    match t1 {
        Ty::Type(_) => matches!(t2, Ty::Type(_)),
        Ty::List(_) | Ty::Map(..) | Ty::Optional(_) => {
            t1.same_kind(t2)
                && t1
                    .params()
                    .iter()
                    .zip(t2.params())
                    .all(|(a, b)| internal_is_assignable(m, a, b))
        }
        _ => t1.accepts_exact(t2),
    }
}

fn is_valid_substitution(m: &mut Mapping, t1: &Ty, t2: &Ty) -> (bool, bool) {
    if t1 == t2 {
        return (true, true);
    }
    if let Some(sub) = m.find(t2).cloned() {
        if *t1 == sub {
            return (true, true);
        }
        if internal_is_assignable(m, t1, &sub) {
            let general = most_general(t1, &sub);
            if not_referenced_in(m, t2, &general) {
                m.add(t2, general);
            }
            return (true, true);
        }
        return (false, true);
    }
    if not_referenced_in(m, t2, t1) {
        m.add(t2, t1.clone());
        return (true, false);
    }
    (false, false)
}

fn not_referenced_in(m: &Mapping, t: &Ty, within: &Ty) -> bool {
    if t == within {
        return false;
    }
    match within {
        Ty::Param(_) => match m.find(within) {
            None => true,
            Some(sub) => not_referenced_in(m, t, sub),
        },
        _ => within.params().iter().all(|p| not_referenced_in(m, t, p)),
    }
}

/// `t2` may be used where `t1` is expected; on success the mapping gains
/// the substitutions that made it so.
pub fn is_assignable(m: &mut Mapping, t1: &Ty, t2: &Ty) -> bool {
    let mut copy = m.clone();
    if internal_is_assignable(&mut copy, t1, t2) {
        *m = copy;
        return true;
    }
    false
}

pub fn is_assignable_list(m: &mut Mapping, l1: &[Ty], l2: &[Ty]) -> bool {
    if l1.len() != l2.len() {
        return false;
    }
    let mut copy = m.clone();
    if l1
        .iter()
        .zip(l2)
        .all(|(a, b)| internal_is_assignable(&mut copy, a, b))
    {
        *m = copy;
        return true;
    }
    false
}

pub fn substitute(m: &Mapping, t: &Ty, param_to_dyn: bool) -> Ty {
    if let Some(sub) = m.find(t) {
        return substitute(m, sub, param_to_dyn);
    }
    match t {
        Ty::Param(_) if param_to_dyn => Ty::Dyn,
        Ty::List(e) => Ty::list(substitute(m, e, param_to_dyn)),
        Ty::Map(k, v) => Ty::map(
            substitute(m, k, param_to_dyn),
            substitute(m, v, param_to_dyn),
        ),
        Ty::Optional(e) => Ty::optional(substitute(m, e, param_to_dyn)),
        Ty::Type(Some(e)) => Ty::type_of(substitute(m, e, param_to_dyn)),
        _ => t.clone(),
    }
}

/// Joins the element types of an aggregate literal (homogeneous literals:
/// a mismatch is an error).
pub fn join(m: &mut Mapping, previous: &Ty, current: &Ty) -> Option<Ty> {
    if is_assignable(m, previous, current) {
        Some(most_general(previous, current))
    } else {
        None
    }
}

/// Renames the parameters of a declaration apart (`A` to `_var3`).
pub fn instantiate(t: &Ty, fresh: &HashMap<Arc<str>, Ty>) -> Ty {
    match t {
        Ty::Param(p) => fresh.get(p).cloned().unwrap_or_else(|| t.clone()),
        Ty::List(e) => Ty::list(instantiate(e, fresh)),
        Ty::Map(k, v) => Ty::map(instantiate(k, fresh), instantiate(v, fresh)),
        Ty::Optional(e) => Ty::optional(instantiate(e, fresh)),
        Ty::Type(Some(e)) => Ty::type_of(instantiate(e, fresh)),
        _ => t.clone(),
    }
}

/// Type parameters a declaration mentions.
pub fn collect_params(t: &Ty, out: &mut Vec<Arc<str>>) {
    match t {
        Ty::Param(p) if !out.contains(p) => out.push(p.clone()),
        _ => t.params().iter().for_each(|p| collect_params(p, out)),
    }
}

/// Parses a type as written in the declaration table: `int`,
/// `list(A)`, `map(K, V)`, `optional(A)`, `type(A)`, a dotted library
/// type name, or a single capital letter for a type parameter.
pub fn parse(s: &str) -> Ty {
    let s = s.trim();
    if let Some(open) = s.find('(') {
        let name = &s[..open];
        let inner = &s[open + 1..s.len() - 1];
        let args = split_top(inner);
        return match (name, args.as_slice()) {
            ("list", [e]) => Ty::list(parse(e)),
            ("map", [k, v]) => Ty::map(parse(k), parse(v)),
            ("optional", [e]) => Ty::optional(parse(e)),
            ("type", [e]) => Ty::type_of(parse(e)),
            _ => panic!("bad type in the declaration table: {s}"),
        };
    }
    match s {
        "int" => Ty::Int,
        "uint" => Ty::Uint,
        "double" => Ty::Double,
        "bool" => Ty::Bool,
        "string" => Ty::String,
        "bytes" => Ty::Bytes,
        "null" => Ty::Null,
        "dyn" => Ty::Dyn,
        "duration" => Ty::Duration,
        "timestamp" => Ty::Timestamp,
        "type" => Ty::Type(None),
        p if p.len() == 1 && p.chars().all(|c| c.is_ascii_uppercase()) => Ty::Param(p.into()),
        named => Ty::Named(named.into()),
    }
}

/// Splits `a, map(b, c)` at top-level commas.
pub fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    out
}

impl Ty {
    /// Whether cel-go's runtime guard lets any value through for an
    /// argument of this type (`dyn`, a type parameter, or what the
    /// checker does not know).
    pub fn takes_anything(&self) -> bool {
        matches!(
            self,
            Ty::Dyn | Ty::Param(_) | Ty::Unknown | Ty::Error | Ty::Struct(_)
        )
    }
}
