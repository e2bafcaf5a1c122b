//! Which fields of the values that host functions return can a program read?
//!
//! The inventory keeps only those fields of each object (docs/architecture.md:
//! projection), so this analysis must never under-approximate: any use it
//! does not understand marks the whole value as read. It follows values
//! through variables, comprehensions, `cel.bind`, optionals and list
//! concatenation, which is how policies handle lookup results.
//!
//! An origin is a tag (which host call, or which seeded variable, produced
//! the value) and a field path below it; `wrapped` says the value is a list
//! or an optional whose elements sit at that path (a lookup's result),
//! rather than the value at the path itself.

use super::program::{Node, OptionalEnd, Program};
use super::value::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Identifies where analysed values come from; the caller chooses the
/// numbering (for example one tag per kind of object).
pub type Tag = usize;

/// A field path below a tag's values.
pub type Path = Vec<Arc<str>>;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Origin {
    tag: Tag,
    path: Path,
    wrapped: bool,
}

type Abs = BTreeSet<Origin>;

/// Paths beyond this depth are read whole (bounds the analysis).
const MAX_PATH: usize = 32;
/// Rounds of a comprehension's fixpoint before its accumulator is read whole.
const MAX_ROUNDS: usize = 4;

/// What the analysed programs read of tagged values.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reads {
    /// Paths selected (the field must be kept, at least as far as the
    /// deeper paths below it).
    pub accessed: BTreeSet<(Tag, Path)>,
    /// Paths whose whole value is read.
    pub whole: BTreeSet<(Tag, Path)>,
    /// Paths a comprehension ranges over: a map there is read whole (its
    /// keys), a list element by element (as the paths below it say).
    pub ranged: BTreeSet<(Tag, Path)>,
}

/// Says which host calls return tagged values: the host function id and its
/// constant string arguments (`None` where not constant).
pub type Classify<'c> = dyn Fn(usize, &[Option<String>]) -> Option<Tag> + 'c;

/// The analysis of one group of programs that share lazy variables.
pub struct Flow<'c> {
    classify: &'c Classify<'c>,
    globals: Vec<(usize, Tag)>,
    lazy: Vec<Abs>,
    stack: Vec<Abs>,
    base: usize,
    reads: Reads,
}

impl<'c> Flow<'c> {
    /// `globals` seeds variables (by slot) with the whole value of a tag,
    /// such as `object` in an index key expression.
    pub fn new(classify: &'c Classify<'c>, globals: Vec<(usize, Tag)>) -> Self {
        Flow {
            classify,
            globals,
            lazy: Vec::new(),
            stack: Vec::new(),
            base: 0,
            reads: Reads::default(),
        }
    }

    /// Analyses the lazy variables (`variables.NAME`, in declaration order).
    /// Twice, so that a reference to a later variable sees its value too.
    pub fn variables(&mut self, programs: &[Program]) {
        self.lazy = vec![Abs::new(); programs.len()];
        for _ in 0..2 {
            for (i, p) in programs.iter().enumerate() {
                let v = self.run(p);
                self.lazy[i] = v;
            }
        }
    }

    /// Analyses a program whose result leaves CEL (a validation, a message,
    /// an annotation, a patch, index keys): that result is read whole.
    pub fn result(&mut self, program: &Program) {
        let v = self.run(program);
        self.mark(&v);
    }

    pub fn finish(self) -> Reads {
        self.reads
    }

    fn run(&mut self, program: &Program) -> Abs {
        self.stack.clear();
        self.base = 0;
        self.eval(program.root())
    }

    fn mark(&mut self, v: &Abs) {
        for o in v {
            self.reads.whole.insert((o.tag, o.path.clone()));
        }
    }

    fn eval_marked(&mut self, n: &Node) {
        let v = self.eval(n);
        self.mark(&v);
    }

