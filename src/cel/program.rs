//! Compiled programs and their evaluation.

use super::error::{EvalError, EvalResult};
use super::functions::{FnDecl, Lib};
use super::interrupt::{self, Halt, Interrupt};
use super::types::Ty;
use super::value::{Key, List, Map, OwnedMap, Str, Unhashable, Value};
use smallvec::SmallVec;
use std::any::Any;
use std::cell::RefCell;
use std::sync::Arc;

/// A compiled expression node. Names are already slots; functions are
/// already implementations.
#[derive(Debug)]
pub enum Node {
    Const(Value<'static>),
    /// Fails when evaluated (an unresolved name in an unchecked environment).
    Error(Arc<str>),
    Global(usize),
    Local(usize),
    /// `variables.NAME`: the index of its program, and NAME.
    Lazy(usize, Arc<str>),
    Select {
        operand: Box<Node>,
        field: Arc<str>,
        optional: bool,
    },
    Has {
        operand: Box<Node>,
        field: Arc<str>,
    },
    Index {
        operand: Box<Node>,
        index: Box<Node>,
        optional: bool,
    },
    Call {
        decl: &'static FnDecl,
        args: Vec<Node>,
    },
    /// A call of a type-checked expression, with the guard cel-go's
    /// interpreter puts on it.
    Guarded {
        decl: &'static FnDecl,
        args: Vec<Node>,
        guard: Guard,
    },
    /// A call whose second argument was a constant prepared at compile time
    /// (a regular expression).
    Prepared {
        decl: &'static FnDecl,
        args: Vec<Node>,
        prepared: Arc<dyn Any + Send + Sync>,
    },
    Host(usize, Vec<Node>),
    /// `operand.?f1.?f2...orValue(default)` or `...hasValue()`: the
    /// optional selects walked without building the optionals between them
    /// (policies write this for every setting that may be absent).
    OptionalSelects {
        operand: Box<Node>,
        fields: Box<[Arc<str>]>,
        end: OptionalEnd,
    },
    List(Vec<(Node, bool)>),
    /// A map literal's entries (key, value, optional), and whether the
    /// CEL specification's key rules apply.
    Map(Vec<(Node, Node, bool)>, bool),
    Struct(Vec<(Str<'static>, Node, bool)>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Conditional(Box<Node>, Box<Node>, Box<Node>),
    Comprehension(Box<Comprehension>),
    Bind(Box<Node>, Box<Node>),
    NotStrictlyFalse(Box<Node>),
    /// Appends to the accumulator in local `slot` without copying it.
    AccuAppend(usize, Box<Node>),
    AccuInsert(usize, Box<Node>, Box<Node>),
    AccuMerge(usize, Box<Node>),
}

impl Node {
    fn visit(&self, f: &mut dyn FnMut(&Node)) {
        f(self);
        match self {
            Node::Select { operand, .. } | Node::Has { operand, .. } => operand.visit(f),
            Node::Index { operand, index, .. } => {
                operand.visit(f);
                index.visit(f);
            }
            Node::Call { args, .. }
            | Node::Guarded { args, .. }
            | Node::Prepared { args, .. }
            | Node::Host(_, args) => args.iter().for_each(|a| a.visit(f)),
            Node::List(items) => items.iter().for_each(|(n, _)| n.visit(f)),
            Node::Map(items, _) => items.iter().for_each(|(k, v, _)| {
                k.visit(f);
                v.visit(f);
            }),
            Node::Struct(fields) => fields.iter().for_each(|(_, n, _)| n.visit(f)),
            Node::And(a, b) | Node::Or(a, b) | Node::Bind(a, b) | Node::AccuInsert(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Node::OptionalSelects { operand, end, .. } => {
                operand.visit(f);
                if let OptionalEnd::OrValue(default) = end {
                    default.visit(f);
                }
            }
            Node::Conditional(a, b, c) => {
                a.visit(f);
                b.visit(f);
                c.visit(f);
            }
            Node::Comprehension(c) => {
                for n in [&c.range, &c.accu_init, &c.cond, &c.step, &c.result] {
                    n.visit(f);
                }
            }
            Node::NotStrictlyFalse(a) | Node::AccuAppend(_, a) | Node::AccuMerge(_, a) => {
                a.visit(f)
            }
            Node::Const(_) | Node::Error(_) | Node::Global(_) | Node::Local(_) | Node::Lazy(..) => {
            }
        }
    }
}

/// The argument types cel-go's dispatcher lets through to a function's
/// implementation; other arguments are `no such overload: f(types)`.
#[derive(Debug)]
pub enum Guard {
    /// The checker resolved the call to one overload, which cel-go calls
    /// directly: its guard refuses arguments of other runtime types
    /// (`string(x)` checked as `string(uint)` refuses a string) even where
    /// another overload would take them.
    One(Arc<[Ty]>),
    /// Several overloads were left: cel-go calls the first whose declared
    /// types the arguments fit.
    Any(Arc<[Arc<[Ty]>]>),
}

impl Guard {
    fn admits(&self, args: &[Value]) -> bool {
        let fit = |params: &[Ty]| args.iter().zip(params).all(|(v, t)| fits(t, v));
        match self {
            Guard::One(params) => fit(params),
            Guard::Any(overloads) => overloads.iter().any(|p| fit(p)),
        }
    }
}

/// The call that ends [`Node::OptionalSelects`].
#[derive(Debug)]
pub enum OptionalEnd {
    OrValue(Box<Node>),
    HasValue,
}

#[derive(Debug)]
pub struct Comprehension {
    pub two_vars: bool,
    pub range: Node,
    pub accu_init: Node,
    pub cond: Node,
    pub step: Node,
    pub result: Node,
}

/// A compiled expression: immutable, `Send + Sync`, shared across threads.
#[derive(Debug, Clone)]
pub struct Program {
    root: Arc<Node>,
    source: Arc<str>,
    /// The static type the checker gave the expression (`None` in
    /// environments without the checker).
    static_type: Option<super::types::Ty>,
}

impl Program {
    pub(crate) fn new(root: Node, source: &str, static_type: Option<super::types::Ty>) -> Program {
        Program {
            root: Arc::new(root),
            source: source.into(),
            static_type,
        }
    }

    /// The expression's static type, when the environment checks types.
    pub fn static_type(&self) -> Option<&super::types::Ty> {
        self.static_type.as_ref()
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Does the program read the variable in `slot`?
    pub fn uses_global(&self, slot: usize) -> bool {
        let mut found = false;
        self.root
            .visit(&mut |n| found |= matches!(n, Node::Global(s) if *s == slot));
        found
    }

    pub(crate) fn root(&self) -> &Node {
        &self.root
    }

    /// Every host function call in the program with its constant string
    /// arguments (`None` where an argument is not a constant string).
    pub fn host_calls(&self) -> Vec<(usize, Vec<Option<String>>)> {
        let mut out = Vec::new();
        self.root.visit(&mut |n| {
            if let Node::Host(id, args) = n {
                let consts = args
                    .iter()
                    .map(|a| match a {
                        Node::Const(Value::String(s)) => Some(s.as_str().to_string()),
                        _ => None,
                    })
                    .collect();
                out.push((*id, consts));
            }
        });
        out
    }

    pub fn eval<'a>(&self, act: &Activation<'a, '_>) -> EvalResult<Value<'a>> {
        let mut ctx = Ctx::new(act);
        let r = ctx.eval(&self.root);
        act.spent.set(act.spent.get() + ctx.cost);
        // A budget or the interrupt ends the whole evaluation, as cel-go's
        // cost tracker does by panicking: an error that `||`, `&&` or a
        // comprehension would otherwise absorb must not become a result.
        let r = match ctx.halted {
            Some(halt) => Err(halt_error(halt)),
            None => r,
        };
        if r.is_err() {
            if let Some(i) = &act.interrupt {
                i.count_error(ctx.halted);
            }
        }
        r
    }
}

/// Functions the host answers at evaluation time (inventory lookups).
/// `ctx` is the evaluation's: what a call builds is accounted with
/// [`Ctx::alloc`] like any other value, so lookups count against the
/// memory budget.
pub trait Host<'a> {
    fn call(&self, ctx: &mut Ctx<'a, '_>, id: usize, args: &[Value<'a>]) -> EvalResult<Value<'a>>;
}

/// The values of an evaluation's variables.
pub struct Activation<'a, 'p> {
    globals: Vec<Option<Value<'a>>>,
    host: Option<&'p dyn Host<'a>>,
    lazy: &'p [Program],
    lazy_cache: RefCell<Vec<Option<EvalResult<Value<'a>>>>>,
    cost_limit: u64,
    spent: std::cell::Cell<u64>,
    /// Bytes of strings, lists and maps the evaluations built so far, and
    /// the most they may build: the cost budget alone does not bound
    /// memory (a list of shared strings costs one unit per element, its
    /// `join` may be gigabytes).
    built: std::cell::Cell<u64>,
    memory_limit: u64,
    /// Stops the evaluations once set, and counts their errors.
    interrupt: Option<Arc<Interrupt>>,
}

/// Bytes an activation's evaluations may build in all (see
/// [`Activation::with_memory_limit`]). At cel-go's 0.1 unit per string
/// byte, a policy's 10M budget builds about 100 MB of strings: 128 MiB
/// refuses none of those, yet bounds what the cost model lets through
/// cheaply (a `join` or `replace` that multiplies its input, lists of one
/// shared string), far below the webhook pod's memory limit. It counts
/// what is built, not what is still alive, so it errs on the safe side.
pub const DEFAULT_MEMORY_LIMIT: u64 = 128 << 20;

/// The error an evaluation stopped by `halt` ends with: kube-apiserver's
/// words for a spent budget, cel-go's for an interrupted evaluation.
fn halt_error(halt: Halt) -> EvalError {
    match halt {
        Halt::Budget => EvalError::cost_exceeded(),
        Halt::Interrupted => EvalError::interrupted(),
        Halt::Internal(m) => EvalError::new(format!("internal error: interface conversion: {m}")),
        Halt::Unhashable(t) => EvalError::new(Unhashable(t).to_string()),
    }
}

impl<'a, 'p> Activation<'a, 'p> {
    pub fn new(env: &super::Env) -> Self {
        Activation {
            globals: vec![None; env.variables().len()],
            host: None,
            lazy: &[],
            lazy_cache: RefCell::new(Vec::new()),
            cost_limit: env.cost_limit,
            spent: std::cell::Cell::new(0),
            built: std::cell::Cell::new(0),
            memory_limit: DEFAULT_MEMORY_LIMIT,
            interrupt: None,
        }
    }

    /// An activation for `n` variables, without an [`Env`](super::Env) at hand.
    pub fn new_with_slots(n: usize) -> Self {
        Activation {
            globals: vec![None; n],
            host: None,
            lazy: &[],
            lazy_cache: RefCell::new(Vec::new()),
            cost_limit: super::DEFAULT_COST_LIMIT,
            spent: std::cell::Cell::new(0),
            built: std::cell::Cell::new(0),
            memory_limit: DEFAULT_MEMORY_LIMIT,
            interrupt: None,
        }
    }

    pub fn set(&mut self, slot: usize, v: Value<'a>) {
        if slot >= self.globals.len() {
            self.globals.resize(slot + 1, None);
        }
        self.globals[slot] = Some(v);
    }

    pub fn with_host(mut self, host: &'p dyn Host<'a>) -> Self {
        self.host = Some(host);
        self
    }

    /// The programs behind `variables.NAME`, evaluated at most once each.
    pub fn with_lazy(mut self, programs: &'p [Program]) -> Self {
        self.lazy = programs;
        self.lazy_cache = RefCell::new(vec![None; programs.len()]);
        self
    }

    pub fn with_cost_limit(mut self, limit: u64) -> Self {
        self.cost_limit = limit;
        self
    }

    /// Bytes the evaluations may build before they fail as over budget.
    pub fn with_memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Evaluations stop (failing with "operation interrupted") once
    /// `interrupt` is set, and count their errors on it.
    pub fn with_interrupt(mut self, interrupt: Arc<Interrupt>) -> Self {
        self.interrupt = Some(interrupt);
        self
    }

    /// [`Activation::with_interrupt`] with this thread's current interrupt
    /// (see [`interrupt::scope`]), if any. Opt-in: for evaluations that
    /// belong to the request being answered (policy expressions), not for
    /// those that maintain shared state (the inventory's index keys, which
    /// must be computed whatever becomes of the request that wrote them).
    pub fn with_current_interrupt(mut self) -> Self {
        self.interrupt = interrupt::current();
        self
    }

    /// Cost spent by every evaluation in this activation so far.
    pub fn cost_spent(&self) -> u64 {
        self.spent.get()
    }
}

/// Per-evaluation state: the local variable stack and the cost meter.
pub struct Ctx<'a, 'e> {
    act: &'e Activation<'a, 'e>,
    /// Inline for the first few locals: most programs need no allocation.
    stack: SmallVec<[EvalResult<Value<'a>>; 8]>,
    base: usize,
    cost: u64,
    /// Set by the first charge that failed for a budget or the interrupt.
    halted: Option<Halt>,
}

type Args<'a> = SmallVec<[Value<'a>; 4]>;

impl<'a, 'e> Ctx<'a, 'e> {
    fn new(act: &'e Activation<'a, 'e>) -> Self {
        Ctx {
            act,
            stack: SmallVec::new(),
            base: 0,
            cost: 0,
            halted: None,
        }
    }

    /// Charges `units` of cost; fails once the limit is passed or the
    /// activation's [`Interrupt`] is set. Every loop iteration and every
    /// call charges, so this is where a deadline stops an evaluation.
    pub fn charge(&mut self, units: u64) -> EvalResult<()> {
        self.cost = self.cost.saturating_add(units);
        if self.cost.saturating_add(self.act.spent.get()) > self.act.cost_limit {
            return Err(self.halt(Halt::Budget));
        }
        if self
            .act
            .interrupt
            .as_ref()
            .is_some_and(|i| i.is_cancelled())
        {
            return Err(self.halt(Halt::Interrupted));
        }
        Ok(())
    }

    /// The interrupt that stops this evaluation, for calls that wait
    /// (the authorizer's `check`) and must stop waiting with it.
    pub(crate) fn interrupt(&self) -> Option<&Interrupt> {
        self.act.interrupt.as_deref()
    }

    /// Charges what cel-go charges for traversing `len` bytes of a string
    /// (`ceil(len * 0.1)`, its `StringTraversalCostFactor`) times `factor`,
    /// less the one unit every call was already charged: for the calls
    /// whose cost cel-go computes from their arguments' sizes instead of
    /// the flat unit.
    pub fn charge_traversal(&mut self, len: usize, factor: u64) -> EvalResult<()> {
        let units = (len as u64).saturating_mul(factor).div_ceil(10);
        self.charge(units.saturating_sub(1))
    }

    /// Accounts for `bytes` about to be built (a new string, list or map);
    /// fails, before they are allocated, once the activation's memory
    /// budget is spent. The failure reads as kube-apiserver's cost error:
    /// kube-apiserver bounds the same expressions by cost alone.
    pub fn alloc(&mut self, bytes: usize) -> EvalResult<()> {
        let built = self.act.built.get().saturating_add(bytes as u64);
        self.act.built.set(built);
        if built > self.act.memory_limit {
            return Err(self.halt(Halt::Budget));
        }
        Ok(())
    }

    /// [`Ctx::alloc`] for a list or map of `n` values.
    pub fn alloc_values(&mut self, n: usize) -> EvalResult<()> {
        self.alloc(n.saturating_mul(std::mem::size_of::<Value>()))
    }

    /// cel-go panicked hashing a key: the evaluation ends with Go's
    /// message, whatever the expression around would have made of an
    /// error.
    pub(crate) fn panic(&mut self, u: Unhashable) -> EvalError {
        self.halt(Halt::Unhashable(u.0))
    }

    /// The key of `v` as cel-go's Go map holds it.
    fn key(&mut self, v: &Value<'a>) -> EvalResult<Key<'a>> {
        Key::from_value(v).map_err(|u| self.panic(u))
    }

    fn halt(&mut self, halt: Halt) -> EvalError {
        self.halted.get_or_insert(halt);
        halt_error(halt)
    }

    pub fn eval(&mut self, n: &Node) -> EvalResult<Value<'a>> {
        match n {
            Node::Const(v) => Ok(v.clone()),
            Node::Error(msg) => Err(EvalError::new(msg.clone())),
            Node::Global(slot) => match self.act.globals.get(*slot) {
                Some(Some(v)) => Ok(v.clone()),
                _ => Err(EvalError::new("no such attribute: variable is not bound")),
            },
            Node::Local(slot) => self.stack[self.base + slot].clone(),
            Node::Lazy(i, name) => self.lazy(*i, name),
            Node::Select {
                operand,
                field,
                optional,
            } => {
                let v = self.eval(operand)?;
                select(v, field, *optional)
            }
            Node::Has { operand, field } => {
                let v = self.eval(operand)?;
                has(&v, field)
            }
            Node::Index {
                operand,
                index,
                optional,
            } => {
                let v = self.eval(operand)?;
                // cel-go applies no qualifier to an empty optional: the
                // index is not even evaluated.
                if matches!(v, Value::Optional(None)) {
                    return Ok(v);
                }
                let i = self.eval(index)?;
                if let Value::List(_) | Value::Map(_) = i {
                    return Err(aggregate_qualifier(&i, raw_attribute(index)));
                }
                index_value(v, &i, *optional)
            }
            Node::Call { decl, args } => {
                if decl.lib == Lib::Optional && matches!(decl.name, "or" | "orValue") {
                    return self.optional_or(decl, args);
                }
                let vals = match decl.tracked {
                    None => self.eval_args(args)?,
                    Some(k) => self.eval_tracked_args(args, k)?,
                };
                self.charge(1)?;
                (decl.imp)(self, &vals)
            }
            Node::Guarded { decl, args, guard } => {
                let vals = self.eval_args(args)?;
                if !guard.admits(&vals) {
                    return super::functions::no_overload(decl.name, &vals);
                }
                self.charge(1)?;
                (decl.imp)(self, &vals)
            }
            Node::Prepared {
                decl,
                args,
                prepared,
            } => {
                let vals = self.eval_args(args)?;
                self.charge(1)?;
                match decl.imp_prepared {
                    Some(f) => f(self, &vals, prepared.as_ref()),
                    None => (decl.imp)(self, &vals),
                }
            }
            Node::Host(id, args) => {
                let vals = self.eval_args(args)?;
                self.charge(1)?;
                match self.act.host {
                    Some(h) => h.call(self, *id, &vals),
                    None => Err(EvalError::new(
                        "inventory lookups are not available in this evaluation",
                    )),
                }
            }
            Node::OptionalSelects {
                operand,
                fields,
                end,
            } => self.optional_selects(operand, fields, end),
            Node::List(items) => self.list(items),
            Node::Map(items, spec) => self.map(items, *spec),
            Node::Struct(fields) => self.structure(fields),
            Node::And(a, b) => self.and(a, b),
            Node::Or(a, b) => self.or(a, b),
            Node::Conditional(c, t, f) => match self.eval(c)? {
                Value::Bool(true) => self.eval(t),
                Value::Bool(false) => self.eval(f),
                _ => Err(EvalError::no_overload("_?_:_")),
            },
            Node::Comprehension(c) => self.comprehension(c),
            Node::Bind(init, body) => {
                let v = self.eval(init);
                self.stack.push(v);
                let r = self.eval(body);
                self.stack.pop();
                r
            }
            Node::NotStrictlyFalse(e) => {
                Ok(Value::Bool(!matches!(self.eval(e), Ok(Value::Bool(false)))))
            }
            Node::AccuAppend(slot, e) => self.accu_append(*slot, e),
            Node::AccuInsert(slot, k, v) => self.accu_insert(*slot, k, v),
            Node::AccuMerge(slot, e) => self.accu_merge(*slot, e),
        }
    }

    /// As `orValue` or `hasValue` of the optional selects (`select` with
    /// `optional`): same value, same errors, in the same order, same cost.
    fn optional_selects(
        &mut self,
        operand: &Node,
        fields: &[Arc<str>],
        end: &OptionalEnd,
    ) -> EvalResult<Value<'a>> {
        // The optional's content, or `None` for `optional.none()`.
        let mut present = match self.eval(operand)? {
            Value::Optional(o) => o.map(|v| (*v).clone()),
            v => Some(v),
        };
        for field in fields {
            present = match present {
                None => None,
                Some(Value::Map(m)) => m.get_str(field),
                // Not a map: the general path, which fails or unwraps.
                Some(other) => match select(other, field, false)? {
                    Value::Optional(o) => o.map(|v| (*v).clone()),
                    v => Some(v),
                },
            };
        }
        match end {
            OptionalEnd::OrValue(default) => {
                // cel-go evaluates the default only when it is needed.
                self.charge(1)?;
                match present {
                    Some(v) => Ok(v),
                    None => self.eval(default),
                }
            }
            OptionalEnd::HasValue => {
                self.charge(1)?;
                Ok(Value::Bool(present.is_some()))
            }
        }
    }

    /// `opt.or(alt)` and `opt.orValue(alt)`: cel-go evaluates `alt` only
    /// when `opt` is empty.
    fn optional_or(&mut self, decl: &FnDecl, args: &[Node]) -> EvalResult<Value<'a>> {
        let mut vals = Args::new();
        vals.push(self.eval(&args[0])?);
        self.charge(1)?;
        match &vals[0] {
            Value::Optional(Some(v)) => {
                return Ok(if decl.name == "or" {
                    vals[0].clone()
                } else {
                    (**v).clone()
                });
            }
            Value::Optional(None) => {}
            // cel-go answers with a receiver that is not an optional
            // without evaluating the alternative.
            other => return Ok(other.clone()),
        }
        for a in &args[1..] {
            vals.push(self.eval(a)?);
        }
        (decl.imp)(self, &vals)
    }

    /// The arguments of a call whose cost kube-apiserver's tracker
    /// computes by asserting that argument `k` is a list: cel-go evaluates
    /// every argument of a one- or two-argument call, and the tracker
    /// panics on an error or another value there, even though the call
    /// itself only returned the first error.
    fn eval_tracked_args(&mut self, args: &[Node], k: usize) -> EvalResult<Args<'a>> {
        let results: SmallVec<[EvalResult<Value<'a>>; 4]> =
            args.iter().map(|a| self.eval(a)).collect();
        if let Some(m) = results.get(k).and_then(not_a_lister) {
            return Err(self.halt(Halt::Internal(m)));
        }
        results.into_iter().collect()
    }

    /// cel-go evaluates both arguments of a one- or two-argument call
    /// before it answers the first error (what the second runs into can
    /// still end the evaluation: a spent budget, a panic); longer calls
    /// stop at the first error.
    fn eval_args(&mut self, args: &[Node]) -> EvalResult<Args<'a>> {
        let mut out = Args::new();
        let mut first_error = None;
        for a in args {
            match self.eval(a) {
                Ok(v) => out.push(v),
                Err(e) if args.len() > 2 => return Err(e),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    fn lazy(&mut self, i: usize, name: &str) -> EvalResult<Value<'a>> {
        if let Some(Some(r)) = self.act.lazy_cache.borrow().get(i) {
            return r.clone();
        }
        let program = self
            .act
            .lazy
            .get(i)
            .ok_or_else(|| EvalError::new("variables are not available in this evaluation"))?;
        let saved = self.base;
        self.base = self.stack.len();
        let r = self
            .eval(&program.root)
            .map_err(|e| EvalError::in_variable(name, &e));
        self.base = saved;
        if let Some(slot) = self.act.lazy_cache.borrow_mut().get_mut(i) {
            *slot = Some(r.clone());
        }
        r
    }

    fn and(&mut self, a: &Node, b: &Node) -> EvalResult<Value<'a>> {
        let l = self.eval(a);
        if matches!(l, Ok(Value::Bool(false))) {
            return Ok(Value::Bool(false));
        }
        let r = self.eval(b);
        match (l, r) {
            (_, Ok(Value::Bool(false))) => Ok(Value::Bool(false)),
            (Ok(Value::Bool(true)), Ok(Value::Bool(true))) => Ok(Value::Bool(true)),
            (Ok(Value::Bool(true)), r) => Err(logic_error(r, "_&&_")),
            (l, _) => Err(logic_error(l, "_&&_")),
        }
    }

    fn or(&mut self, a: &Node, b: &Node) -> EvalResult<Value<'a>> {
        let l = self.eval(a);
        if matches!(l, Ok(Value::Bool(true))) {
            return Ok(Value::Bool(true));
        }
        let r = self.eval(b);
        match (l, r) {
            (_, Ok(Value::Bool(true))) => Ok(Value::Bool(true)),
            (Ok(Value::Bool(false)), Ok(Value::Bool(false))) => Ok(Value::Bool(false)),
            (Ok(Value::Bool(false)), r) => Err(logic_error(r, "_||_")),
            (l, _) => Err(logic_error(l, "_||_")),
        }
    }

    fn list(&mut self, items: &[(Node, bool)]) -> EvalResult<Value<'a>> {
        self.alloc_values(items.len())?;
        let mut out = Vec::with_capacity(items.len());
        for (n, optional) in items {
            let v = self.eval(n)?;
            if *optional {
                match v {
                    Value::Optional(Some(inner)) => out.push((*inner).clone()),
                    Value::Optional(None) => {}
                    other => {
                        return Err(EvalError::new(format!(
                            "optional list element is not an optional: {}",
                            other.type_name()
                        )))
                    }
                }
            } else {
                out.push(v);
            }
        }
        self.charge(out.len() as u64)?;
        Ok(Value::list(out))
    }

    /// A map literal, as cel-go builds it: each key, then its value, is
    /// evaluated (the first error ends it), then the entry goes into a Go
    /// map: a repeated key replaces the value, an empty optional entry
    /// deletes the key. Under the CEL specification's rules (`spec`), keys
    /// are ints, uints, bools and strings, and a repeated one is an error.
    fn map(&mut self, items: &[(Node, Node, bool)], spec: bool) -> EvalResult<Value<'a>> {
        // A key and a value per entry.
        self.alloc_values(items.len().saturating_mul(2))?;
        let mut out = OwnedMap::with_capacity_and_hasher(items.len(), Default::default());
        for (k, v, optional) in items {
            let key = self.eval(k)?;
            let mut value = self.eval(v)?;
            if *optional {
                match value {
                    Value::Optional(Some(inner)) => value = (*inner).clone(),
                    Value::Optional(None) if spec => continue,
                    Value::Optional(None) => {
                        let key = self.key(&key)?;
                        out.shift_remove(&key);
                        continue;
                    }
                    other => {
                        return Err(EvalError::new(format!(
                            "optional map entry is not an optional: {}",
                            other.type_name()
                        )))
                    }
                }
            }
            if !spec {
                let key = self.key(&key)?;
                out.insert(key, value);
                continue;
            }
            let key = Key::spec_key(&key)?;
            let repeated =
                out.contains_key(&key) || numeric_twin(&key).is_some_and(|k| out.contains_key(&k));
            if repeated {
                return Err(EvalError::new(format!("Failed with repeated key: {key}")));
            }
            out.insert(key, value);
        }
        self.charge(out.len() as u64)?;
        Ok(Value::map(out))
    }

    fn structure(&mut self, fields: &[(Str<'static>, Node, bool)]) -> EvalResult<Value<'a>> {
        let mut out = OwnedMap::with_capacity_and_hasher(fields.len(), Default::default());
        for (name, n, optional) in fields {
            let mut v = self.eval(n)?;
            if *optional {
                match v {
                    Value::Optional(Some(inner)) => v = (*inner).clone(),
                    Value::Optional(None) => continue,
                    _ => return Err(EvalError::new("optional field is not an optional")),
                }
            }
            out.insert(Key::String(name.clone()), v);
        }
        Ok(Value::map(out))
    }

    fn comprehension(&mut self, c: &Comprehension) -> EvalResult<Value<'a>> {
        let range = self.eval(&c.range)?;
        let accu = self.eval(&c.accu_init);
        let accu_slot = self.stack.len();
        self.stack.push(accu);
        let r = self.iterate(c, range, accu_slot);
        let accu = self.stack.pop();
        r?;
        self.stack
            .push(accu.unwrap_or_else(|| Err(EvalError::new("internal: accumulator lost"))));
        let result = self.eval(&c.result);
        self.stack.pop();
        result
    }

    fn iterate(&mut self, c: &Comprehension, range: Value<'a>, accu_slot: usize) -> EvalResult<()> {
        let items: Vec<(Value<'a>, Value<'a>)> = match &range {
            Value::List(l) => {
                if c.two_vars {
                    l.iter().enumerate().map(|(i, v)| (Value::Int(i as i64), v)).collect()
                } else {
                    return self.iterate_list(c, l, accu_slot);
                }
            }
            Value::Map(m) => {
                if c.two_vars {
                    m.entries()
                } else {
                    m.keys().into_iter().map(|k| (k, Value::Null)).collect()
                }
            }
            other => {
                return Err(match go_type(other) {
                    Some(t) if c.two_vars => {
                        EvalError::new(format!("unsupported comprehension range type: {t}"))
                    }
                    Some(t) => EvalError::new(format!("got '{t}', expected iterable type")),
                    None => EvalError::new(format!(
                        "expression of type '{}' cannot be the range of a comprehension (must be list, map, or dynamic)",
                        other.type_name()
                    )),
                })
            }
        };
        for (a, b) in items {
            self.stack.push(Ok(a));
            if c.two_vars {
                self.stack.push(Ok(b));
            }
            let done = self.step(c, accu_slot);
            self.stack.truncate(accu_slot + 1);
            if done? {
                break;
            }
        }
        Ok(())
    }

    fn iterate_list(
        &mut self,
        c: &Comprehension,
        l: &List<'a>,
        accu_slot: usize,
    ) -> EvalResult<()> {
        for v in l.iter() {
            self.stack.push(Ok(v));
            let done = self.step(c, accu_slot);
            self.stack.truncate(accu_slot + 1);
            if done? {
                break;
            }
        }
        Ok(())
    }

    /// One iteration; returns true when the loop condition says stop.
    fn step(&mut self, c: &Comprehension, accu_slot: usize) -> EvalResult<bool> {
        self.charge(1)?;
        match self.eval(&c.cond) {
            Ok(Value::Bool(false)) => return Ok(true),
            Ok(Value::Bool(true)) => {}
            Ok(_) => return Err(EvalError::no_overload("loop condition")),
            Err(e) => return Err(e),
        }
        let next = self.eval(&c.step);
        self.stack[accu_slot] = next;
        Ok(false)
    }

    fn take_accu(&mut self, slot: usize) -> EvalResult<Value<'a>> {
        std::mem::replace(&mut self.stack[self.base + slot], Ok(Value::Null))
    }

    fn accu_append(&mut self, slot: usize, e: &Node) -> EvalResult<Value<'a>> {
        let v = self.eval(e);
        // cel-go's `accu + [x]`: an accumulator that already failed keeps
        // its (first) error.
        let accu = self.take_accu(slot)?;
        let v = v?;
        self.charge(1)?;
        self.alloc_values(1)?;
        match accu {
            Value::List(List::Owned(mut items)) => {
                Arc::make_mut(&mut items).push(v);
                Ok(Value::List(List::Owned(items)))
            }
            Value::List(l) => {
                let mut items = l.to_vec();
                items.push(v);
                Ok(Value::list(items))
            }
            other => Err(EvalError::new(format!(
                "internal: accumulator is a {}",
                other.type_name()
            ))),
        }
    }

    fn accu_insert(&mut self, slot: usize, k: &Node, v: &Node) -> EvalResult<Value<'a>> {
        let key = self.eval(k)?;
        let key = self.key(&key)?;
        let value = self.eval(v)?;
        self.charge(1)?;
        self.alloc_values(2)?;
        let mut entries = self.owned_accu_map(slot)?;
        if has_key(&entries, &key) {
            return Err(insert_failed(&key));
        }
        Arc::make_mut(&mut entries).insert(key, value);
        Ok(Value::Map(Map::Owned(entries)))
    }

