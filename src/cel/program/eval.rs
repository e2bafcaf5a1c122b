//! The evaluator: one walk of a program's nodes per activation.

use super::*;

/// Per-evaluation state: the local variable stack and the cost meter.
pub struct Ctx<'a, 'e> {
    pub(super) act: &'e Activation<'a, 'e>,
    /// Inline for the first few locals: most programs need no allocation.
    pub(super) stack: SmallVec<[EvalResult<Value<'a>>; 8]>,
    pub(super) base: usize,
    pub(super) cost: u64,
    /// Set by the first charge that failed for a budget or the interrupt.
    pub(super) halted: Option<Halt>,
}

pub(super) type Args<'a> = SmallVec<[Value<'a>; 4]>;

impl<'a, 'e> Ctx<'a, 'e> {
    pub(super) fn new(act: &'e Activation<'a, 'e>) -> Self {
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
    pub(super) fn key(&mut self, v: &Value<'a>) -> EvalResult<Key<'a>> {
        Key::from_value(v).map_err(|u| self.panic(u))
    }

    pub(super) fn halt(&mut self, halt: Halt) -> EvalError {
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
                    return crate::cel::functions::no_overload(decl.name, &vals);
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
    pub(super) fn optional_selects(
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
    pub(super) fn optional_or(&mut self, decl: &FnDecl, args: &[Node]) -> EvalResult<Value<'a>> {
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
    pub(super) fn eval_tracked_args(&mut self, args: &[Node], k: usize) -> EvalResult<Args<'a>> {
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
    pub(super) fn eval_args(&mut self, args: &[Node]) -> EvalResult<Args<'a>> {
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

    pub(super) fn lazy(&mut self, i: usize, name: &str) -> EvalResult<Value<'a>> {
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

    pub(super) fn and(&mut self, a: &Node, b: &Node) -> EvalResult<Value<'a>> {
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

    pub(super) fn or(&mut self, a: &Node, b: &Node) -> EvalResult<Value<'a>> {
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

    pub(super) fn list(&mut self, items: &[(Node, bool)]) -> EvalResult<Value<'a>> {
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
    pub(super) fn map(
        &mut self,
        items: &[(Node, Node, bool)],
        spec: bool,
    ) -> EvalResult<Value<'a>> {
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

    pub(super) fn structure(
        &mut self,
        fields: &[(Str<'static>, Node, bool)],
    ) -> EvalResult<Value<'a>> {
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

    pub(super) fn comprehension(&mut self, c: &Comprehension) -> EvalResult<Value<'a>> {
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

    pub(super) fn iterate(
        &mut self,
        c: &Comprehension,
        range: Value<'a>,
        accu_slot: usize,
    ) -> EvalResult<()> {
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

    pub(super) fn iterate_list(
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
    pub(super) fn step(&mut self, c: &Comprehension, accu_slot: usize) -> EvalResult<bool> {
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

    pub(super) fn take_accu(&mut self, slot: usize) -> EvalResult<Value<'a>> {
        std::mem::replace(&mut self.stack[self.base + slot], Ok(Value::Null))
    }

    pub(super) fn accu_append(&mut self, slot: usize, e: &Node) -> EvalResult<Value<'a>> {
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

    pub(super) fn accu_insert(&mut self, slot: usize, k: &Node, v: &Node) -> EvalResult<Value<'a>> {
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

    pub(super) fn accu_merge(&mut self, slot: usize, e: &Node) -> EvalResult<Value<'a>> {
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
    pub(super) fn owned_accu_map(&mut self, slot: usize) -> EvalResult<Arc<OwnedMap<'a>>> {
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
