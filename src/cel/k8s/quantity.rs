//! Kubernetes `resource.Quantity` (k8s.io/apimachinery/pkg/api/resource) and
//! the CEL quantity library built on it.
//!
//! Go keeps a quantity either as a scaled int64 (`int64Amount`) or as an
//! arbitrary-precision `inf.Dec`, and several observable results depend on
//! which one a value happens to be in (`isInteger` is false for any `inf.Dec`,
//! `asApproximateFloat` multiplies the raw unscaled value by a power of ten,
//! the canonical string may reuse the input text). This module keeps the same
//! two representations and the same transitions between them, so those
//! results match Go exactly; comparisons and arithmetic are exact.

use std::cmp::Ordering;
use std::fmt;

/// Largest number of decimal digits an arbitrary-precision amount may grow to.
/// Go has no limit (and can be made to allocate gigabytes or loop for
/// minutes with inputs like `1e2000000000`); past this we return
/// [`QuantityError::TooLarge`] instead.
pub const MAX_DIGITS: usize = 8192;

/// Errors of the quantity library, with kube-apiserver's messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// `resource.ErrFormatWrong`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    FormatWrong,
    /// `resource.ErrNumeric`.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// `resource.ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// `asInteger()` on a quantity that is not an int64 integer.
    #[error("cannot convert value to integer")]
    NotInteger,
    /// A result would need more than [`MAX_DIGITS`] digits (Go would compute it).
    #[error("quantity is too large to represent exactly")]
    TooLarge,
}

/// How a quantity is written back (`resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `12e6`
    DecimalExponent,
    /// `12Mi`
    BinarySI,
    /// `12M`
    DecimalSI,
}

/// A Kubernetes resource quantity.
///
/// Equality and ordering are by value (`Quantity.Cmp`), as CEL's `==` on
/// quantities is: `quantity('1') == quantity('1000m')`.
#[derive(Debug, Clone)]
pub struct Quantity {
    amount: Amount,
    format: Format,
    /// The input text when Go's parser decides it is already canonical
    /// (Go returns it verbatim from `String()`, sign and leading zeros included).
    cached: Option<Box<str>>,
    /// Made by `add`/`sub`: the library returns those as a different Go type
    /// (`*Quantity`), which changes what CEL's `==` does (see [`Quantity::cel_equal`]).
    from_arithmetic: bool,
}

#[derive(Debug, Clone)]
enum Amount {
    /// `int64Amount`: `value * 10^scale`.
    Int { value: i64, scale: i32 },
    /// `inf.Dec`.
    Dec(BigDec),
}

/// `inf.Dec`: `(-1)^neg * mag * 10^(-scale)`. `mag` holds decimal digits,
/// most significant first, without leading zeros (empty for zero), and is
/// never normalised, because Go does not normalise either.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BigDec {
    neg: bool,
    mag: Vec<u8>,
    scale: i64,
}

/// Go's `resource.ParseQuantity` accepts `s` (`isQuantity`).
pub fn is_quantity(s: &str) -> bool {
    Quantity::parse(s).is_ok()
}

