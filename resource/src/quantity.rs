//! Resource quantities (`resource.Quantity`): parsed exactly enough to compare them, as
//! the pod QoS class needs (`1` equals `1000m`, `1Gi` equals `1073741824`), added up with
//! their format, and written in upstream's canonical form (`1000m` is stored as `1`,
//! `1024Ki` as `1Mi`).

use std::cmp::Ordering;

/// The message upstream's decoder gives for a string that is not a quantity.
pub const SYNTAX: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A quantity's value in nano-units (10⁻⁹), rounded up like upstream rounds values below
/// `1n`; values beyond `i128` saturate (far beyond anything a node can offer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(i128);

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity(0);
    /// One unit.
    pub const ONE: Quantity = Quantity(1_000_000_000);

    /// Parses `<sign>?<digits>[.<digits>]<suffix>` with a binary (`Ki`…`Ei`), decimal
    /// (`n`, `u`, `m`, `k`, `M`…`E`) or exponent (`e3`, `E-2`) suffix; `None` when `s` is
    /// not a quantity.
    pub fn parse(s: &str) -> Option<Quantity> {
        Exact::parse(s).map(Exact::quantity)
    }

    /// Whether the quantity is above zero.
    pub fn is_positive(self) -> bool {
        self.cmp(&Quantity::ZERO) == Ordering::Greater
    }

    /// The sum, saturating.
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity(self.0.saturating_add(other.0))
    }

    /// `Quantity.Value()`: rounded up to a whole unit.
    pub fn value(self) -> i128 {
        self.0.div_euclid(1_000_000_000) + i128::from(self.0.rem_euclid(1_000_000_000) != 0)
    }

    /// `Quantity.MilliValue()`: rounded up to a thousandth.
    pub fn milli_value(self) -> i128 {
        self.0.div_euclid(1_000_000) + i128::from(self.0.rem_euclid(1_000_000) != 0)
    }
}

/// How a quantity was written, which decides how it is written back (`resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// No suffix or a decimal one (`m`, `k`, `M`, …).
    DecimalSi,
    /// A binary suffix (`Ki`, `Mi`, …).
    BinarySi,
    /// An exponent (`1e3`).
    DecimalExponent,
}

/// A quantity as written: `<sign>?<whole>[.<fraction>]<suffix>`, the suffix read as powers
/// of ten and two and the format it implies.
struct Spelling<'a> {
    negative: bool,
    whole: &'a str,
    fraction: &'a str,
    pow10: i32,
    pow2: u32,
    format: Format,
}

impl<'a> Spelling<'a> {
    /// `None` when `s` is not a quantity.
    fn split(s: &'a str) -> Option<Spelling<'a>> {
        let (negative, rest) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let number_len = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.len() + fraction.len() == 0 || fraction.contains('.') {
            return None;
        }
        let (pow10, pow2, format) = match suffix {
            "" => (0, 0, Format::DecimalSi),
            "n" => (-9, 0, Format::DecimalSi),
            "u" => (-6, 0, Format::DecimalSi),
            "m" => (-3, 0, Format::DecimalSi),
            "k" => (3, 0, Format::DecimalSi),
            "M" => (6, 0, Format::DecimalSi),
            "G" => (9, 0, Format::DecimalSi),
            "T" => (12, 0, Format::DecimalSi),
            "P" => (15, 0, Format::DecimalSi),
            "E" => (18, 0, Format::DecimalSi),
            "Ki" => (0, 10, Format::BinarySi),
            "Mi" => (0, 20, Format::BinarySi),
            "Gi" => (0, 30, Format::BinarySi),
            "Ti" => (0, 40, Format::BinarySi),
            "Pi" => (0, 50, Format::BinarySi),
            "Ei" => (0, 60, Format::BinarySi),
            exponent => {
                let digits = exponent.strip_prefix(['e', 'E'])?;
                let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
                if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                (digits.parse::<i32>().ok()?, 0, Format::DecimalExponent)
            }
        };
        Some(Spelling {
            negative,
            whole,
            fraction,
            pow10,
            pow2,
            format,
        })
    }
}

/// A quantity as `resource.Quantity` holds one: its exact value, `mantissa × 10^exponent`,
/// and the format it is written back in. Sums keep the format of their first term, as
/// upstream's `Add` does (`64Mi` + `1G` is written in binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exact {
    mantissa: i128,
    exponent: i32,
    format: Format,
}

