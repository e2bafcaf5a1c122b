//! Recursive-descent CEL parser with macro expansion.
//!
//! Precedence, lowest first: `?:`, `||`, `&&`, relations (`< <= >= > == != in`),
//! `+ -`, `* / %`, unary `! -`, member access and calls.

use super::ast::*;
use super::error::CompileError;
use super::lexer::{is_reserved, Lexer, Tok, Token};
use std::sync::Arc;

/// Limits that keep a hostile expression from exhausting the stack or memory.
#[derive(Debug, Clone, Copy)]
pub struct ParseLimits {
    pub max_depth: usize,
    pub max_code_points: usize,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_depth: 250,
            max_code_points: 100_000,
        }
    }
}

/// The accumulator variable of expanded macros; not a legal identifier, so
/// user expressions cannot name it.
pub const ACCU: &str = "@result";

pub fn parse(src: &str, limits: ParseLimits) -> Result<Expr, CompileError> {
    if src.chars().count() > limits.max_code_points {
        return Err(CompileError::new(
            src,
            0,
            format!(
                "expression code point size exceeds limit: size: {}, limit {}",
                src.chars().count(),
                limits.max_code_points
            ),
        ));
    }
    let toks = Lexer::new(src).tokenize()?;
    let mut p = Parser {
        src,
        toks,
        i: 0,
        depth: 0,
        limits,
    };
    let e = p.expr()?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected());
    }
    Ok(e)
}

struct Parser<'s> {
    src: &'s str,
    toks: Vec<Token>,
    i: usize,
    depth: usize,
    limits: ParseLimits,
}

type PResult<T> = Result<T, CompileError>;

fn call(pos: Pos, function: &str, target: Option<Expr>, args: Vec<Expr>) -> Expr {
    Expr::new(
        pos,
        ExprKind::Call {
            function: function.into(),
            target: target.map(Box::new),
            args,
        },
    )
}

fn ident(pos: Pos, name: &str) -> Expr {
    Expr::new(pos, ExprKind::Ident(name.into()))
}

fn lit(pos: Pos, l: Literal) -> Expr {
    Expr::new(pos, ExprKind::Literal(l))
}