impl Quantity {
    /// `resource.ParseQuantity` (the CEL `quantity(string)` function).
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        if s.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        if s == "0" {
            let amount = Amount::Int { value: 0, scale: 0 };
            return Ok(Quantity::with_cache(amount, Format::DecimalSI, Some(s)));
        }
        let parts = scan(s)?;
        let (base, exponent, format) =
            interpret_suffix(parts.suffix).ok_or(QuantityError::Suffix)?;
        if let Some(q) = parse_fast(s, &parts, exponent, format)? {
            return Ok(q);
        }
        parse_slow(&parts, base, exponent, format)
    }

    /// `resource.NewQuantity(v, DecimalExponent)`, as the `add(int)` and
    /// `sub(int)` overloads build their operand.
    pub fn from_i64(value: i64) -> Quantity {
        Quantity::with_cache(
            Amount::Int { value, scale: 0 },
            Format::DecimalExponent,
            None,
        )
    }

    fn with_cache(amount: Amount, format: Format, cached: Option<&str>) -> Quantity {
        Quantity {
            amount,
            format,
            cached: cached.map(Into::into),
            from_arithmetic: false,
        }
    }

    /// The format the quantity is written back in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// `sign()`: -1, 0 or 1.
    pub fn sign(&self) -> i64 {
        match &self.amount {
            Amount::Int { value, .. } => value.signum(),
            Amount::Dec(d) => d.sign(),
        }
    }

    fn is_zero(&self) -> bool {
        self.sign() == 0
    }

    /// `isInteger()`: Go's `AsInt64` succeeds. False for every value Go holds
    /// as an `inf.Dec` and for scaled values like `2000m`, as in Go.
    pub fn is_integer(&self) -> bool {
        self.as_integer().is_ok()
    }

    /// `asInteger()`.
    pub fn as_integer(&self) -> Result<i64, QuantityError> {
        match self.amount {
            Amount::Int { value, scale: 0 } => Ok(value),
            Amount::Int { value, scale } if scale > 0 => {
                positive_scale(value, i64::from(scale)).ok_or(QuantityError::NotInteger)
            }
            _ => Err(QuantityError::NotInteger),
        }
    }

    /// `asApproximateFloat()`: Go's `AsApproximateFloat64`, the unscaled
    /// value as a float times `math.Pow10(exponent)` (so `0e400` is NaN,
    /// as in Go).
    pub fn as_approximate_float(&self) -> f64 {
        let (base, exponent) = match &self.amount {
            Amount::Int { value, scale } => (*value as f64, i64::from(*scale)),
            Amount::Dec(d) => (d.unscaled_f64(), -d.scale),
        };
        if exponent == 0 {
            return base;
        }
        base * go_pow10(exponent)
    }

    /// `compareTo()` as an ordering (exact).
    pub fn compare(&self, other: &Quantity) -> Ordering {
        cmp_amounts(&self.amount, &other.amount)
    }

    /// `compareTo()`: -1, 0 or 1.
    pub fn compare_to(&self, other: &Quantity) -> i64 {
        self.compare(other) as i64
    }

    /// CEL's `self == other` as kube-apiserver evaluates it: by value, except
    /// that it is a "no such overload" error (`None`) when `other` is the
    /// result of `add`/`sub` (the library returns those as `*Quantity`, and
    /// `Quantity.Equal` only accepts a `Quantity`). So
    /// `quantity('1').add(1) == quantity('2')` is true but
    /// `quantity('2') == quantity('1').add(1)` is an error.
    pub fn cel_equal(&self, other: &Quantity) -> Option<bool> {
        (!other.from_arithmetic).then(|| self == other)
    }

    /// Whether this value came from `add`/`sub` (see [`Quantity::cel_equal`]).
    pub fn is_arithmetic_result(&self) -> bool {
        self.from_arithmetic
    }

    /// `isLessThan()`.
    pub fn is_less_than(&self, other: &Quantity) -> bool {
        self.compare(other) == Ordering::Less
    }

    /// `isGreaterThan()`.
    pub fn is_greater_than(&self, other: &Quantity) -> bool {
        self.compare(other) == Ordering::Greater
    }

    /// `add(quantity)`: Go's `Quantity.Add` on a copy.
    pub fn add(&self, y: &Quantity) -> Result<Quantity, QuantityError> {
        let mut q = self.clone();
        q.cached = None;
        q.from_arithmetic = true;
        if let (
            Amount::Int {
                value: a,
                scale: sa,
            },
            Amount::Int {
                value: b,
                scale: sb,
            },
        ) = (&q.amount, &y.amount)
        {
            if *a == 0 {
                q.format = y.format;
            }
            if let Some(sum) = int_add((*a, *sa), (*b, *sb)) {
                q.amount = sum;
                return Ok(q);
            }
        } else if q.is_zero() {
            q.format = y.format;
        }
        q.amount = Amount::Dec(q.amount.to_dec().add(&y.amount.to_dec())?);
        Ok(q)
    }

    /// `sub(quantity)`: Go's `Quantity.Sub` on a copy.
    pub fn sub(&self, y: &Quantity) -> Result<Quantity, QuantityError> {
        let mut q = self.clone();
        q.cached = None;
        q.from_arithmetic = true;
        if q.is_zero() {
            q.format = y.format;
        }
        if let (
            Amount::Int {
                value: a,
                scale: sa,
            },
            Amount::Int {
                value: b,
                scale: sb,
            },
        ) = (&q.amount, &y.amount)
        {
            // Go negates with int64 wrap-around: subtracting MinInt64 adds it.
            if let Some(diff) = int_add((*a, *sa), (b.wrapping_neg(), *sb)) {
                q.amount = diff;
                return Ok(q);
            }
        }
        q.amount = Amount::Dec(q.amount.to_dec().add(&y.amount.to_dec().negated())?);
        Ok(q)
    }

    /// `add(int)`.
    pub fn add_int(&self, y: i64) -> Result<Quantity, QuantityError> {
        self.add(&Quantity::from_i64(y))
    }

    /// `sub(int)`.
    pub fn sub_int(&self, y: i64) -> Result<Quantity, QuantityError> {
        self.sub(&Quantity::from_i64(y))
    }

    /// `Quantity.RoundUp(-3)`, away from zero: what kube-apiserver's
    /// `SetDefaults_ResourceList` does to every resource quantity. Go keeps
    /// the input text of an integer amount already in millis or coarser
    /// and forgets it otherwise.
    pub fn round_up_to_milli(&self) -> Quantity {
        let amount = match &self.amount {
            Amount::Int { scale, .. } if *scale >= -3 => return self.clone(),
            Amount::Int { value, scale } => Amount::Int {
                value: negative_scale(*value, i64::from(-3 - *scale)).0,
                scale: -3,
            },
            Amount::Dec(d) => match d.round_up(3) {
                Ok(r) => Amount::Dec(r),
                Err(_) => return self.clone(),
            },
        };
        Quantity {
            amount,
            format: self.format,
            cached: None,
            from_arithmetic: self.from_arithmetic,
        }
    }

    /// Go's `Quantity.String()`: the canonical form (or the input text when
    /// the parser found it canonical).
    pub fn canonical(&self) -> String {
        if let Some(s) = &self.cached {
            return s.to_string();
        }
        if self.is_zero() {
            return "0".to_string();
        }
        let format = self.effective_format();
        if format == Format::BinarySI {
            if let Some(s) = self.binary_string() {
                return s;
            }
        }
        let format = if format == Format::BinarySI {
            Format::DecimalSI
        } else {
            format
        };
        let (number, exponent) = self.amount.canonical_base10();
        number + &decimal_suffix(exponent, format)
    }

    /// Go's `CanonicalizeBytes` demotes BinarySI when it cannot be shown
    /// exactly or the value is small.
    fn effective_format(&self) -> Format {
        if self.format != Format::BinarySI {
            return self.format;
        }
        let small = cmp_amounts(&self.amount, &int_amount(-1024)) == Ordering::Greater
            && cmp_amounts(&self.amount, &int_amount(1024)) == Ordering::Less;
        if small || !self.amount.round_to_integer().1 {
            return Format::DecimalSI;
        }
        Format::BinarySI
    }

    fn binary_string(&self) -> Option<String> {
        let (rounded, _) = self.amount.round_to_integer();
        let (number, exponent) = rounded.canonical_base1024()?;
        Some(number + binary_suffix(exponent))
    }
}