    fn eval(&mut self, n: &Node) -> Abs {
        match n {
            Node::Const(_) | Node::Error(_) => Abs::new(),
            Node::Global(slot) => self
                .globals
                .iter()
                .filter(|(s, _)| s == slot)
                .map(|&(_, tag)| Origin {
                    tag,
                    path: Vec::new(),
                    wrapped: false,
                })
                .collect(),
            Node::Local(slot) => self
                .stack
                .get(self.base + slot)
                .cloned()
                .unwrap_or_default(),
            Node::Lazy(i, _) => self.lazy.get(*i).cloned().unwrap_or_default(),
            Node::Select {
                operand,
                field,
                optional,
            } => {
                let v = self.eval(operand);
                self.select(v, field, *optional)
            }
            Node::Has { operand, field } => {
                let v = self.eval(operand);
                self.select(v, field, false);
                Abs::new()
            }
            Node::Index {
                operand,
                index,
                optional,
            } => self.index(operand, index, *optional),
            Node::Call { decl, args }
            | Node::Guarded { decl, args, .. }
            | Node::Prepared { decl, args, .. } => self.call(decl.name, args),
            Node::Host(id, args) => {
                let consts: Vec<Option<String>> = args
                    .iter()
                    .map(|a| match a {
                        Node::Const(Value::String(s)) => Some(s.as_str().to_string()),
                        _ => None,
                    })
                    .collect();
                args.iter().for_each(|a| self.eval_marked(a));
                (self.classify)(*id, &consts)
                    .map(|tag| Origin {
                        tag,
                        path: Vec::new(),
                        wrapped: true,
                    })
                    .into_iter()
                    .collect()
            }
            // As the selects and the call it stands for: `hasValue` of an
            // optional reads nothing; `orValue` unwraps it.
            Node::OptionalSelects {
                operand,
                fields,
                end,
            } => {
                let mut v = self.eval(operand);
                for field in fields.iter() {
                    v = self.select(v, field, true);
                }
                match end {
                    OptionalEnd::HasValue => Abs::new(),
                    OptionalEnd::OrValue(default) => {
                        let mut out: Abs = v
                            .into_iter()
                            .map(|o| Origin {
                                wrapped: false,
                                ..o
                            })
                            .collect();
                        out.extend(self.eval(default));
                        out
                    }
                }
            }
            Node::List(items) => {
                let mut out = Abs::new();
                for (item, optional) in items {
                    let v = self.eval(item);
                    for o in v {
                        // `[?x]` holds x's value; a list of lists is read whole.
                        if o.wrapped && !*optional {
                            self.mark(&BTreeSet::from([o.clone()]));
                        }
                        out.insert(Origin { wrapped: true, ..o });
                    }
                }
                out
            }
            Node::Map(items, _) => {
                for (k, v, _) in items {
                    self.eval_marked(k);
                    self.eval_marked(v);
                }
                Abs::new()
            }
            Node::Struct(fields) => {
                fields.iter().for_each(|(_, v, _)| self.eval_marked(v));
                Abs::new()
            }
            Node::And(a, b) | Node::Or(a, b) => {
                self.eval_marked(a);
                self.eval_marked(b);
                Abs::new()
            }
            Node::NotStrictlyFalse(a) => {
                self.eval_marked(a);
                Abs::new()
            }
            Node::Conditional(c, t, f) => {
                self.eval_marked(c);
                let mut v = self.eval(t);
                v.extend(self.eval(f));
                v
            }
            Node::Comprehension(c) => self.comprehension(c),
            Node::Bind(init, body) => {
                let v = self.eval(init);
                self.stack.push(v);
                let r = self.eval(body);
                self.stack.pop();
                r
            }
            Node::AccuAppend(slot, e) => {
                let mut v = self.local(*slot);
                for o in self.eval(e) {
                    if o.wrapped {
                        self.mark(&BTreeSet::from([o.clone()]));
                    }
                    v.insert(Origin { wrapped: true, ..o });
                }
                v
            }
            Node::AccuInsert(slot, k, e) => {
                self.eval_marked(k);
                self.eval_marked(e);
                self.local(*slot)
            }
            Node::AccuMerge(slot, e) => {
                self.eval_marked(e);
                self.local(*slot)
            }
        }
    }

    fn local(&self, slot: usize) -> Abs {
        self.stack
            .get(self.base + slot)
            .cloned()
            .unwrap_or_default()
    }

