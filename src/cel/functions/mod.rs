//! Function libraries. Each library is a slice of declarations; an
//! environment enables libraries by flag and the compiler binds calls to
//! declarations once.

use super::error::{EvalError, EvalResult};
use super::k8s::regex::RegexError;
use super::program::Ctx;
use super::value::{Type, Value};
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

pub mod core;
pub mod encoders;
pub mod lists;
pub mod math;
pub mod optional;
pub mod regex;
pub mod sets;
pub mod strings;
pub mod time;

pub type Imp = for<'a, 'e> fn(&mut Ctx<'a, 'e>, &[Value<'a>]) -> EvalResult<Value<'a>>;
pub type ImpPrepared = for<'a, 'e> fn(
    &mut Ctx<'a, 'e>,
    &[Value<'a>],
    &(dyn Any + Send + Sync),
) -> EvalResult<Value<'a>>;
pub type ValidateLiteral = fn(usize, &str) -> Result<(), LiteralError>;
pub type Prepare = fn(&str) -> Result<Option<Arc<dyn Any + Send + Sync>>, RegexError>;

/// A literal argument cel-go's validators refuse, in their words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiteralError {
    #[error("invalid duration argument")]
    Duration,
    #[error("invalid timestamp argument")]
    Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Global,
    Member,
    Both,
}

/// How many arguments, counting the receiver of a member call.
#[derive(Debug, Clone, Copy)]
pub enum Arity {
    Exact(usize),
    Range(usize, usize),
    AtLeast(usize),
}

impl Arity {
    pub fn accepts(&self, n: usize) -> bool {
        match *self {
            Arity::Exact(k) => n == k,
            Arity::Range(lo, hi) => (lo..=hi).contains(&n),
            Arity::AtLeast(k) => n >= k,
        }
    }
}

/// Libraries, as bits of a [`LibSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Lib {
    Core = 1 << 0,
    /// `[1, 'a']` is a compile error (kube-apiserver's HomogeneousAggregateLiterals).
    Homogeneous = 1 << 1,
    Optional = 1 << 2,
    TwoVar = 1 << 3,
    Bind = 1 << 4,
    Strings = 1 << 5,
    ListsExt = 1 << 6,
    Sets = 1 << 7,
    Math = 1 << 8,
    Encoders = 1 << 9,
    KubeLists = 1 << 10,
    Regex = 1 << 11,
    Urls = 1 << 12,
    Quantity = 1 << 13,
    Ip = 1 << 14,
    Cidr = 1 << 15,
    Format = 1 << 16,
    Semver = 1 << 17,
    Authz = 1 << 18,
    JsonPatch = 1 << 19,
    /// Functions only the CEL specification's tests use.
    Spec = 1 << 20,
    /// Duration, timestamp and regex literals are checked at compile time.
    LiteralChecks = 1 << 21,
    /// The strings extension as kube-apiserver v1.36 vendors it: `format`
    /// prints through golang.org/x/text's message printer, as before
    /// version 4 (`%e` gives `1.000000×10⁻⁰³`, not `1.000000e-03`), and
    /// `indexOf`/`lastIndexOf` find nothing past the end instead of failing.
    LocaleFormat = 1 << 22,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibSet(u32);

impl LibSet {
    const fn of(libs: &[Lib]) -> LibSet {
        let mut bits = 0;
        let mut i = 0;
        while i < libs.len() {
            bits |= libs[i] as u32;
            i += 1;
        }
        LibSet(bits)
    }

    pub const KUBERNETES: LibSet = LibSet::of(&[
        Lib::Core,
        Lib::Homogeneous,
        Lib::LiteralChecks,
        Lib::LocaleFormat,
        Lib::Optional,
        Lib::TwoVar,
        Lib::Strings,
        Lib::ListsExt,
        Lib::Sets,
        Lib::KubeLists,
        Lib::Regex,
        Lib::Urls,
        Lib::Quantity,
        Lib::Ip,
        Lib::Cidr,
        Lib::Format,
        Lib::Semver,
        Lib::Authz,
    ]);

    /// What a MutatingAdmissionPolicy has: Kubernetes plus `jsonpatch`.
    pub const MUTATING: LibSet = LibSet(LibSet::KUBERNETES.0 | Lib::JsonPatch as u32);

    /// Kubernetes plus what InterlockPolicy adds; `jsonpatch` belongs to
    /// mutations (kube-apiserver has it only for MutatingAdmissionPolicy).
    pub const INTERLOCK: LibSet = LibSet(
        LibSet::KUBERNETES.0
            | Lib::Bind as u32
            | Lib::Math as u32
            | Lib::Encoders as u32
            | Lib::JsonPatch as u32,
    );

    /// Without the authorizer, whose member names (`namespace`, `name`)
    /// the cel-spec cases use as undeclared functions.
    pub const ALL: LibSet = LibSet(
        (LibSet::INTERLOCK.0 | Lib::Spec as u32)
            & !(Lib::Authz as u32)
            & !(Lib::Homogeneous as u32)
            & !(Lib::LiteralChecks as u32)
            & !(Lib::LocaleFormat as u32),
    );

    pub fn has(&self, lib: Lib) -> bool {
        self.0 & lib as u32 != 0
    }
}

pub struct FnDecl {
    pub name: &'static str,
    pub style: Style,
    pub arity: Arity,
    pub lib: Lib,
    pub imp: Imp,
    /// Variant taking a value prepared from a constant second argument.
    pub imp_prepared: Option<ImpPrepared>,
    pub prepare: Option<Prepare>,
    /// Checks string literal arguments at compile time (argument index, value).
    pub validate_literal: Option<ValidateLiteral>,
    /// The argument kube-apiserver's cost tracker asserts to be a list
    /// (see `Ctx::eval_tracked_args`), for the variants the compiler
    /// picks where cel-go plans the call with that tracker.
    pub tracked: Option<usize>,
}

impl std::fmt::Debug for FnDecl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fn {}", self.name)
    }
}