fn int_amount(value: i64) -> Amount {
    Amount::Int { value, scale: 0 }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.compare(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.compare(other)
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

// ---------------------------------------------------------------------------
// Parsing (resource.parseQuantityString and ParseQuantity)

/// The pieces `parseQuantityString` returns, as slices of the input.
struct Parts<'a> {
    positive: bool,
    /// Sign and number, as handed to `inf.Dec.SetString` on the slow path.
    value: &'a str,
    /// Integer digits without leading zeros ("0" when there are none).
    num: &'a str,
    /// Fraction digits.
    denom: &'a str,
    suffix: &'a str,
}

fn scan(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    let mut parts = Parts {
        positive,
        value: "0",
        num: "0",
        denom: "",
        suffix: "",
    };
    if pos >= end {
        return Ok(parts);
    }
    let num_end = skip_digits(b, pos);
    if num_end > pos {
        parts.num = &s[pos..num_end];
    }
    pos = num_end;
    if pos >= end {
        parts.value = s;
        return Ok(parts);
    }
    if b[pos] == b'.' {
        let denom_end = skip_digits(b, pos + 1);
        parts.denom = &s[pos + 1..denom_end];
        pos = denom_end;
        if pos >= end {
            parts.value = s;
            return Ok(parts);
        }
    }
    parts.value = &s[..pos];
    parts.suffix = scan_suffix(s, pos)?;
    Ok(parts)
}

fn skip_digits(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// The suffix is letters from "eEinumkKMGTP", an optional sign, then digits.
fn scan_suffix(s: &str, start: usize) -> Result<&str, QuantityError> {
    let b = s.as_bytes();
    let mut pos = start;
    while pos < b.len() && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < b.len() && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    if skip_digits(b, pos) < b.len() {
        return Err(QuantityError::FormatWrong);
    }
    Ok(&s[start..])
}

/// `quantitySuffixer.interpret`: (base, exponent, format).
fn interpret_suffix(suffix: &str) -> Option<(u32, i32, Format)> {
    let dec = |e| Some((10, e, Format::DecimalSI));
    let bin = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        _ => interpret_exponent(suffix),
    }
}

fn interpret_exponent(suffix: &str) -> Option<(u32, i32, Format)> {
    let rest = suffix.strip_prefix(['e', 'E'])?;
    if rest.is_empty() {
        return None;
    }
    let parsed = go_parse_int64(rest)?;
    // Go parses 64 bits and then truncates to int32.
    Some((10, parsed as i32, Format::DecimalExponent))
}

/// `strconv.ParseInt(s, 10, 64)`: optional sign, then only digits.
fn go_parse_int64(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse::<i64>().ok()
}

/// The int64 fast path of `ParseQuantity`; `None` when Go falls through to
/// the `inf.Dec` path.
fn parse_fast(
    s: &str,
    parts: &Parts<'_>,
    exponent: i32,
    format: Format,
) -> Result<Option<Quantity>, QuantityError> {
    let digits = (parts.num.len() + parts.denom.len()) as i64;
    let (mut scale, precision, mantissa) = match format {
        Format::DecimalExponent | Format::DecimalSI => (exponent, 18 - digits, 1i64),
        Format::BinarySI if parts.denom.is_empty() => {
            let precision = 15 - parts.num.len() as i64 - i64::from(exponent) * 3 / 10 - 1;
            (0, precision, 1i64 << exponent)
        }
        Format::BinarySI => (0, -1, 1),
    };
    if precision < 0 {
        return Ok(None);
    }
    scale = scale.wrapping_sub(parts.denom.len() as i32);
    if scale < -9 {
        return Ok(None);
    }
    let shifted = format!("{}{}", parts.num, parts.denom);
    let value: i64 = shifted.parse().map_err(|_| QuantityError::Numeric)?;
    let Some(mut result) = value.checked_mul(mantissa) else {
        return Ok(None);
    };
    if !parts.positive {
        result = -result;
    }
    let canonical = match format {
        Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
        _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
    };
    let amount = Amount::Int {
        value: result,
        scale,
    };
    Ok(Some(Quantity::with_cache(
        amount,
        format,
        canonical.then_some(s),
    )))
}

/// The `inf.Dec` path of `ParseQuantity`.
fn parse_slow(
    parts: &Parts<'_>,
    base: u32,
    exponent: i32,
    mut format: Format,
) -> Result<Quantity, QuantityError> {
    let mut amount = BigDec::parse(parts.value).ok_or(QuantityError::Numeric)?;
    if base == 10 {
        // inf.Scale is an int32 and Go's arithmetic on it wraps.
        amount.scale = i64::from((amount.scale as i32).wrapping_add(exponent.wrapping_neg()));
    } else {
        amount.mul_small(1u64 << exponent);
    }
    let neg = amount.neg;
    amount.neg = false;
    if !amount.mag.is_empty() {
        amount = amount.round_up(9)?;
    }
    if format == Format::BinarySI {
        let max = BigDec::from_i64(i64::MAX, 0);
        if amount.cmp_value(&max) == Ordering::Greater {
            amount = max;
        }
        let one = BigDec::from_i64(1, 0);
        if amount.cmp_value(&one) == Ordering::Less && !amount.mag.is_empty() {
            format = Format::DecimalSI;
        }
    }
    amount.neg = neg && !amount.mag.is_empty();
    Ok(Quantity::with_cache(Amount::Dec(amount), format, None))
}

// ---------------------------------------------------------------------------
// int64Amount arithmetic (resource/amount.go, resource/math.go)

/// `int64Amount.Add`: `None` when Go would fall back to `inf.Dec`.
fn int_add(a: (i64, i32), b: (i64, i32)) -> Option<Amount> {
    let ((av, ascale), (bv, bscale)) = (a, b);
    let (value, scale) = if bv == 0 {
        (av, ascale)
    } else if av == 0 {
        (bv, bscale)
    } else if ascale == bscale {
        (av.checked_add(bv)?, ascale)
    } else if ascale > bscale {
        let scaled = positive_scale(av, i64::from(ascale) - i64::from(bscale))?;
        (scaled.checked_add(bv)?, bscale)
    } else {
        let scaled = positive_scale(bv, i64::from(bscale) - i64::from(ascale))?;
        (av.checked_add(scaled)?, ascale)
    };
    Some(Amount::Int { value, scale })
}

/// `positiveScaleInt64`: `base * 10^scale`, `None` on overflow.
fn positive_scale(base: i64, scale: i64) -> Option<i64> {
    if base == 0 {
        return Some(0);
    }
    let mut value = base;
    for _ in 0..scale.min(20) {
        value = value.checked_mul(10)?;
    }
    Some(value)
}

/// `negativeScaleInt64`: divide by `10^scale`, rounding away from zero;
/// the flag says whether the result is exact.
fn negative_scale(base: i64, scale: i64) -> (i64, bool) {
    if scale == 0 {
        return (base, true);
    }
    let mut value = base;
    let mut fraction = false;
    for _ in 0..scale {
        fraction |= value % 10 != 0;
        value /= 10;
        if value == 0 {
            return match (fraction, base > 0) {
                (false, _) => (0, true),
                (true, true) => (1, false),
                (true, false) => (-1, false),
            };
        }
    }
    if fraction {
        value += base.signum();
    }
    (value, !fraction)
}

/// `removeInt64Factors` (Go negates with wrap-around).
fn remove_int_factors(value: i64, base: i64) -> (i64, i64) {
    let negative = value < 0;
    let mut result = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    let mut times = 0;
    while result >= base && result % base == 0 {
        times += 1;
        result /= base;
    }
    (
        if negative {
            result.wrapping_neg()
        } else {
            result
        },
        times,
    )
}

impl Amount {
    /// `AsDec`.
    fn to_dec(&self) -> BigDec {
        match self {
            Amount::Int { value, scale } => BigDec::from_i64(*value, -i64::from(*scale)),
            Amount::Dec(d) => d.clone(),
        }
    }

    /// `AsScale(0)`: round up (away from zero) to an integer; flag = exact.
    fn round_to_integer(&self) -> (Amount, bool) {
        match self {
            Amount::Int { value, scale } if *scale < 0 => {
                let (v, exact) = negative_scale(*value, -i64::from(*scale));
                (Amount::Int { value: v, scale: 0 }, exact)
            }
            Amount::Int { .. } => (self.clone(), true),
            Amount::Dec(d) => match d.round_up(0) {
                Ok(r) => {
                    let exact = r.cmp_value(d) == Ordering::Equal;
                    (Amount::Dec(r), exact)
                }
                Err(_) => (self.clone(), false),
            },
        }
    }

    /// `AsCanonicalBytes`: digits and a base-10 exponent that is a multiple of 3.
    fn canonical_base10(&self) -> (String, i64) {
        if let Amount::Int { value, scale } = self {
            let (amount, times) = remove_int_factors(*value, 10);
            let exponent = i64::from(*scale) + times;
            let shifted = match exponent.rem_euclid(3) {
                0 => Some((amount, exponent)),
                1 => amount.checked_mul(10).map(|a| (a, exponent - 1)),
                _ => amount.checked_mul(100).map(|a| (a, exponent - 2)),
            };
            if let Some((a, e)) = shifted {
                return (a.to_string(), e);
            }
        }
        self.to_dec().canonical_base10()
    }

    /// `AsCanonicalBase1024Bytes` on a value already rounded to an integer;
    /// `None` if the digits would exceed [`MAX_DIGITS`].
    fn canonical_base1024(&self) -> Option<(String, i64)> {
        if let Amount::Int { value, scale } = self {
            let scaled = if *scale < 0 {
                Some(negative_scale(*value, -i64::from(*scale)).0)
            } else {
                positive_scale(*value, i64::from(*scale))
            };
            if let Some(v) = scaled {
                let (amount, times) = remove_int_factors(v, 1024);
                return Some((amount.to_string(), times));
            }
        }
        let mut d = self.to_dec().round_up(0).ok()?;
        let mut times = 0;
        while !d.mag.is_empty() && d.div_small_exact(1024) {
            times += 1;
        }
        Some((d.digits_string(), times))
    }
}

fn decimal_suffix(exponent: i64, format: Format) -> String {
    if format == Format::DecimalExponent {
        return if exponent == 0 {
            String::new()
        } else {
            format!("e{exponent}")
        };
    }
    // Go finds no suffix for other exponents and then prints none at all.
    let s = match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => "",
    };
    s.to_string()
}