    fn select(&mut self, v: Abs, field: &Arc<str>, optional: bool) -> Abs {
        let mut out = Abs::new();
        for o in v {
            if o.path.len() >= MAX_PATH {
                self.reads.whole.insert((o.tag, o.path.clone()));
                out.insert(o);
                continue;
            }
            let mut path = o.path;
            path.push(field.clone());
            self.reads.accessed.insert((o.tag, path.clone()));
            out.insert(Origin {
                tag: o.tag,
                path,
                wrapped: o.wrapped || optional,
            });
        }
        out
    }

    fn index(&mut self, operand: &Node, index: &Node, optional: bool) -> Abs {
        let v = self.eval(operand);
        match index {
            Node::Const(Value::String(s)) => {
                let field: Arc<str> = s.as_str().into();
                self.select(v, &field, optional)
            }
            // A list element sits at its list's path.
            Node::Const(Value::Int(_) | Value::Uint(_)) => v
                .into_iter()
                .map(|o| Origin {
                    wrapped: optional,
                    ..o
                })
                .collect(),
            _ => {
                self.eval_marked(index);
                self.mark(&v);
                v
            }
        }
    }

    fn call(&mut self, name: &str, args: &[Node]) -> Abs {
        let vals: Vec<Abs> = args.iter().map(|a| self.eval(a)).collect();
        let unwrap = |v: &Abs| -> Abs {
            v.iter()
                .map(|o| Origin {
                    wrapped: false,
                    ..o.clone()
                })
                .collect()
        };
        match (name, vals.as_slice()) {
            // Whether an optional or a lookup result is empty needs no field.
            ("hasValue", [v]) if v.iter().all(|o| o.wrapped) => Abs::new(),
            ("size", [v]) if v.iter().all(|o| o.wrapped) => Abs::new(),
            ("value", [v]) => unwrap(v),
            ("orValue", [v, d]) => {
                let mut out = unwrap(v);
                out.extend(d.iter().cloned());
                out
            }
            ("or" | "dyn", _) => vals.into_iter().flatten().collect(),
            ("optional.of", [v]) => {
                let out: Abs = v
                    .iter()
                    .map(|o| Origin {
                        wrapped: true,
                        ..o.clone()
                    })
                    .collect();
                self.mark(&v.iter().filter(|o| o.wrapped).cloned().collect());
                out
            }
            // Concatenating lists keeps their elements as they are.
            ("_+_", _) => {
                let all: Abs = vals.into_iter().flatten().collect();
                self.mark(&all.iter().filter(|o| !o.wrapped).cloned().collect());
                all
            }
            ("first" | "last", [v]) if v.iter().all(|o| o.wrapped) => v.clone(),
            ("@sortByAssociatedKeys", [v, keys]) if v.iter().all(|o| o.wrapped) => {
                self.mark(keys);
                v.clone()
            }
            _ => {
                // Not understood: every argument is read whole, and the
                // result may hold any of them.
                let all: Abs = vals.into_iter().flatten().collect();
                self.mark(&all);
                all
            }
        }
    }

    fn comprehension(&mut self, c: &super::program::Comprehension) -> Abs {
        let range = self.eval(&c.range);
        let mut element = Abs::new();
        for o in &range {
            if !o.wrapped {
                self.reads.ranged.insert((o.tag, o.path.clone()));
            }
            element.insert(Origin {
                wrapped: false,
                ..o.clone()
            });
        }
        let (first, second) = if c.two_vars {
            (Abs::new(), element)
        } else {
            (element, Abs::new())
        };
        let mut accu = self.eval(&c.accu_init);
        let accu_slot = self.stack.len();
        let mut converged = false;
        for _ in 0..MAX_ROUNDS {
            self.stack.truncate(accu_slot);
            self.stack.push(accu.clone());
            self.stack.push(first.clone());
            if c.two_vars {
                self.stack.push(second.clone());
            }
            self.eval_marked(&c.cond);
            let next = self.eval(&c.step);
            let before = accu.len();
            accu.extend(next);
            if accu.len() == before {
                converged = true;
                break;
            }
        }
        if !converged {
            self.mark(&accu);
        }
        self.stack.truncate(accu_slot);
        self.stack.push(accu);
        let r = self.eval(&c.result);
        self.stack.truncate(accu_slot);
        r
    }
}

#[cfg(test)]
#[path = "flow_tests.rs"]
mod tests;