    fn accu_merge(&mut self, slot: usize, e: &Node) -> EvalResult<Value<'a>> {
        let add = match self.eval(e)? {
            Value::Map(m) => m,
            other => {
                return Err(EvalError::new(format!(
                    "transformMapEntry: expression must produce a map, got {}",
                    other.type_name()
                )))
            }
        };
        self.charge(add.len() as u64)?;
        self.alloc_values(add.len().saturating_mul(2))?;
        let mut entries = self.owned_accu_map(slot)?;
        for (k, v) in add.entries() {
            let key = self.key(&k)?;
            if has_key(&entries, &key) {
                return Err(insert_failed(&key));
            }
            Arc::make_mut(&mut entries).insert(key, v);
        }
        Ok(Value::Map(Map::Owned(entries)))
    }

    #[allow(clippy::type_complexity)]
    fn owned_accu_map(&mut self, slot: usize) -> EvalResult<Arc<OwnedMap<'a>>> {
        match self.take_accu(slot)? {
            Value::Map(Map::Owned(m)) => Ok(m),
            Value::Map(m) => Ok(Arc::new(
                m.entries()
                    .into_iter()
                    .map(|(k, v)| Ok((Key::from_value(&k)?, v)))
                    .collect::<Result<OwnedMap, Unhashable>>()
                    .map_err(|u| self.panic(u))?,
            )),
            other => Err(EvalError::new(format!(
                "internal: accumulator is a {}",
                other.type_name()
            ))),
        }
    }
}