fn binary_suffix(exponent_1024: i64) -> &'static str {
    match exponent_1024 {
        1 => "Ki",
        2 => "Mi",
        3 => "Gi",
        4 => "Ti",
        5 => "Pi",
        6 => "Ei",
        _ => "",
    }
}

/// Exact comparison of two amounts by value.
fn cmp_amounts(a: &Amount, b: &Amount) -> Ordering {
    match (a, b) {
        (
            Amount::Int {
                value: x,
                scale: sx,
            },
            Amount::Int {
                value: y,
                scale: sy,
            },
        ) if sx == sy => x.cmp(y),
        _ => a.to_dec().cmp_value(&b.to_dec()),
    }
}

/// Go's `math.Pow10`, table for table, so products round the same way.
fn go_pow10(n: i64) -> f64 {
    const TAB: [f64; 32] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    ];
    const POS32: [f64; 10] = [
        1e0, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288,
    ];
    const NEG32: [f64; 11] = [
        1e-0, 1e-32, 1e-64, 1e-96, 1e-128, 1e-160, 1e-192, 1e-224, 1e-256, 1e-288, 1e-320,
    ];
    if (0..=308).contains(&n) {
        let n = n as usize;
        return POS32[n / 32] * TAB[n % 32];
    }
    if (-323..=0).contains(&n) {
        let m = (-n) as usize;
        return NEG32[m / 32] / TAB[m % 32];
    }
    if n > 0 {
        f64::INFINITY
    } else {
        0.0
    }
}