impl Exact {
    /// Parses `s` as [`Quantity::parse`] does, keeping its format; below a nano-unit it
    /// rounds up.
    pub fn parse(s: &str) -> Option<Exact> {
        let Spelling {
            negative,
            whole,
            fraction,
            pow10,
            pow2,
            format,
        } = Spelling::split(s)?;
        let mut mantissa: i128 = 0;
        for b in whole.bytes().chain(fraction.bytes()) {
            mantissa = mantissa
                .checked_mul(10)?
                .checked_add(i128::from(b - b'0'))?;
        }
        mantissa = mantissa.checked_mul(1i128.checked_shl(pow2)?)?;
        let exponent = pow10.checked_sub(i32::try_from(fraction.len()).ok()?)?;
        let mut exact = Exact {
            mantissa: if negative { -mantissa } else { mantissa },
            exponent,
            format,
        };
        // Upstream keeps nothing below a nano-unit: it rounds up to it.
        exact.round_up(-9);
        Some(exact)
    }

    /// Rounds away from zero to `10^scale` units (`RoundUp`): a digit dropped that is not
    /// zero moves the rest one unit away from zero.
    fn round_up(&mut self, scale: i32) {
        while self.exponent < scale {
            let rest = self.mantissa % 10;
            self.mantissa = self.mantissa / 10 + rest.signum();
            self.exponent += 1;
        }
    }

    /// A whole number of milli-units, in decimal (`resource.NewMilliQuantity(m, DecimalSI)`).
    pub fn from_milli(milli: i64) -> Exact {
        Exact {
            mantissa: i128::from(milli),
            exponent: -3,
            format: Format::DecimalSi,
        }
    }

    /// A whole number of units in binary (`resource.NewQuantity(v, BinarySI)`: bytes).
    pub fn from_bytes(bytes: i64) -> Exact {
        Exact {
            mantissa: i128::from(bytes),
            exponent: 0,
            format: Format::BinarySi,
        }
    }

    /// The value, to compare quantities.
    pub fn quantity(self) -> Quantity {
        // `parse` and the constructors keep `exponent >= -9`.
        let shift = u32::try_from(self.exponent + 9).unwrap_or(0);
        Quantity(self.mantissa.saturating_mul(10i128.saturating_pow(shift)))
    }

    /// `CanonicalizeBytes`: the shortest exact spelling in the quantity's format.
    pub fn canonical(self) -> String {
        if self.mantissa == 0 {
            return "0".into();
        }
        let (mut m, mut e) = (self.mantissa, self.exponent);
        while m % 10 == 0 {
            m /= 10;
            e += 1;
        }
        let integer = (e >= 0)
            .then(|| m.checked_mul(10i128.checked_pow(e as u32)?))
            .flatten();
        if self.format == Format::BinarySi
            && let Some(value) = integer.filter(|v| v.abs() >= 1024)
        {
            let (mut v, mut power) = (value, 0);
            while v % 1024 == 0 && power < 6 {
                v /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return format!("{v}{suffix}");
        }
        // An exponent that is a multiple of three, the mantissa grown to match.
        match e.rem_euclid(3) {
            1 => {
                m *= 10;
                e -= 1;
            }
            2 => {
                m *= 100;
                e -= 2;
            }
            _ => {}
        }
        let suffix = match (self.format, e) {
            (Format::DecimalExponent, 0) => String::new(),
            (Format::DecimalExponent, e) => format!("e{e}"),
            (_, -9) => "n".into(),
            (_, -6) => "u".into(),
            (_, -3) => "m".into(),
            (_, 0) => String::new(),
            (_, 3) => "k".into(),
            (_, 6) => "M".into(),
            (_, 9) => "G".into(),
            (_, 12) => "T".into(),
            (_, 15) => "P".into(),
            (_, 18) => "E".into(),
            (_, e) => format!("e{e}"),
        };
        format!("{m}{suffix}")
    }
}

/// The sum, in the first quantity's format (saturating far beyond any node's resources).
impl std::ops::Add for Exact {
    type Output = Exact;