/// Whether cel-go finds `key` in a map a comprehension builds: the key,
/// or a number's other spelling (`1` and `1u`).
fn has_key(m: &OwnedMap, key: &Key) -> bool {
    m.contains_key(key) || numeric_twin(key).is_some_and(|k| m.contains_key(&k))
}

/// cel-go's refusal of a repeated key in a map a comprehension builds.
fn insert_failed(key: &Key) -> EvalError {
    let key = go_value(&key.to_value());
    EvalError::new(format!("insert failed: key {key} already exists"))
}

/// The other spelling of a numeric key (`1` and `1u`), a repeated key
/// under the CEL specification's rules.
fn numeric_twin<'a>(k: &Key<'a>) -> Option<Key<'a>> {
    match k {
        Key::Int(i) if *i >= 0 => Some(Key::Uint(*i as u64)),
        Key::Uint(u) if *u <= i64::MAX as u64 => Some(Key::Int(*u as i64)),
        _ => None,
    }
}

/// `v.field`, or `v.?field` when `optional`.
pub fn select<'a>(v: Value<'a>, field: &str, optional: bool) -> EvalResult<Value<'a>> {
    match v {
        Value::Map(m) => match m.get_str(field) {
            Some(x) if optional => Ok(Value::optional(Some(x))),
            Some(x) => Ok(x),
            None if optional => Ok(Value::Optional(None)),
            None => Err(EvalError::no_such_key(field)),
        },
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => match &*inner {
            Value::Map(m) => Ok(Value::optional(m.get_str(field))),
            other => select(other.clone(), field, false),
        },
        other => Err(EvalError::new(format!(
            "no such key: {field} (type '{}' does not support field selection)",
            other.type_name()
        ))),
    }
}