// ---------------------------------------------------------------------------
// BigDec: the subset of inf.Dec that Quantity uses.

impl BigDec {
    fn from_i64(value: i64, scale: i64) -> BigDec {
        let mag = if value == 0 {
            Vec::new()
        } else {
            value
                .unsigned_abs()
                .to_string()
                .bytes()
                .map(|c| c - b'0')
                .collect()
        };
        BigDec {
            neg: value < 0,
            mag,
            scale,
        }
    }

    /// `inf.Dec.SetString`: optional sign, digits with at most one '.', at
    /// least one digit.
    fn parse(s: &str) -> Option<BigDec> {
        let (neg, body) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        let all = int.bytes().chain(frac.bytes());
        if int.len() + frac.len() == 0 || !all.clone().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let mut mag: Vec<u8> = all.map(|c| c - b'0').collect();
        let lead = mag.iter().take_while(|&&d| d == 0).count();
        mag.drain(..lead);
        let neg = neg && !mag.is_empty();
        Some(BigDec {
            neg,
            mag,
            scale: frac.len() as i64,
        })
    }

    fn sign(&self) -> i64 {
        match (self.mag.is_empty(), self.neg) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    fn negated(mut self) -> BigDec {
        self.neg = !self.neg && !self.mag.is_empty();
        self
    }

    fn digits_string(&self) -> String {
        if self.mag.is_empty() {
            return "0".to_string();
        }
        let mut s = String::with_capacity(self.mag.len() + 1);
        if self.neg {
            s.push('-');
        }
        s.extend(self.mag.iter().map(|d| char::from(b'0' + d)));
        s
    }

    /// The unscaled value as the nearest float (Go's `big.Float.Float64`).
    fn unscaled_f64(&self) -> f64 {
        self.digits_string().parse().unwrap_or(0.0)
    }

    /// Multiply the magnitude by a small factor.
    fn mul_small(&mut self, factor: u64) {
        let mut carry: u128 = 0;
        for d in self.mag.iter_mut().rev() {
            let v = u128::from(*d) * u128::from(factor) + carry;
            *d = (v % 10) as u8;
            carry = v / 10;
        }
        let mut head = Vec::new();
        while carry > 0 {
            head.push((carry % 10) as u8);
            carry /= 10;
        }
        head.reverse();
        if !head.is_empty() {
            head.extend_from_slice(&self.mag);
            self.mag = head;
        }
        self.trim_leading();
    }

    /// Divide the magnitude by `divisor` if that leaves no remainder.
    fn div_small_exact(&mut self, divisor: u32) -> bool {
        let mut rem: u64 = 0;
        let mut out = Vec::with_capacity(self.mag.len());
        for &d in &self.mag {
            let v = rem * 10 + u64::from(d);
            out.push((v / u64::from(divisor)) as u8);
            rem = v % u64::from(divisor);
        }
        if rem != 0 {
            return false;
        }
        self.mag = out;
        self.trim_leading();
        true
    }

    fn trim_leading(&mut self) {
        let lead = self.mag.iter().take_while(|&&d| d == 0).count();
        self.mag.drain(..lead);
        if self.mag.is_empty() {
            self.neg = false;
        }
    }

    /// Append `n` zero digits (multiply by 10^n), within [`MAX_DIGITS`].
    fn shift_left(&mut self, n: i64) -> Result<(), QuantityError> {
        if self.mag.is_empty() || n <= 0 {
            return Ok(());
        }
        let n = usize::try_from(n).map_err(|_| QuantityError::TooLarge)?;
        if self.mag.len().saturating_add(n) > MAX_DIGITS {
            return Err(QuantityError::TooLarge);
        }
        self.mag.resize(self.mag.len() + n, 0);
        Ok(())
    }

    /// `inf.Dec.Round(x, scale, RoundUp)`: away from zero.
    fn round_up(&self, scale: i64) -> Result<BigDec, QuantityError> {
        let mut r = self.clone();
        r.scale = scale;
        if scale >= self.scale {
            r.shift_left(scale - self.scale)?;
            return Ok(r);
        }
        let drop = usize::try_from(self.scale - scale).unwrap_or(usize::MAX);
        let keep = self.mag.len().saturating_sub(drop);
        let inexact = self.mag[keep..].iter().any(|&d| d != 0);
        r.mag.truncate(keep);
        if inexact {
            r.add_one_to_magnitude();
        }
        r.neg = self.neg && !r.mag.is_empty();
        Ok(r)
    }

    fn add_one_to_magnitude(&mut self) {
        for d in self.mag.iter_mut().rev() {
            if *d < 9 {
                *d += 1;
                return;
            }
            *d = 0;
        }
        self.mag.insert(0, 1);
    }

    /// `inf.Dec.Add`: the result takes the larger scale.
    fn add(&self, other: &BigDec) -> Result<BigDec, QuantityError> {
        let scale = self.scale.max(other.scale);
        let mut a = self.clone();
        let mut b = other.clone();
        a.shift_left(scale - a.scale)?;
        b.shift_left(scale - b.scale)?;
        let (neg, mag) = if a.neg == b.neg {
            (a.neg, add_mag(&a.mag, &b.mag))
        } else if cmp_mag(&a.mag, &b.mag) != Ordering::Less {
            (a.neg, sub_mag(&a.mag, &b.mag))
        } else {
            (b.neg, sub_mag(&b.mag, &a.mag))
        };
        let mut r = BigDec { neg, mag, scale };
        r.trim_leading();
        Ok(r)
    }

    /// Exact comparison by value, whatever the scales.
    fn cmp_value(&self, other: &BigDec) -> Ordering {
        let (sa, sb) = (self.sign(), other.sign());
        if sa != sb || sa == 0 {
            return sa.cmp(&sb);
        }
        let ord = cmp_scaled_mag(self, other);
        if sa < 0 {
            ord.reverse()
        } else {
            ord
        }
    }

    fn canonical_base10(&self) -> (String, i64) {
        let zeros = self.mag.iter().rev().take_while(|&&d| d == 0).count();
        let mut d = self.clone();
        d.mag.truncate(self.mag.len() - zeros);
        let mut exponent = -self.scale + zeros as i64;
        while exponent.rem_euclid(3) != 0 {
            d.mag.push(0);
            exponent -= 1;
        }
        d.trim_leading();
        (d.digits_string(), exponent)
    }
}

/// Compare nonzero magnitudes `mag * 10^-scale` without rescaling.
fn cmp_scaled_mag(a: &BigDec, b: &BigDec) -> Ordering {
    let top_a = a.mag.len() as i64 - a.scale;
    let top_b = b.mag.len() as i64 - b.scale;
    if top_a != top_b {
        return top_a.cmp(&top_b);
    }
    let n = a.mag.len().max(b.mag.len());
    for i in 0..n {
        let x = a.mag.get(i).copied().unwrap_or(0);
        let y = b.mag.get(i).copied().unwrap_or(0);
        if x != y {
            return x.cmp(&y);
        }
    }
    Ordering::Equal
}

fn cmp_mag(a: &[u8], b: &[u8]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn add_mag(a: &[u8], b: &[u8]) -> Vec<u8> {
    let n = a.len().max(b.len());
    let mut out = Vec::with_capacity(n + 1);
    let mut carry = 0;
    for i in 0..n {
        let x = if i < a.len() { a[a.len() - 1 - i] } else { 0 };
        let y = if i < b.len() { b[b.len() - 1 - i] } else { 0 };
        let s = x + y + carry;
        out.push(s % 10);
        carry = s / 10;
    }
    if carry > 0 {
        out.push(carry);
    }
    out.reverse();
    out
}

/// `a - b` for `a >= b`.
fn sub_mag(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0;
    for i in 0..a.len() {
        let x = a[a.len() - 1 - i] as i8;
        let y = if i < b.len() {
            b[b.len() - 1 - i] as i8
        } else {
            0
        };
        let mut d = x - y - borrow;
        borrow = 0;
        if d < 0 {
            d += 10;
            borrow = 1;
        }
        out.push(d as u8);
    }
    out.reverse();
    out
}

#[cfg(test)]
#[path = "quantity_tests.rs"]
mod tests;
