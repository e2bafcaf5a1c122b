//! The parsed form of a CEL expression, after macro expansion.

use std::sync::Arc;

/// Byte offset of a node in the source expression.
pub type Pos = u32;

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(Arc<str>),
    Bytes(Arc<[u8]>),
}

#[derive(Debug, Clone)]
pub struct Expr {
    pub pos: Pos,
    pub kind: ExprKind,
}

#[derive(Debug, Clone)]
pub enum ExprKind {
    Literal(Literal),
    /// A possibly qualified name as written (`a`, or `.a` for the root scope).
    Ident(Arc<str>),
    /// `operand.field`; `optional` for `operand.?field`.
    Select {
        operand: Box<Expr>,
        field: Arc<str>,
        optional: bool,
    },
    /// `has(operand.field)`.
    Has {
        operand: Box<Expr>,
        field: Arc<str>,
    },
    /// `operand[index]`; `optional` for `operand[?index]`.
    Index {
        operand: Box<Expr>,
        index: Box<Expr>,
        optional: bool,
    },
    /// A function call; `target` is the receiver of `x.f(...)`.
    Call {
        function: Arc<str>,
        target: Option<Box<Expr>>,
        args: Vec<Expr>,
    },
    List {
        elements: Vec<Expr>,
        /// Indices of `?x` elements.
        optional: Vec<usize>,
    },
    Map {
        entries: Vec<MapEntry>,
    },
    /// `Name{field: value}`: only used for `JSONPatch{...}` and friends.
    Struct {
        name: Arc<str>,
        fields: Vec<(Arc<str>, Expr, bool)>,
    },
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Conditional(Box<Expr>, Box<Expr>, Box<Expr>),
    /// The general comprehension all macros expand to.
    Comprehension(Box<Comprehension>),
    /// `cel.bind(name, init, body)`, or a binding a macro expansion
    /// introduces (`optMap`, `sortBy`), which needs no `cel.bind`.
    Bind {
        name: Arc<str>,
        init: Box<Expr>,
        body: Box<Expr>,
        from_macro: bool,
    },
}

#[derive(Debug, Clone)]
pub struct MapEntry {
    pub key: Expr,
    pub value: Expr,
    pub optional: bool,
}

/// `for (iter_var[, iter_var2] in range) accu = init; while cond: accu = step; result`.
#[derive(Debug, Clone)]
pub struct Comprehension {
    pub iter_var: Arc<str>,
    pub iter_var2: Option<Arc<str>>,
    pub range: Expr,
    pub accu_var: Arc<str>,
    pub accu_init: Expr,
    pub loop_cond: Expr,
    pub loop_step: Expr,
    pub result: Expr,
}

impl Expr {
    pub fn new(pos: Pos, kind: ExprKind) -> Expr {
        Expr { pos, kind }
    }
}