/// `has(v.field)`.
pub fn has(v: &Value, field: &str) -> EvalResult<Value<'static>> {
    match v {
        Value::Map(m) => Ok(Value::Bool(m.get_str(field).is_some())),
        Value::Optional(None) => Ok(Value::Bool(false)),
        Value::Optional(Some(inner)) => has(inner, field),
        other => Err(EvalError::new(format!(
            "invalid type for field selection: {}",
            other.type_name()
        ))),
    }
}

/// The error of an operand of `&&` or `||` that is not a boolean: its own,
/// or `no such overload` for another value. cel-go keeps the first
/// operand's, whatever the second.
fn logic_error(v: EvalResult<Value>, op: &str) -> EvalError {
    match v {
        Err(e) => e,
        Ok(_) => EvalError::no_overload(op),
    }
}

/// Whether `v` passes cel-go's guard for an argument declared as `t`
/// (`Type.IsAssignableRuntimeType`): its runtime type's name, and for a
/// list or a map also its first element or entry. Type parameters and
/// `dyn` take anything.
fn fits(t: &Ty, v: &Value) -> bool {
    match (t, v) {
        (t, _) if t.takes_anything() => true,
        (Ty::List(e), Value::List(l)) => l.get(0).is_none_or(|x| fits(e, &x)),
        (Ty::Map(k, e), Value::Map(m)) => m.first().is_none_or(|(x, y)| fits(k, &x) && fits(e, &y)),
        (Ty::Named(n), Value::Opaque(o)) => o.type_name() == &**n,
        (Ty::Int, Value::Int(_))
        | (Ty::Uint, Value::Uint(_))
        | (Ty::Double, Value::Double(_))
        | (Ty::Bool, Value::Bool(_))
        | (Ty::String, Value::String(_))
        | (Ty::Bytes, Value::Bytes(_))
        | (Ty::Null, Value::Null)
        | (Ty::Duration, Value::Duration(_))
        | (Ty::Timestamp, Value::Timestamp(_))
        | (Ty::Type(_), Value::Type(_))
        | (Ty::Optional(_), Value::Optional(_)) => true,
        _ => false,
    }
}

