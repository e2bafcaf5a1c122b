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

mod access;
mod eval;

use access::*;
pub use access::{has, index_value, select};
pub use eval::Ctx;

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