impl<'s> Parser<'s> {
    fn peek(&self) -> &Tok {
        &self.toks[self.i].tok
    }
    fn pos(&self) -> Pos {
        self.toks[self.i].pos
    }
    fn bump(&mut self) -> Token {
        let t = self.toks[self.i].clone();
        if self.i + 1 < self.toks.len() {
            self.i += 1;
        }
        t
    }
    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }
    fn eat(&mut self, p: &str) -> bool {
        if self.is_punct(p) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn err(&self, pos: Pos, msg: impl Into<String>) -> CompileError {
        CompileError::new(self.src, pos, msg)
    }
    fn unexpected(&self) -> CompileError {
        let what = match self.peek() {
            Tok::Eof => "end of input".to_string(),
            Tok::Punct(p) => format!("'{p}'"),
            Tok::Ident(n) => format!("'{n}'"),
            t => format!("{t:?}"),
        };
        self.err(self.pos(), format!("Syntax error: unexpected {what}"))
    }
    fn expect(&mut self, p: &str) -> PResult<()> {
        if self.eat(p) {
            Ok(())
        } else {
            let mut e = self.unexpected();
            e.message = format!("{}, expecting '{p}'", e.message);
            Err(e)
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(self.err(
                self.pos(),
                format!(
                    "expression recursion limit exceeded: {}",
                    self.limits.max_depth
                ),
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        // Deep (but allowed) nesting must not overflow a small thread stack.
        let r = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.conditional());
        self.depth -= 1;
        r
    }

    fn conditional(&mut self) -> PResult<Expr> {
        let cond = self.or()?;
        if !self.is_punct("?") {
            return Ok(cond);
        }
        let pos = self.bump().pos;
        let then = self.or()?;
        self.expect(":")?;
        let otherwise = self.expr()?;
        Ok(Expr::new(
            pos,
            ExprKind::Conditional(Box::new(cond), Box::new(then), Box::new(otherwise)),
        ))
    }

    fn or(&mut self) -> PResult<Expr> {
        let mut e = self.and()?;
        while self.is_punct("||") {
            let pos = self.bump().pos;
            let r = self.and()?;
            e = Expr::new(pos, ExprKind::Or(Box::new(e), Box::new(r)));
        }
        Ok(e)
    }

    fn and(&mut self) -> PResult<Expr> {
        let mut e = self.relation()?;
        while self.is_punct("&&") {
            let pos = self.bump().pos;
            let r = self.relation()?;
            e = Expr::new(pos, ExprKind::And(Box::new(e), Box::new(r)));
        }
        Ok(e)
    }

    fn relation(&mut self) -> PResult<Expr> {
        let mut e = self.addition()?;
        let mut n = 0;
        loop {
            let f = match self.peek() {
                Tok::Punct("<") => "_<_",
                Tok::Punct("<=") => "_<=_",
                Tok::Punct(">") => "_>_",
                Tok::Punct(">=") => "_>=_",
                Tok::Punct("==") => "_==_",
                Tok::Punct("!=") => "_!=_",
                Tok::In => "@in",
                _ => return Ok(e),
            };
            n += 1;
            if n > self.limits.max_depth {
                return Err(self.err(self.pos(), "expression recursion limit exceeded"));
            }
            let pos = self.bump().pos;
            let r = self.addition()?;
            e = call(pos, f, None, vec![e, r]);
        }
    }

    fn addition(&mut self) -> PResult<Expr> {
        let mut e = self.multiplication()?;
        loop {
            let f = match self.peek() {
                Tok::Punct("+") => "_+_",
                Tok::Punct("-") => "_-_",
                _ => return Ok(e),
            };
            let pos = self.bump().pos;
            let r = self.multiplication()?;
            e = call(pos, f, None, vec![e, r]);
        }
    }

    fn multiplication(&mut self) -> PResult<Expr> {
        let mut e = self.unary()?;
        loop {
            let f = match self.peek() {
                Tok::Punct("*") => "_*_",
                Tok::Punct("/") => "_/_",
                Tok::Punct("%") => "_%_",
                _ => return Ok(e),
            };
            let pos = self.bump().pos;
            let r = self.unary()?;
            e = call(pos, f, None, vec![e, r]);
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.unary_inner());
        self.depth -= 1;
        r
    }

    /// cel-go's grammar: `unary: member | '!'+ member | '-'+ member`, where
    /// a member may be a literal with one leading minus. ANTLR takes every
    /// minus of a run as an operator, so `--9223372036854775808` is an
    /// out-of-range literal and `!-x` a syntax error; an even run of the
    /// same operator cancels out (`!!1` is `1`).
    fn unary_inner(&mut self) -> PResult<Expr> {
        for op in ["!", "-"] {
            if !self.is_punct(op) {
                continue;
            }
            let pos = self.pos();
            let mut n = 0;
            while self.is_punct(op) {
                self.bump();
                n += 1;
            }
            let operand = if op == "-" && n == 1 {
                match self.signed_literal(pos)? {
                    Some(l) => return self.member_suffix(l),
                    None if self.is_punct("!") => return Err(self.no_viable_alternative(pos)),
                    None => self.member()?,
                }
            } else if op == "!" && self.is_punct("-") {
                let minus = self.pos();
                self.bump();
                match self.signed_literal(minus)? {
                    Some(l) => self.member_suffix(l)?,
                    None => return Err(self.no_viable_alternative(minus)),
                }
            } else if self.is_punct("!") {
                return Err(self.no_viable_alternative(pos));
            } else {
                self.member()?
            };
            let function = if op == "!" { "!_" } else { "-_" };
            return Ok(match n % 2 {
                0 => operand,
                _ => call(pos, function, None, vec![operand]),
            });
        }
        self.member()
    }

    /// A primary expression and its selections, indexes and calls.
    fn member(&mut self) -> PResult<Expr> {
        let primary = self.primary()?;
        self.member_suffix(primary)
    }

    /// The number literal after a minus at `pos` (already consumed), as one
    /// signed literal; `None` when no number follows.
    fn signed_literal(&mut self, pos: Pos) -> PResult<Option<Expr>> {
        let l = match self.peek().clone() {
            Tok::Int(v) => lit(pos, Literal::Int(-v)),
            Tok::BigInt(v) if v == i64::MIN.unsigned_abs() => lit(pos, Literal::Int(i64::MIN)),
            Tok::BigInt(_) => return Err(self.err(pos, "invalid int literal")),
            Tok::Double(v) => lit(pos, Literal::Double(-v)),
            _ => return Ok(None),
        };
        self.bump();
        Ok(Some(l))
    }

    /// ANTLR's error for a token no alternative accepts: the input from the
    /// decision's start (`from`) through the offending token.
    fn no_viable_alternative(&self, from: Pos) -> CompileError {
        let at = self.pos();
        let end = self
            .toks
            .get(self.i + 1)
            .map_or(self.src.len(), |t| t.pos as usize);
        let text = self.src[from as usize..end.max(at as usize)]
            .trim_end()
            .replace('\n', "\\n")
            .replace('\t', "\\t")
            .replace('\r', "\\r");
        self.err(
            at,
            format!("Syntax error: no viable alternative at input '{text}'"),
        )
    }

    fn member_suffix(&mut self, mut e: Expr) -> PResult<Expr> {
        let mut n = 0;
        loop {
            n += 1;
            if n > self.limits.max_depth * 4 {
                return Err(self.err(self.pos(), "expression recursion limit exceeded"));
            }
            if self.is_punct(".") || self.is_punct(".?") {
                let optional = self.is_punct(".?");
                let pos = self.bump().pos;
                let field = self.field_name()?;
                if !optional && self.is_punct("(") {
                    let paren = self.bump().pos;
                    let args = self.args(")")?;
                    e = self.expand_call(pos, paren, &field, Some(e), args)?;
                } else {
                    e = Expr::new(
                        pos,
                        ExprKind::Select {
                            operand: Box::new(e),
                            field,
                            optional,
                        },
                    );
                }
            } else if self.is_punct("[") || self.is_punct("[?") {
                let optional = self.is_punct("[?");
                let pos = self.bump().pos;
                let index = self.expr()?;
                self.expect("]")?;
                e = Expr::new(
                    pos,
                    ExprKind::Index {
                        operand: Box::new(e),
                        index: Box::new(index),
                        optional,
                    },
                );
            } else if self.is_punct("{") && qualified_name(&e).is_some() {
                let name = qualified_name(&e).unwrap_or_default();
                let pos = self.bump().pos;
                e = self.struct_body(pos, name.into())?;
            } else {
                return Ok(e);
            }
        }
    }

    fn field_name(&mut self) -> PResult<Arc<str>> {
        match self.peek().clone() {
            Tok::Ident(n) => {
                self.bump();
                Ok(n)
            }
            Tok::QuotedIdent(n) => {
                self.bump();
                Ok(n)
            }
            // Keywords are fine as field names after a dot.
            Tok::True => self.bump_as("true"),
            Tok::False => self.bump_as("false"),
            Tok::Null => self.bump_as("null"),
            Tok::In => self.bump_as("in"),
            _ => {
                let mut e = self.unexpected();
                e.message = format!("{}, expecting IDENTIFIER", e.message);
                Err(e)
            }
        }
    }

    fn bump_as(&mut self, name: &str) -> PResult<Arc<str>> {
        let pos = self.bump().pos;
        Err(self.err(
            pos,
            format!("Syntax error: reserved word '{name}' used as a field name"),
        ))
    }

    fn args(&mut self, close: &str) -> PResult<Vec<Expr>> {
        let mut args = Vec::new();
        if self.eat(close) {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat(close) {
                return Ok(args);
            }
            self.expect(",")?;
        }
    }

    fn primary(&mut self) -> PResult<Expr> {
        let start = self.i;
        let t = self.bump();
        let pos = t.pos;
        Ok(match t.tok {
            Tok::Int(v) => lit(pos, Literal::Int(v)),
            Tok::BigInt(_) => return Err(self.err(pos, "invalid int literal")),
            Tok::Uint(v) => lit(pos, Literal::Uint(v)),
            Tok::Double(v) => lit(pos, Literal::Double(v)),
            Tok::Str(s) => lit(pos, Literal::String(s)),
            Tok::Bytes(b) => lit(pos, Literal::Bytes(b)),
            Tok::True => lit(pos, Literal::Bool(true)),
            Tok::False => lit(pos, Literal::Bool(false)),
            Tok::Null => lit(pos, Literal::Null),
            Tok::Punct(".") => {
                let name = match self.bump().tok {
                    Tok::Ident(n) => n,
                    _ => return Err(self.err(pos, "Syntax error: expected identifier after '.'")),
                };
                self.ident_or_call(pos, format!(".{name}").into())?
            }
            Tok::Ident(name) => self.ident_or_call(pos, name)?,
            Tok::Punct("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                e
            }
            Tok::Punct("[") => self.list(pos, false)?,
            // `[?x, ...]`: the lexer saw the optional-index token.
            Tok::Punct("[?") => self.list(pos, true)?,
            Tok::Punct("{") => self.map(pos)?,
            _ => {
                self.i = start;
                return Err(self.unexpected());
            }
        })
    }

    fn ident_or_call(&mut self, pos: Pos, name: Arc<str>) -> PResult<Expr> {
        if is_reserved(name.trim_start_matches('.')) {
            return Err(self.err(pos, format!("reserved identifier: {name}")));
        }
        if self.is_punct("(") {
            let paren = self.bump().pos;
            let args = self.args(")")?;
            return self.expand_call(pos, paren, &name, None, args);
        }
        Ok(Expr::new(pos, ExprKind::Ident(name)))
    }

    fn list(&mut self, pos: Pos, first_optional: bool) -> PResult<Expr> {
        let mut elements = Vec::new();
        let mut optional = Vec::new();
        while !self.is_punct("]") {
            if (elements.is_empty() && first_optional) || self.eat("?") {
                optional.push(elements.len());
            }
            elements.push(self.expr()?);
            if !self.eat(",") {
                break;
            }
        }
        self.expect("]")?;
        Ok(Expr::new(pos, ExprKind::List { elements, optional }))
    }

    fn map(&mut self, pos: Pos) -> PResult<Expr> {
        let mut entries = Vec::new();
        while !self.is_punct("}") {
            let optional = self.eat("?");
            let key = self.expr()?;
            self.expect(":")?;
            let value = self.expr()?;
            entries.push(MapEntry {
                key,
                value,
                optional,
            });
            if !self.eat(",") {
                break;
            }
        }
        self.expect("}")?;
        Ok(Expr::new(pos, ExprKind::Map { entries }))
    }

    fn struct_body(&mut self, pos: Pos, name: Arc<str>) -> PResult<Expr> {
        let mut fields = Vec::new();
        while !self.is_punct("}") {
            let optional = self.eat("?");
            let field = self.field_name()?;
            self.expect(":")?;
            let value = self.expr()?;
            fields.push((field, value, optional));
            if !self.eat(",") {
                break;
            }
        }
        self.expect("}")?;
        Ok(Expr::new(pos, ExprKind::Struct { name, fields }))
    }

    /// Expands macros; everything else stays a call (at `pos`, its name or
    /// the dot before it). cel-go places a macro's expansion at the call's
    /// parenthesis, `paren`.
    fn expand_call(
        &mut self,
        pos: Pos,
        paren: Pos,
        name: &str,
        target: Option<Expr>,
        args: Vec<Expr>,
    ) -> PResult<Expr> {
        let n = args.len();
        let call_pos = pos;
        let pos = paren;
        match (target, name, n) {
            (None, "has", 1) => self.expand_has(pos, args),
            (Some(t), "bind", 3) if is_ident(&t, "cel") => self.expand_bind(pos, args),
            (Some(t), "all", 2) => self.fold(pos, t, args, Fold::All),
            (Some(t), "exists", 2) => self.fold(pos, t, args, Fold::Exists),
            (Some(t), "exists_one" | "existsOne", 2) => self.fold(pos, t, args, Fold::ExistsOne),
            (Some(t), "map", 2) => self.fold(pos, t, args, Fold::Map),
            (Some(t), "map", 3) => self.fold(pos, t, args, Fold::MapFilter),
            (Some(t), "filter", 2) => self.fold(pos, t, args, Fold::Filter),
            (Some(t), "all", 3) => self.fold2(pos, t, args, Fold::All),
            (Some(t), "exists", 3) => self.fold2(pos, t, args, Fold::Exists),
            (Some(t), "existsOne", 3) => self.fold2(pos, t, args, Fold::ExistsOne),
            (Some(t), "transformList", 3) => self.fold2(pos, t, args, Fold::Map),
            (Some(t), "transformList", 4) => self.fold2(pos, t, args, Fold::MapFilter),
            (Some(t), "transformMap", 3) => self.fold2(pos, t, args, Fold::MapInsert),
            (Some(t), "transformMap", 4) => self.fold2(pos, t, args, Fold::MapInsertFilter),
            (Some(t), "transformMapEntry", 3) => self.fold2(pos, t, args, Fold::MapMerge),
            (Some(t), "transformMapEntry", 4) => self.fold2(pos, t, args, Fold::MapMergeFilter),
            (Some(t), "optMap", 2) => self.expand_opt_map(pos, t, args, false),
            (Some(t), "optFlatMap", 2) => self.expand_opt_map(pos, t, args, true),
            (Some(t), "sortBy", 2) => self.expand_sort_by(pos, t, args),
            (target, _, _) => Ok(call(call_pos, name, target, args)),
        }
    }

    fn expand_has(&self, pos: Pos, mut args: Vec<Expr>) -> PResult<Expr> {
        let arg = args.remove(0);
        match arg.kind {
            ExprKind::Select {
                operand,
                field,
                optional: false,
            } => Ok(Expr::new(pos, ExprKind::Has { operand, field })),
            _ => Err(self.err(arg.pos, "invalid argument to has() macro")),
        }
    }

    fn var_name(&self, e: &Expr) -> PResult<Arc<str>> {
        match &e.kind {
            ExprKind::Ident(n) if !n.starts_with('.') => Ok(n.clone()),
            _ => Err(self.err(e.pos, "argument must be a simple name")),
        }
    }

    fn expand_bind(&self, pos: Pos, mut args: Vec<Expr>) -> PResult<Expr> {
        let body = args.pop().expect("three args");
        let init = args.pop().expect("three args");
        let name = self.var_name(&args[0])?;
        Ok(Expr::new(
            pos,
            ExprKind::Bind {
                name,
                init: Box::new(init),
                body: Box::new(body),
                from_macro: false,
            },
        ))
    }

    fn fold(&self, pos: Pos, range: Expr, mut args: Vec<Expr>, kind: Fold) -> PResult<Expr> {
        let var = self.var_name(&args[0])?;
        args.remove(0);
        self.comprehension(pos, range, var, None, args, kind)
    }

    fn fold2(&self, pos: Pos, range: Expr, mut args: Vec<Expr>, kind: Fold) -> PResult<Expr> {
        let v1 = self.var_name(&args[0])?;
        let v2 = self.var_name(&args[1])?;
        if v1 == v2 {
            return Err(self.err(args[1].pos, format!("duplicate variable name: {v1}")));
        }
        args.drain(..2);
        self.comprehension(pos, range, v1, Some(v2), args, kind)
    }

    fn comprehension(
        &self,
        pos: Pos,
        range: Expr,
        iter_var: Arc<str>,
        iter_var2: Option<Arc<str>>,
        mut args: Vec<Expr>,
        kind: Fold,
    ) -> PResult<Expr> {
        if &*iter_var == ACCU || iter_var2.as_deref() == Some(ACCU) {
            return Err(self.err(pos, "iteration variable overwrites accumulator variable"));
        }
        let accu = || ident(pos, ACCU);
        let b = |v: bool| lit(pos, Literal::Bool(v));
        let last = args.pop().expect("macro has arguments");
        let filter = args.pop();
        let item = iter_var2.clone().unwrap_or_else(|| iter_var.clone());
        let guarded = |step: Expr, filter: Option<Expr>| match filter {
            Some(f) => Expr::new(
                pos,
                ExprKind::Conditional(Box::new(f), Box::new(step), Box::new(accu())),
            ),
            None => step,
        };
        let (init, cond, step, result) = match kind {
            Fold::All => (
                b(true),
                call(pos, "@not_strictly_false", None, vec![accu()]),
                Expr::new(pos, ExprKind::And(Box::new(accu()), Box::new(last))),
                accu(),
            ),
            Fold::Exists => (
                b(false),
                call(
                    pos,
                    "@not_strictly_false",
                    None,
                    vec![call(pos, "!_", None, vec![accu()])],
                ),
                Expr::new(pos, ExprKind::Or(Box::new(accu()), Box::new(last))),
                accu(),
            ),
            Fold::ExistsOne => (
                lit(pos, Literal::Int(0)),
                b(true),
                guarded(
                    call(pos, "_+_", None, vec![accu(), lit(pos, Literal::Int(1))]),
                    Some(last),
                ),
                call(pos, "_==_", None, vec![accu(), lit(pos, Literal::Int(1))]),
            ),
            Fold::Map | Fold::MapFilter => (
                empty_list(pos),
                b(true),
                guarded(call(pos, "@append", None, vec![accu(), last]), filter),
                accu(),
            ),
            Fold::Filter => (
                empty_list(pos),
                b(true),
                guarded(
                    call(pos, "@append", None, vec![accu(), ident(pos, &item)]),
                    Some(last),
                ),
                accu(),
            ),
            Fold::MapInsert | Fold::MapInsertFilter => (
                empty_map(pos),
                b(true),
                guarded(
                    call(
                        pos,
                        "@mapInsert",
                        None,
                        vec![accu(), ident(pos, &iter_var), last],
                    ),
                    filter,
                ),
                accu(),
            ),
            Fold::MapMerge | Fold::MapMergeFilter => (
                empty_map(pos),
                b(true),
                guarded(call(pos, "@mapMerge", None, vec![accu(), last]), filter),
                accu(),
            ),
        };
        Ok(Expr::new(
            pos,
            ExprKind::Comprehension(Box::new(Comprehension {
                iter_var,
                iter_var2,
                range,
                accu_var: ACCU.into(),
                accu_init: init,
                loop_cond: cond,
                loop_step: step,
                result,
            })),
        ))
    }

    /// `o.optMap(v, f)` is `o.hasValue() ? optional.of(cel.bind(v, o.value(), f)) : optional.none()`;
    /// optFlatMap leaves out the `optional.of`.
    fn expand_opt_map(
        &self,
        pos: Pos,
        target: Expr,
        mut args: Vec<Expr>,
        flat: bool,
    ) -> PResult<Expr> {
        let var = self.var_name(&args[0])?;
        let body = args.pop().expect("two args");
        let tmp: Arc<str> = "@optional".into();
        let value = call(pos, "value", Some(ident(pos, &tmp)), vec![]);
        let bound = Expr::new(
            pos,
            ExprKind::Bind {
                name: var,
                init: Box::new(value),
                body: Box::new(body),
                from_macro: true,
            },
        );
        let then = if flat {
            bound
        } else {
            call(pos, "optional.of", None, vec![bound])
        };
        let cond = call(pos, "hasValue", Some(ident(pos, &tmp)), vec![]);
        let none = call(pos, "optional.none", None, vec![]);
        let body = Expr::new(
            pos,
            ExprKind::Conditional(Box::new(cond), Box::new(then), Box::new(none)),
        );
        Ok(Expr::new(
            pos,
            ExprKind::Bind {
                name: tmp,
                init: Box::new(target),
                body: Box::new(body),
                from_macro: true,
            },
        ))
    }

    /// `l.sortBy(e, key)` sorts `l` by the keys `l.map(e, key)`.
    fn expand_sort_by(&self, pos: Pos, target: Expr, args: Vec<Expr>) -> PResult<Expr> {
        // cel-go's lists extension refuses a target that is a literal
        // other than a list (in parentheses or not) when it expands.
        if matches!(
            target.kind,
            ExprKind::Literal(_) | ExprKind::Map { .. } | ExprKind::Struct { .. }
        ) {
            return Err(self.err(
                target.pos,
                "sortBy can only be applied to a list, identifier, comprehension, call or select expression",
            ));
        }
        let tmp: Arc<str> = "@sortBy".into();
        let keys = self.fold(pos, ident(pos, &tmp), args, Fold::Map)?;
        let sorted = call(
            pos,
            "@sortByAssociatedKeys",
            None,
            vec![ident(pos, &tmp), keys],
        );
        Ok(Expr::new(
            pos,
            ExprKind::Bind {
                name: tmp,
                init: Box::new(target),
                body: Box::new(sorted),
                from_macro: true,
            },
        ))
    }
}

#[derive(Clone, Copy)]
enum Fold {
    All,
    Exists,
    ExistsOne,
    Map,
    MapFilter,
    Filter,
    MapInsert,
    MapInsertFilter,
    MapMerge,
    MapMergeFilter,
}

fn empty_list(pos: Pos) -> Expr {
    Expr::new(
        pos,
        ExprKind::List {
            elements: vec![],
            optional: vec![],
        },
    )
}

fn empty_map(pos: Pos) -> Expr {
    Expr::new(pos, ExprKind::Map { entries: vec![] })
}

fn is_ident(e: &Expr, name: &str) -> bool {
    matches!(&e.kind, ExprKind::Ident(n) if &**n == name)
}

/// `a.b.c` written as selects on an identifier, as a dotted name.
pub fn qualified_name(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Ident(n) => Some(n.to_string()),
        ExprKind::Select {
            operand,
            field,
            optional: false,
        } => qualified_name(operand).map(|q| format!("{q}.{field}")),
        _ => None,
    }
}