/// Whether cel-go resolves `n` as an attribute of a variable (a select or
/// constant index path from it), which yields the variable's Go value as
/// it is, not a CEL value.
fn raw_attribute(n: &Node) -> bool {
    match n {
        Node::Global(_) => true,
        Node::Select {
            operand,
            optional: false,
            ..
        } => raw_attribute(operand),
        Node::Index {
            operand,
            index,
            optional: false,
        } => matches!(**index, Node::Const(_)) && raw_attribute(operand),
        _ => false,
    }
}

/// cel-go refuses a list or map as an index by its Go type: a JSON value
/// read straight from a variable is Go's own slice or map, any other a
/// CEL list or map.
fn aggregate_qualifier(i: &Value, raw: bool) -> EvalError {
    let go_type = match i {
        Value::List(List::Json(_)) if raw => "[]interface {}",
        Value::Map(Map::Json(_)) if raw => "map[string]interface {}",
        Value::Map(_) => "*types.baseMap",
        Value::List(List::Concat(_)) => "*types.concatList",
        _ => "*types.baseList",
    };
    EvalError::new(format!("invalid qualifier type: {go_type}"))
}

/// Go's message for asserting that `v` is a `traits.Lister` (`None` for
/// a list, or a value whose Go type is not known here): the interface's
/// first method (in name order) the value's type lacks.
fn not_a_lister(v: &EvalResult<Value>) -> Option<&'static str> {
    Some(match v {
        Err(_) => "*types.Err is not traits.Lister: missing method Add",
        Ok(Value::Null) => "types.Null is not traits.Lister: missing method Add",
        Ok(Value::Bool(_)) => "types.Bool is not traits.Lister: missing method Add",
        Ok(Value::Optional(_)) => "*types.Optional is not traits.Lister: missing method Add",
        Ok(Value::Int(_)) => "types.Int is not traits.Lister: missing method Contains",
        Ok(Value::Uint(_)) => "types.Uint is not traits.Lister: missing method Contains",
        Ok(Value::Double(_)) => "types.Double is not traits.Lister: missing method Contains",
        Ok(Value::String(_)) => "types.String is not traits.Lister: missing method Contains",
        Ok(Value::Bytes(_)) => "types.Bytes is not traits.Lister: missing method Contains",
        Ok(Value::Duration(_)) => "types.Duration is not traits.Lister: missing method Contains",
        Ok(Value::Timestamp(_)) => "types.Timestamp is not traits.Lister: missing method Contains",
        Ok(_) => return None,
    })
}

