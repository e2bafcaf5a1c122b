//! A generator of CEL expressions over the ValidatingAdmissionPolicy
//! environment of kube-apiserver, for the differential fuzzer
//! (tests/integration/cel_fuzz_differential.rs).
//!
//! Deterministic from a seed ([`Gen::new`]) and size-bounded (a depth
//! limit). It aims at a type and mostly hits it, so most expressions are
//! well-typed; at a small rate per node it puts an expression of another
//! type in that place, which makes ill-typed expressions whose refusal
//! kube-apiserver and Interlock must word the same way. The leaves read the
//! fuzzer's fixed objects ([`OBJECT_DATA`], [`PARAMS_DATA`]) through
//! `object`, `oldObject`, `params`, `request` and `namespaceObject`, only at
//! paths whose values do not depend on the cluster (no `uid`,
//! `creationTimestamp`, `request.dryRun`).

use super::rng::Rng;

/// `data` of every ConfigMap the fuzzer sends.
pub const OBJECT_DATA: &[(&str, &str)] = &[
    ("a", "1"),
    ("b", "two"),
    ("c", "10.0.0.1"),
    ("d", "1.5Gi"),
    ("e", ""),
    ("f", "https://example.com:8080/p?q=1"),
    ("g", "v1.2.3"),
    ("h", "a,b,c"),
];

/// `metadata.labels` of every ConfigMap the fuzzer sends.
pub const OBJECT_LABELS: &[(&str, &str)] = &[("app", "web"), ("tier", "a1")];

/// `data` of the params ConfigMap.
pub const PARAMS_DATA: &[(&str, &str)] = &[("p1", "x"), ("p2", "2"), ("p3", "a,b")];

/// The CEL types the generator aims at.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    Bool,
    Int,
    Uint,
    Double,
    Str,
    Bytes,
    Null,
    Duration,
    Timestamp,
    List(Box<Ty>),
    /// A map with string keys.
    Map(Box<Ty>),
    Dyn,
    Quantity,
    Ip,
    Cidr,
    Url,
    Semver,
    Opt(Box<Ty>),
    Type,
}

/// Per-node chance (percent) of an expression of another type than asked.
const ILL_TYPED_PERCENT: usize = 4;

pub struct Gen {
    rng: Rng,
    /// Comprehension variables in scope.
    vars: Vec<(String, Ty)>,
    fresh: usize,
}

impl Gen {
    pub fn new(seed: u64) -> Gen {
        // xorshift never leaves 0; mix the seed so near seeds differ at once.
        let mixed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        Gen {
            rng: Rng(mixed),
            vars: Vec::new(),
            fresh: 0,
        }
    }