impl FnDecl {
    pub const fn new(name: &'static str, style: Style, arity: Arity, lib: Lib, imp: Imp) -> FnDecl {
        FnDecl {
            name,
            style,
            arity,
            lib,
            imp,
            imp_prepared: None,
            prepare: None,
            validate_literal: None,
            tracked: None,
        }
    }
    pub const fn global(name: &'static str, n: usize, lib: Lib, imp: Imp) -> FnDecl {
        FnDecl::new(name, Style::Global, Arity::Exact(n), lib, imp)
    }
    /// A member function `recv.name(args)`; `n` counts the receiver.
    pub const fn member(name: &'static str, n: usize, lib: Lib, imp: Imp) -> FnDecl {
        FnDecl::new(name, Style::Member, Arity::Exact(n), lib, imp)
    }
    pub const fn both(name: &'static str, n: usize, lib: Lib, imp: Imp) -> FnDecl {
        FnDecl::new(name, Style::Both, Arity::Exact(n), lib, imp)
    }
    pub const fn validated(mut self, v: ValidateLiteral) -> FnDecl {
        self.validate_literal = Some(v);
        self
    }
    pub const fn tracking(mut self, arg: usize) -> FnDecl {
        self.tracked = Some(arg);
        self
    }
    pub const fn prepared(mut self, prepare: Prepare, imp: ImpPrepared) -> FnDecl {
        self.prepare = Some(prepare);
        self.imp_prepared = Some(imp);
        self
    }
}

/// Extra libraries registered at start-up (the Kubernetes libraries live
/// in their own module).
static EXTRA: OnceLock<Vec<&'static [FnDecl]>> = OnceLock::new();

fn all_decls() -> impl Iterator<Item = &'static FnDecl> {
    let builtin: [&'static [FnDecl]; 9] = [
        core::DECLS,
        time::DECLS,
        optional::DECLS,
        strings::DECLS,
        lists::DECLS,
        sets::DECLS,
        math::DECLS,
        encoders::DECLS,
        regex::DECLS,
    ];
    let extra = EXTRA.get_or_init(super::k8s_bindings::libraries);
    builtin.into_iter().chain(extra.iter().copied()).flatten()
}

fn table() -> &'static HashMap<&'static str, Vec<&'static FnDecl>> {
    static TABLE: OnceLock<HashMap<&'static str, Vec<&'static FnDecl>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: HashMap<&'static str, Vec<&'static FnDecl>> = HashMap::new();
        for d in all_decls() {
            t.entry(d.name).or_default().push(d);
        }
        t
    })
}

/// Declarations of `name` callable in `style` with the libraries in `libs`.
pub fn lookup(libs: LibSet, name: &str, style: Style) -> Vec<&'static FnDecl> {
    table()
        .get(name)
        .map(|v| {
            v.iter()
                .copied()
                .filter(|d| libs.has(d.lib) && (d.style == style || d.style == Style::Both))
                .collect()
        })
        .unwrap_or_default()
}

/// Type names that libraries add (`net.IP`, `kubernetes.Quantity`, ...).
pub fn named_type(libs: LibSet, name: &str) -> Option<Type> {
    super::k8s_bindings::named_type(libs, name)
}

// Small helpers the libraries share.

/// No overload of `name` takes these arguments (known only at run time,
/// from dynamic values). cel-go's dispatcher, and the guard it puts around
/// each overload, name the function and the arguments' runtime types:
/// `no such overload: uint(map)`.
pub fn no_overload<T>(name: &str, args: &[Value]) -> EvalResult<T> {
    let types: Vec<String> = args.iter().map(Value::type_name).collect();
    Err(EvalError::new(format!(
        "no such overload: {name}({})",
        types.join(", ")
    )))
}

/// No overload of an operator cel-go binds as one implementation guarded
/// by a trait of its first operand (`_+_` needs an adder, `size` a sizer):
/// a first operand with the trait (`has_trait`) answers the call itself
/// and only says `no such overload`; so do strings, durations and
/// timestamps, which receive the calls they have no trait for; any other
/// is refused with the function's name, `no such overload: size`.
pub fn no_trait_overload<T>(name: &str, first: &Value, has_trait: bool) -> EvalResult<T> {
    let receiver = matches!(
        first,
        Value::String(_) | Value::Duration(_) | Value::Timestamp(_)
    );
    if has_trait || receiver {
        return Err(EvalError::no_overload(name));
    }
    Err(EvalError::new(format!("no such overload: {name}")))
}

pub fn str_arg<'v>(name: &str, args: &'v [Value], i: usize) -> EvalResult<&'v str> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => no_overload(name, args),
    }
}

pub fn int_arg(name: &str, args: &[Value], i: usize) -> EvalResult<i64> {
    match args.get(i) {
        Some(Value::Int(n)) => Ok(*n),
        _ => no_overload(name, args),
    }
}