/// A key or index as cel-go prints it in its messages (Go's `%v`).
fn go_value(i: &Value) -> String {
    use super::functions::time::{go_duration, go_time};
    match i {
        Value::String(s) => s.as_str().to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => super::functions::core::format_double(*d),
        // `types.Null` is a Go integer type without a `String` method.
        Value::Null => "0".into(),
        Value::Duration(d) => go_duration(*d),
        Value::Timestamp(t) => go_time(*t),
        Value::Opaque(o) => match o.to_json() {
            super::value::Json::String(s) => s,
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

/// The Go type of a value as cel-go names it in its `%T` messages (`None`
/// for lists and maps, whose Go types vary with their origin, and library
/// values not known here).
fn go_type(v: &Value) -> Option<&'static str> {
    Some(match v {
        Value::Null => "types.Null",
        Value::Bool(_) => "types.Bool",
        Value::Int(_) => "types.Int",
        Value::Uint(_) => "types.Uint",
        Value::Double(_) => "types.Double",
        Value::String(_) => "types.String",
        Value::Bytes(_) => "types.Bytes",
        Value::Duration(_) => "types.Duration",
        Value::Timestamp(_) => "types.Timestamp",
        Value::Optional(_) => "*types.Optional",
        Value::Type(_) => "*types.Type",
        Value::Opaque(o) => super::k8s_bindings::go_type_name(o.as_ref())?,
        Value::List(_) | Value::Map(_) => return None,
    })
}

/// cel-go makes a qualifier of the index value before it applies it: one
/// of another type than string, int, uint, bool or double is refused by
/// its Go type.
fn invalid_qualifier(i: &Value) -> Option<EvalError> {
    match i {
        Value::String(_) | Value::Int(_) | Value::Uint(_) | Value::Bool(_) | Value::Double(_) => {
            None
        }
        other => go_type(other).map(|t| EvalError::new(format!("invalid qualifier type: {t}"))),
    }
}

/// `v[i]`, or `v[?i]` when `optional`.
pub fn index_value<'a>(v: Value<'a>, i: &Value<'a>, optional: bool) -> EvalResult<Value<'a>> {
    if let Some(e) = invalid_qualifier(i) {
        return Err(e);
    }
    let wrap = |x: Option<Value<'a>>| -> EvalResult<Value<'a>> {
        if optional {
            Ok(Value::optional(x))
        } else {
            x.ok_or_else(|| EvalError::no_such_key(go_value(i)))
        }
    };
    match v {
        Value::List(l) => {
            let idx = list_index(i)?;
            match idx.filter(|&x| x < l.len()) {
                Some(x) => wrap(l.get(x)),
                None if optional => Ok(Value::Optional(None)),
                None => Err(EvalError::new(format!(
                    "index out of bounds: {}",
                    go_value(i)
                ))),
            }
        }
        Value::Map(m) => wrap(m.get(i)),
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => index_value((*inner).clone(), i, true),
        // Values that are neither maps nor lists have no keys; an
        // optional index only finds none.
        _ if optional => Ok(Value::Optional(None)),
        _ => Err(EvalError::no_such_key(go_value(i))),
    }
}

fn list_index(i: &Value) -> EvalResult<Option<usize>> {
    match i {
        Value::Int(x) => Ok(usize::try_from(*x).ok()),
        Value::Uint(x) => Ok(usize::try_from(*x).ok()),
        Value::Double(d) if d.fract() == 0.0 && d.is_finite() => {
            Ok(if *d >= 0.0 { Some(*d as usize) } else { None })
        }
        Value::Double(d) => Err(EvalError::new(format!("unsupported index value: {d}"))),
        other => Err(EvalError::new(format!(
            "unsupported index type '{}' in list",
            other.type_name()
        ))),
    }
}