    fn add(self, other: Exact) -> Exact {
        let exponent = self.exponent.min(other.exponent);
        let scaled = |q: Exact| {
            let shift = u32::try_from(q.exponent - exponent).unwrap_or(u32::MAX);
            q.mantissa.saturating_mul(10i128.saturating_pow(shift))
        };
        Exact {
            mantissa: scaled(self).saturating_add(scaled(other)),
            exponent,
            format: self.format,
        }
    }
}

/// `s` as kube-apiserver writes it back (`1000m` → `1`, `1024Ki` → `1Mi`, `0.5` →
/// `500m`); `None` when `s` is not a quantity.
pub fn canonical(s: &str) -> Option<String> {
    Some(Exact::parse(s)?.canonical())
}

/// `s` rounded up to milli-units, then canonical: what `SetDefaults_ResourceList` makes of
/// a resource list's values (`0.1m` → `1m`).
pub fn canonical_milli(s: &str) -> Option<String> {
    let mut exact = Exact::parse(s)?;
    exact.round_up(-3);
    Some(exact.canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|| panic!("{s} should parse"))
    }

    #[test]
    fn equal_values_in_different_spellings() {
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q(".5"), q("500m"));
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("1k"), q("1e3"));
        assert_eq!(q("1E-3"), q("1m"));
        assert_eq!(q("+2"), q("2"));
        assert!(q("1Mi") > q("1M"));
        assert!(q("-1") < Quantity::ZERO);
        assert!(!q("0").is_positive() && !q("0m").is_positive() && q("1n").is_positive());
        // Below 1n rounds up, like upstream.
        assert_eq!(q("0.1n"), q("1n"));
    }

    #[test]
    fn rejects_what_is_not_a_quantity() {
        for bad in [
            "", "-", "abc", "1..2", "1Ki2", "1e", "1x", "1 Gi", "e3", "1.2.3",
        ] {
            assert_eq!(Quantity::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn canonical_spellings_are_upstreams() {
        for (written, stored) in [
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("12000", "12k"),
            ("1024Ki", "1Mi"),
            ("1000Ki", "1000Ki"),
            ("1536", "1536"),
            ("1.5Ki", "1536"),
            ("512", "512"),
            ("0.5Gi", "512Mi"),
            ("100Mi", "100Mi"),
            ("1e3", "1e3"),
            ("1500e0", "1500"),
            ("3000e0", "3e3"),
            ("0", "0"),
            ("0m", "0"),
            ("-1000m", "-1"),
            ("1Gi", "1Gi"),
            ("24Gi", "24Gi"),
            ("0.1n", "1n"),
            ("2", "2"),
        ] {
            assert_eq!(canonical(written).as_deref(), Some(stored), "{written}");
        }
        assert_eq!(canonical_milli("0.1m").as_deref(), Some("1m"));
        assert_eq!(canonical_milli("1.0001").as_deref(), Some("1001m"));
        assert_eq!(canonical("x"), None);
    }

    #[test]
    fn sums_keep_the_first_terms_format() {
        let e = |s: &str| Exact::parse(s).unwrap();
        assert_eq!((e("64Mi") + e("64Mi")).canonical(), "128Mi");
        assert_eq!((e("100m") + e("0.2")).canonical(), "300m");
        assert_eq!((e("100M") + e("28Mi")).canonical(), "129360128");
        assert_eq!((e("1Gi") + e("1k")).canonical(), "1073742824");
        assert_eq!((e("500m") + e("500m")).canonical(), "1");
        assert_eq!((e("1e3") + e("2e3")).canonical(), "3e3");
        assert_eq!((e("1.5") + e("1n")).quantity(), q("1500000001n"));
        assert_eq!(Exact::from_milli(1500).canonical(), "1500m");
        assert_eq!(Exact::from_bytes(134_217_728).canonical(), "128Mi");
        assert_eq!(Exact::from_bytes(1000).canonical(), "1k");
    }
}