    /// One expression, mostly a `bool` one (a validation); one in ten aims
    /// at another type, which kube-apiserver refuses as a validation.
    pub fn expression(&mut self, depth: u32) -> String {
        self.vars.clear();
        let ty = if self.chance(90) {
            Ty::Bool
        } else {
            self.any_ty(1)
        };
        self.expr(&ty, depth)
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.rng.below(100) < percent
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.rng.below(xs.len())].clone()
    }

    fn any_ty(&mut self, depth: u32) -> Ty {
        let n = if depth == 0 { 17 } else { 20 };
        match self.rng.below(n) {
            0 | 1 => Ty::Bool,
            2 | 3 => Ty::Int,
            4 => Ty::Uint,
            5 => Ty::Double,
            6 | 7 => Ty::Str,
            8 => Ty::Bytes,
            9 => Ty::Null,
            10 => Ty::Duration,
            11 => Ty::Timestamp,
            12 => Ty::Dyn,
            13 => Ty::Quantity,
            14 => Ty::Ip,
            15 => Ty::Cidr,
            16 => self.pick(&[Ty::Url, Ty::Semver, Ty::Type]),
            17 => Ty::List(Box::new(self.any_ty(depth - 1))),
            18 => Ty::Map(Box::new(self.any_ty(depth - 1))),
            _ => Ty::Opt(Box::new(self.any_ty(depth - 1))),
        }
    }

    /// An expression of type `ty`, or now and then of another type.
    pub fn expr(&mut self, ty: &Ty, depth: u32) -> String {
        if self.chance(ILL_TYPED_PERCENT) {
            let other = self.any_ty(1);
            return self.typed(&other, depth);
        }
        self.typed(ty, depth)
    }

    fn typed(&mut self, ty: &Ty, depth: u32) -> String {
        if depth == 0 || self.chance(25) {
            return self.leaf(ty);
        }
        let d = depth - 1;
        match ty {
            Ty::Bool => self.bool_expr(d),
            Ty::Int => self.int_expr(d),
            Ty::Uint => self.uint_expr(d),
            Ty::Double => self.double_expr(d),
            Ty::Str => self.string_expr(d),
            Ty::Bytes => self.bytes_expr(d),
            Ty::Duration => self.duration_expr(d),
            Ty::Timestamp => self.timestamp_expr(d),
            Ty::List(elem) => self.list_expr(elem, d),
            Ty::Map(value) => self.map_expr(value, d),
            Ty::Dyn => self.dyn_expr(d),
            Ty::Quantity => self.quantity_expr(d),
            Ty::Ip => match self.rng.below(2) {
                0 => format!("{}.ip()", self.expr(&Ty::Cidr, d)),
                _ => format!("ip({})", self.expr(&Ty::Str, d)),
            },
            Ty::Cidr => match self.rng.below(2) {
                0 => format!("{}.masked()", self.expr(&Ty::Cidr, d)),
                _ => format!("cidr({})", self.expr(&Ty::Str, d)),
            },
            Ty::Url => format!("url({})", self.expr(&Ty::Str, d)),
            Ty::Semver => self.semver_expr(d),
            Ty::Opt(inner) => self.optional_expr(inner, d),
            Ty::Type => format!("type({})", self.any(d)),
            Ty::Null => self.ternary(ty, d),
        }
    }

    /// An expression of any type.
    fn any(&mut self, depth: u32) -> String {
        let ty = self.any_ty(1);
        self.expr(&ty, depth)
    }

    fn ternary(&mut self, ty: &Ty, d: u32) -> String {
        format!(
            "({} ? {} : {})",
            self.expr(&Ty::Bool, d),
            self.expr(ty, d),
            self.expr(ty, d)
        )
    }

    fn var_of(&mut self, ty: &Ty) -> Option<String> {
        let fits: Vec<String> = self
            .vars
            .iter()
            .filter(|(_, t)| t == ty || *t == Ty::Dyn)
            .map(|(n, _)| n.clone())
            .collect();
        (!fits.is_empty()).then(|| self.pick(&fits))
    }

    /// Generates `body` with a fresh variable of type `ty` in scope.
    fn with_var(&mut self, ty: Ty, body: impl FnOnce(&mut Gen, &str) -> String) -> String {
        let name = format!("v{}", self.fresh);
        self.fresh += 1;
        self.vars.push((name.clone(), ty));
        let out = body(self, &name);
        self.vars.pop();
        out
    }

    // -- leaves ---------------------------------------------------------

    fn leaf(&mut self, ty: &Ty) -> String {
        if self.chance(30) {
            if let Some(v) = self.var_of(ty) {
                return v;
            }
        }
        match ty {
            Ty::Bool => self
                .pick(&["true", "false", "has(object.data.a)", "has(object.data.z)"])
                .into(),
            Ty::Int => self
                .pick(&[
                    "0",
                    "1",
                    "2",
                    "-1",
                    "7",
                    "42",
                    "1000",
                    "-5",
                    "9223372036854775807",
                    "-9223372036854775808",
                    "0x1F",
                ])
                .into(),
            Ty::Uint => self
                .pick(&["0u", "1u", "3u", "18446744073709551615u"])
                .into(),
            Ty::Double => self
                .pick(&["0.0", "1.5", "-2.25", "1e3", "1e308", "0.1", "-0.0"])
                .into(),
            Ty::Str => self.string_leaf(),
            Ty::Bytes => self
                .pick(&["b''", "b'abc'", "b'\\xff'", "b'\\x00a'", "b'\u{fc}'"])
                .into(),
            Ty::Null => "null".into(),
            Ty::Duration => format!(
                "duration('{}')",
                self.pick(&["1h", "1.5s", "-3m", "0s", "90m", "1h2m3s4ms", "x"])
            ),
            Ty::Timestamp => format!(
                "timestamp('{}')",
                self.pick(&[
                    "2024-01-01T00:00:00Z",
                    "2024-02-29T12:30:00+02:00",
                    "1970-01-01T00:00:00Z",
                    "2024-13-01T00:00:00Z"
                ])
            ),
            Ty::List(elem) => match self.rng.below(3) {
                0 => "[]".into(),
                _ => format!("[{}, {}]", self.leaf(elem), self.leaf(elem)),
            },
            Ty::Map(value) => match self.rng.below(3) {
                0 => "{}".into(),
                _ => format!("{{'a': {}, 'b': {}}}", self.leaf(value), self.leaf(value)),
            },
            Ty::Dyn => self.dyn_leaf(),
            Ty::Quantity => format!(
                "quantity('{}')",
                self.pick(&["1Gi", "500m", "2", "1.5", "100Mi", "1e3", "x", "-1"])
            ),
            Ty::Ip => format!(
                "ip('{}')",
                self.pick(&[
                    "10.0.0.1",
                    "::1",
                    "127.0.0.1",
                    "fe80::1",
                    "0.0.0.0",
                    "192.168.0.256",
                    "::ffff:1.2.3.4"
                ])
            ),
            Ty::Cidr => format!(
                "cidr('{}')",
                self.pick(&[
                    "10.0.0.0/8",
                    "2001:db8::/32",
                    "192.168.1.5/24",
                    "10.0.0.1/33",
                    "::/0"
                ])
            ),
            Ty::Url => format!(
                "url('{}')",
                self.pick(&[
                    "https://user@example.com:8080/a%20b?x=1&x=2#f",
                    "/path",
                    "example.com",
                    "http://[::1]:80/",
                    "ftp://h/p?q"
                ])
            ),
            Ty::Semver => self
                .pick(&[
                    "semver('1.2.3')",
                    "semver('1.2.3-alpha+b1')",
                    "semver('v1.0')",
                    "semver('1.0', true)",
                    "semver('01.2.3')",
                ])
                .into(),
            Ty::Opt(inner) => match self.rng.below(3) {
                0 => "optional.none()".into(),
                1 => format!("optional.of({})", self.leaf(inner)),
                _ => format!("optional.ofNonZeroValue({})", self.leaf(inner)),
            },
            Ty::Type => self
                .pick(&[
                    "int",
                    "string",
                    "bool",
                    "list",
                    "map",
                    "null_type",
                    "type",
                    "double",
                    "uint",
                    "bytes",
                ])
                .into(),
        }
    }

    fn string_leaf(&mut self) -> String {
        self.pick(&[
            "''",
            "'a'",
            "'abc'",
            "'a,b,c'",
            "'Hello World'",
            "'10.0.0.1'",
            "'10.0.0.0/8'",
            "'1.5Gi'",
            "'v1.2.3'",
            "'1.2.3'",
            "'\u{fc}\u{2713}x'",
            "\"q'\"",
            "r'\\d+'",
            "'[a-z]+'",
            "'%s-%d'",
            "'%v'",
            "'https://example.com:8080/p?q=1'",
            "'  pad  '",
            "'\\n'",
            "object.metadata.name",
            "object.metadata.namespace",
            "request.operation",
            "request.userInfo.username",
        ])
        .into()
    }

    fn dyn_leaf(&mut self) -> String {
        let key = self.pick(&["a", "b", "c", "d", "e", "f", "g", "h", "z"]);
        match self.rng.below(14) {
            0..=3 => format!("object.data.{key}"),
            4 => format!("object.data['{key}']"),
            5 => "object.data".into(),
            6 => format!(
                "object.metadata.labels.{}",
                self.pick(&["app", "tier", "missing"])
            ),
            7 => "object.metadata.labels".into(),
            8 => "oldObject".into(),
            9 => format!("params.data.{}", self.pick(&["p1", "p2", "p3", "p9"])),
            10 => "object.kind".into(),
            11 => "namespaceObject.metadata.name".into(),
            12 => "object".into(),
            _ => self
                .pick(&[
                    "request.namespace",
                    "request.name",
                    "request.kind.kind",
                    "request.resource.resource",
                ])
                .into(),
        }
    }

    // -- compound expressions, by type ---------------------------------

    fn bool_expr(&mut self, d: u32) -> String {
        match self.rng.below(22) {
            0 | 1 => {
                let ty = self.any_ty(1);
                let op = self.pick(&["==", "!="]);
                format!("{} {op} {}", self.expr(&ty, d), self.expr(&ty, d))
            }
            2 | 3 => {
                let ty = self.pick(&[
                    Ty::Int,
                    Ty::Uint,
                    Ty::Double,
                    Ty::Str,
                    Ty::Bytes,
                    Ty::Duration,
                    Ty::Timestamp,
                    Ty::Bool,
                ]);
                let ty2 = if self.chance(25) {
                    self.pick(&[Ty::Int, Ty::Uint, Ty::Double])
                } else {
                    ty.clone()
                };
                let op = self.pick(&["<", "<=", ">", ">="]);
                format!("{} {op} {}", self.expr(&ty, d), self.expr(&ty2, d))
            }
            4 => format!("!{}", self.paren(&Ty::Bool, d)),
            5 | 6 => {
                let op = self.pick(&["&&", "||"]);
                format!(
                    "{} {op} {}",
                    self.paren(&Ty::Bool, d),
                    self.paren(&Ty::Bool, d)
                )
            }
            7 => self.ternary(&Ty::Bool, d),
            8 => {
                let ty = self.any_ty(0);
                let container = if self.chance(70) {
                    Ty::List(Box::new(ty.clone()))
                } else {
                    Ty::Map(Box::new(Ty::Int))
                };
                let needle = if matches!(container, Ty::Map(_)) {
                    Ty::Str
                } else {
                    ty
                };
                format!("{} in {}", self.expr(&needle, d), self.expr(&container, d))
            }
            9 => {
                let f = self.pick(&["startsWith", "endsWith", "contains", "matches"]);
                format!("{}.{f}({})", self.recv(&Ty::Str, d), self.expr(&Ty::Str, d))
            }
            10 | 11 => self.macro_bool(d),
            12 => {
                let ty = self.pick(&[
                    Ty::Str,
                    Ty::List(Box::new(Ty::Int)),
                    Ty::Map(Box::new(Ty::Str)),
                    Ty::Bytes,
                    Ty::Dyn,
                ]);
                format!(
                    "size({}) {} {}",
                    self.expr(&ty, d),
                    self.pick(&["==", ">", "<"]),
                    self.expr(&Ty::Int, d)
                )
            }
            13 => {
                let f = self.pick(&["isQuantity", "isIP", "isCIDR", "isURL", "isSemver"]);
                format!("{f}({})", self.expr(&Ty::Str, d))
            }
            14 => match self.rng.below(3) {
                0 => format!("{}.isInteger()", self.recv(&Ty::Quantity, d)),
                _ => {
                    let f = self.pick(&["isGreaterThan", "isLessThan"]);
                    format!(
                        "{}.{f}({})",
                        self.recv(&Ty::Quantity, d),
                        self.expr(&Ty::Quantity, d)
                    )
                }
            },
            15 => {
                let f = self.pick(&[
                    "isLoopback",
                    "isUnspecified",
                    "isGlobalUnicast",
                    "isLinkLocalMulticast",
                    "isLinkLocalUnicast",
                    "isCanonical",
                ]);
                if f == "isCanonical" {
                    format!("ip.isCanonical({})", self.expr(&Ty::Str, d))
                } else {
                    format!("{}.{f}()", self.recv(&Ty::Ip, d))
                }
            }
            16 => match self.rng.below(3) {
                0 => format!(
                    "{}.containsIP({})",
                    self.recv(&Ty::Cidr, d),
                    self.expr(&Ty::Ip, d)
                ),
                1 => format!(
                    "{}.containsIP({})",
                    self.recv(&Ty::Cidr, d),
                    self.expr(&Ty::Str, d)
                ),
                _ => format!(
                    "{}.containsCIDR({})",
                    self.recv(&Ty::Cidr, d),
                    self.expr(&Ty::Cidr, d)
                ),
            },
            17 => {
                let f = self.pick(&["isGreaterThan", "isLessThan"]);
                format!(
                    "{}.{f}({})",
                    self.recv(&Ty::Semver, d),
                    self.expr(&Ty::Semver, d)
                )
            }
            18 => {
                let ty = self.pick(&[Ty::Int, Ty::Str, Ty::Double]);
                format!("{}.isSorted()", self.recv(&Ty::List(Box::new(ty)), d))
            }
            19 => {
                let inner = self.any_ty(0);
                format!("{}.hasValue()", self.recv(&Ty::Opt(Box::new(inner)), d))
            }
            20 => {
                let f = self.pick(&["contains", "equivalent", "intersects"]);
                let l = Ty::List(Box::new(self.any_ty(0)));
                format!("sets.{f}({}, {})", self.expr(&l, d), self.expr(&l, d))
            }
            _ => {
                let f = self.pick(&[
                    "dns1123Label",
                    "dns1123Subdomain",
                    "labelValue",
                    "qualifiedName",
                    "uri",
                    "uuid",
                    "date",
                    "byte",
                ]);
                format!(
                    "format.{f}().validate({}).hasValue()",
                    self.expr(&Ty::Str, d)
                )
            }
        }
    }

    /// `all`, `exists`, `exists_one` over a list or a map, one or two
    /// variables.
    fn macro_bool(&mut self, d: u32) -> String {
        let m = self.pick(&["all", "exists", "exists_one"]);
        let (range, var_ty) = self.range(d);
        if self.chance(20) && m != "exists_one" {
            let range_text = range;
            return self.with_var(Ty::Dyn, |g, k| {
                g.with_var(var_ty, |g, v| {
                    format!("{range_text}.{m}({k}, {v}, {})", g.expr(&Ty::Bool, d))
                })
            });
        }
        self.with_var(var_ty, |g, x| {
            format!("{range}.{m}({x}, {})", g.expr(&Ty::Bool, d))
        })
    }

    /// Something to iterate and the type of its variable.
    fn range(&mut self, d: u32) -> (String, Ty) {
        match self.rng.below(5) {
            0 => ("object.data".into(), Ty::Dyn),
            1 => ("object.metadata.labels".into(), Ty::Dyn),
            2 => {
                let ty = self.any_ty(0);
                (self.recv(&Ty::Map(Box::new(ty)), d), Ty::Str)
            }
            _ => {
                let ty = self.any_ty(0);
                (self.recv(&Ty::List(Box::new(ty.clone())), d), ty)
            }
        }
    }

    fn int_expr(&mut self, d: u32) -> String {
        match self.rng.below(18) {
            0..=2 => {
                let op = self.pick(&["+", "-", "*", "/", "%"]);
                format!(
                    "{} {op} {}",
                    self.paren(&Ty::Int, d),
                    self.paren(&Ty::Int, d)
                )
            }
            3 => format!("-{}", self.paren(&Ty::Int, d)),
            4 => {
                let ty = self.pick(&[
                    Ty::Str,
                    Ty::List(Box::new(Ty::Int)),
                    Ty::Map(Box::new(Ty::Str)),
                    Ty::Bytes,
                    Ty::Dyn,
                ]);
                if self.chance(50) {
                    format!("size({})", self.expr(&ty, d))
                } else {
                    format!("{}.size()", self.recv(&ty, d))
                }
            }
            5 => {
                let ty = self.pick(&[
                    Ty::Uint,
                    Ty::Double,
                    Ty::Str,
                    Ty::Timestamp,
                    Ty::Dyn,
                    Ty::Int,
                ]);
                format!("int({})", self.expr(&ty, d))
            }
            6 => {
                let f = self.pick(&["indexOf", "lastIndexOf"]);
                format!("{}.{f}({})", self.recv(&Ty::Str, d), self.expr(&Ty::Str, d))
            }
            7 => {
                let f = self.pick(&["sum", "min", "max"]);
                format!("{}.{f}()", self.recv(&Ty::List(Box::new(Ty::Int)), d))
            }
            8 => format!(
                "{}.indexOf({})",
                self.recv(&Ty::List(Box::new(Ty::Int)), d),
                self.expr(&Ty::Int, d)
            ),
            9 => match self.rng.below(2) {
                0 => format!("{}.asInteger()", self.recv(&Ty::Quantity, d)),
                _ => format!(
                    "{}.compareTo({})",
                    self.recv(&Ty::Quantity, d),
                    self.expr(&Ty::Quantity, d)
                ),
            },
            10 => {
                let f = self.pick(&["major", "minor", "patch"]);
                format!("{}.{f}()", self.recv(&Ty::Semver, d))
            }
            11 => match self.rng.below(2) {
                0 => format!("{}.family()", self.recv(&Ty::Ip, d)),
                _ => format!("{}.prefixLength()", self.recv(&Ty::Cidr, d)),
            },
            12 => {
                let f = self.pick(&["getHours", "getMinutes", "getSeconds", "getMilliseconds"]);
                format!("{}.{f}()", self.recv(&Ty::Duration, d))
            }
            13 => {
                let f = self.pick(&[
                    "getFullYear",
                    "getMonth",
                    "getDayOfMonth",
                    "getDayOfYear",
                    "getDayOfWeek",
                    "getHours",
                ]);
                let tz = if self.chance(30) {
                    self.pick(&["'UTC'", "'America/New_York'", "'+05:30'", "'Nowhere/X'"])
                } else {
                    ""
                };
                format!("{}.{f}({tz})", self.recv(&Ty::Timestamp, d))
            }
            14 => format!(
                "{}[{}]",
                self.recv(&Ty::List(Box::new(Ty::Int)), d),
                self.expr(&Ty::Int, d)
            ),
            15 => format!("{}['a']", self.recv(&Ty::Map(Box::new(Ty::Int)), d)),
            16 => format!(
                "{}.compareTo({})",
                self.recv(&Ty::Semver, d),
                self.expr(&Ty::Semver, d)
            ),
            _ => self.ternary(&Ty::Int, d),
        }
    }

    fn uint_expr(&mut self, d: u32) -> String {
        match self.rng.below(3) {
            0 => {
                let op = self.pick(&["+", "-", "*", "/", "%"]);
                format!(
                    "{} {op} {}",
                    self.paren(&Ty::Uint, d),
                    self.paren(&Ty::Uint, d)
                )
            }
            1 => {
                let ty = self.pick(&[Ty::Int, Ty::Double, Ty::Str, Ty::Dyn]);
                format!("uint({})", self.expr(&ty, d))
            }
            _ => self.ternary(&Ty::Uint, d),
        }
    }

    fn double_expr(&mut self, d: u32) -> String {
        match self.rng.below(4) {
            0 => {
                let op = self.pick(&["+", "-", "*", "/"]);
                format!(
                    "{} {op} {}",
                    self.paren(&Ty::Double, d),
                    self.paren(&Ty::Double, d)
                )
            }
            1 => {
                let ty = self.pick(&[Ty::Int, Ty::Uint, Ty::Str, Ty::Dyn]);
                format!("double({})", self.expr(&ty, d))
            }
            2 => format!("{}.asApproximateFloat()", self.recv(&Ty::Quantity, d)),
            _ => format!("-{}", self.paren(&Ty::Double, d)),
        }
    }

    fn string_expr(&mut self, d: u32) -> String {
        match self.rng.below(20) {
            0 | 1 => format!("{} + {}", self.expr(&Ty::Str, d), self.expr(&Ty::Str, d)),
            2 => format!("string({})", self.any(d)),
            3 => {
                let f = self.pick(&["lowerAscii", "upperAscii", "trim"]);
                format!("{}.{f}()", self.recv(&Ty::Str, d))
            }
            4 => {
                let n = if self.chance(30) {
                    format!(", {}", self.expr(&Ty::Int, d))
                } else {
                    String::new()
                };
                format!(
                    "{}.replace({}, {}{n})",
                    self.recv(&Ty::Str, d),
                    self.expr(&Ty::Str, d),
                    self.expr(&Ty::Str, d)
                )
            }
            5 => {
                let end = if self.chance(50) {
                    format!(", {}", self.expr(&Ty::Int, d))
                } else {
                    String::new()
                };
                format!(
                    "{}.substring({}{end})",
                    self.recv(&Ty::Str, d),
                    self.expr(&Ty::Int, d)
                )
            }
            6 => format!(
                "{}.charAt({})",
                self.recv(&Ty::Str, d),
                self.expr(&Ty::Int, d)
            ),
            7 => {
                let sep = if self.chance(60) {
                    self.expr(&Ty::Str, d)
                } else {
                    String::new()
                };
                format!("{}.join({sep})", self.recv(&Ty::List(Box::new(Ty::Str)), d))
            }
            8 => {
                let args: Vec<String> = (0..self.rng.below(3)).map(|_| self.any(d)).collect();
                let f = self.pick(&[
                    "'%s'", "'%d'", "'%f'", "'%.2f'", "'%e'", "'%x'", "'%X'", "'%o'", "'%b'",
                    "'%s-%d'", "'%%'", "'%v'",
                ]);
                let recv = if self.chance(70) {
                    f.to_string()
                } else {
                    self.recv(&Ty::Str, d)
                };
                format!("{recv}.format([{}])", args.join(", "))
            }
            9 => format!("strings.quote({})", self.expr(&Ty::Str, d)),
            10 => match self.rng.below(5) {
                0 => format!("{}.string()", self.recv(&Ty::Ip, d)),
                1 | 2 => format!("string({})", self.expr(&Ty::Ip, d)),
                _ => format!("string({})", self.expr(&Ty::Cidr, d)),
            },
            11 => {
                let f = self.pick(&[
                    "getScheme",
                    "getHost",
                    "getHostname",
                    "getPort",
                    "getEscapedPath",
                ]);
                format!("{}.{f}()", self.recv(&Ty::Url, d))
            }
            12 => format!(
                "{}.split({})[{}]",
                self.recv(&Ty::Str, d),
                self.expr(&Ty::Str, d),
                self.expr(&Ty::Int, d)
            ),
            13 => format!(
                "{}.find({})",
                self.recv(&Ty::Str, d),
                self.expr(&Ty::Str, d)
            ),
            14 => format!(
                "{}[{}]",
                self.recv(&Ty::List(Box::new(Ty::Str)), d),
                self.expr(&Ty::Int, d)
            ),
            15 => format!(
                "{}.orValue({})",
                self.recv(&Ty::Opt(Box::new(Ty::Str)), d),
                self.expr(&Ty::Str, d)
            ),
            16 => format!("{}.value()", self.recv(&Ty::Opt(Box::new(Ty::Str)), d)),
            17 => format!("{}.reverse()", self.recv(&Ty::Str, d)),
            18 => format!(
                "format.{}().validate({}).value()[0]",
                self.pick(&["dns1123Label", "labelValue"]),
                self.expr(&Ty::Str, d)
            ),
            _ => self.ternary(&Ty::Str, d),
        }
    }

    fn bytes_expr(&mut self, d: u32) -> String {
        match self.rng.below(2) {
            0 => format!(
                "{} + {}",
                self.expr(&Ty::Bytes, d),
                self.expr(&Ty::Bytes, d)
            ),
            _ => format!("bytes({})", self.expr(&Ty::Str, d)),
        }
    }

    fn duration_expr(&mut self, d: u32) -> String {
        match self.rng.below(4) {
            0 => format!(
                "{} + {}",
                self.expr(&Ty::Duration, d),
                self.expr(&Ty::Duration, d)
            ),
            1 => format!(
                "{} - {}",
                self.expr(&Ty::Duration, d),
                self.expr(&Ty::Duration, d)
            ),
            2 => format!(
                "{} - {}",
                self.expr(&Ty::Timestamp, d),
                self.expr(&Ty::Timestamp, d)
            ),
            _ => format!("duration({})", self.expr(&Ty::Str, d)),
        }
    }

    fn timestamp_expr(&mut self, d: u32) -> String {
        match self.rng.below(4) {
            0 => format!(
                "{} + {}",
                self.expr(&Ty::Timestamp, d),
                self.expr(&Ty::Duration, d)
            ),
            1 => format!(
                "{} - {}",
                self.expr(&Ty::Timestamp, d),
                self.expr(&Ty::Duration, d)
            ),
            2 => format!("timestamp({})", self.expr(&Ty::Int, d)),
            _ => format!("timestamp({})", self.expr(&Ty::Str, d)),
        }
    }

    fn list_expr(&mut self, elem: &Ty, d: u32) -> String {
        match self.rng.below(14) {
            0 | 1 => {
                let n = self.rng.below(4);
                let items: Vec<String> = (0..n).map(|_| self.expr(elem, d)).collect();
                format!("[{}]", items.join(", "))
            }
            2 => format!(
                "{} + {}",
                self.expr(&Ty::List(Box::new(elem.clone())), d),
                self.leaf(&Ty::List(Box::new(elem.clone())))
            ),
            3 | 4 => {
                let (range, var_ty) = self.range(d);
                let elem = elem.clone();
                self.with_var(var_ty, |g, x| {
                    if g.chance(30) {
                        format!(
                            "{range}.map({x}, {}, {})",
                            g.expr(&Ty::Bool, d),
                            g.expr(&elem, d)
                        )
                    } else {
                        format!("{range}.map({x}, {})", g.expr(&elem, d))
                    }
                })
            }
            5 => {
                let list = self.recv(&Ty::List(Box::new(elem.clone())), d);
                self.with_var(elem.clone(), |g, x| {
                    format!("{list}.filter({x}, {})", g.expr(&Ty::Bool, d))
                })
            }
            6 if *elem == Ty::Str => format!(
                "{}.split({})",
                self.recv(&Ty::Str, d),
                self.expr(&Ty::Str, d)
            ),
            // A small bound: lists.range(1 << 62) runs kube-apiserver out of
            // its cost budget only after minutes.
            6 if *elem == Ty::Int => {
                format!("lists.range({})", self.pick(&["0", "1", "3", "-1", "20"]))
            }
            7 => format!(
                "{}.slice({}, {})",
                self.recv(&Ty::List(Box::new(elem.clone())), d),
                self.expr(&Ty::Int, d),
                self.expr(&Ty::Int, d)
            ),
            8 => {
                let f = self.pick(&["distinct", "sort", "reverse"]);
                format!("{}.{f}()", self.recv(&Ty::List(Box::new(elem.clone())), d))
            }
            9 => format!(
                "{}.flatten()",
                self.recv(&Ty::List(Box::new(Ty::List(Box::new(elem.clone())))), d)
            ),
            10 if *elem == Ty::Str => format!(
                "{}.findAll({})",
                self.recv(&Ty::Str, d),
                self.expr(&Ty::Str, d)
            ),
            11 => {
                let list = self.recv(&Ty::List(Box::new(elem.clone())), d);
                self.with_var(elem.clone(), |g, x| {
                    format!("{list}.sortBy({x}, {})", g.expr(&Ty::Int, d))
                })
            }
            12 => {
                let inner = Ty::Opt(Box::new(elem.clone()));
                format!("[?{}, {}]", self.expr(&inner, d), self.expr(elem, d))
            }
            _ => self.ternary(&Ty::List(Box::new(elem.clone())), d),
        }
    }

    fn map_expr(&mut self, value: &Ty, d: u32) -> String {
        match self.rng.below(5) {
            0 | 1 => {
                let n = self.rng.below(3);
                let items: Vec<String> = (0..n)
                    .map(|i| format!("'k{i}': {}", self.expr(value, d)))
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
            2 => format!(
                "{{?'a': {}}}",
                self.expr(&Ty::Opt(Box::new(value.clone())), d)
            ),
            3 => format!("{{{}: {}}}", self.expr(&Ty::Str, d), self.expr(value, d)),
            _ => self.ternary(&Ty::Map(Box::new(value.clone())), d),
        }
    }

    fn dyn_expr(&mut self, d: u32) -> String {
        match self.rng.below(5) {
            0 => format!("dyn({})", self.any(d)),
            1 => format!("object.data[{}]", self.expr(&Ty::Str, d)),
            2 => format!(
                "object.?data.?{}.orValue({})",
                self.pick(&["a", "z"]),
                self.any(d)
            ),
            3 => format!("{}[{}]", self.expr(&Ty::Dyn, d), self.any(d)),
            _ => self.dyn_leaf(),
        }
    }

    fn quantity_expr(&mut self, d: u32) -> String {
        match self.rng.below(3) {
            0 => {
                let f = self.pick(&["add", "sub"]);
                let arg = if self.chance(50) {
                    self.expr(&Ty::Quantity, d)
                } else {
                    self.expr(&Ty::Int, d)
                };
                format!("{}.{f}({arg})", self.recv(&Ty::Quantity, d))
            }
            1 => format!("{}.sign()", self.recv(&Ty::Quantity, d)),
            _ => format!("quantity({})", self.expr(&Ty::Str, d)),
        }
    }

    fn semver_expr(&mut self, d: u32) -> String {
        match self.rng.below(3) {
            0 => format!(
                "semver({}, {})",
                self.expr(&Ty::Str, d),
                self.expr(&Ty::Bool, d)
            ),
            _ => format!("semver({})", self.expr(&Ty::Str, d)),
        }
    }

    fn optional_expr(&mut self, inner: &Ty, d: u32) -> String {
        match self.rng.below(7) {
            0 => format!(
                "{}[?{}]",
                self.recv(&Ty::Map(Box::new(inner.clone())), d),
                self.expr(&Ty::Str, d)
            ),
            1 => format!(
                "{}[?{}]",
                self.recv(&Ty::List(Box::new(inner.clone())), d),
                self.expr(&Ty::Int, d)
            ),
            2 => format!(
                "object.?{}",
                self.pick(&[
                    "data.?a",
                    "data.?z",
                    "metadata.?labels",
                    "spec.?x",
                    "metadata.?name"
                ])
            ),
            3 => format!(
                "{}.or({})",
                self.recv(&Ty::Opt(Box::new(inner.clone())), d),
                self.expr(&Ty::Opt(Box::new(inner.clone())), d)
            ),
            4 => {
                let opt = self.recv(&Ty::Opt(Box::new(Ty::Dyn)), d);
                let inner = inner.clone();
                let f = self.pick(&["optMap", "optFlatMap"]);
                let body_ty = if f == "optMap" {
                    inner
                } else {
                    Ty::Opt(Box::new(inner))
                };
                self.with_var(Ty::Dyn, |g, x| {
                    format!("{opt}.{f}({x}, {})", g.expr(&body_ty, d))
                })
            }
            5 => format!("optional.of({})", self.expr(inner, d)),
            _ => format!("optional.ofNonZeroValue({})", self.expr(inner, d)),
        }
    }

    /// An expression in parentheses when it is not a leaf (for operands).
    fn paren(&mut self, ty: &Ty, d: u32) -> String {
        let e = self.expr(ty, d);
        if e.contains(' ') && !e.starts_with('(') {
            format!("({e})")
        } else {
            e
        }
    }

    /// A receiver of a member call: parenthesized when it is not a leaf.
    fn recv(&mut self, ty: &Ty, d: u32) -> String {
        self.paren(ty, d)
    }
}
