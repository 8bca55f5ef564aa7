//! Resource quantities (`resource.Quantity`): parsed exactly enough to compare them, as
//! the pod QoS class needs (`1` equals `1000m`, `1Gi` equals `1073741824`).

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

    /// Parses `<sign>?<digits>[.<digits>]<suffix>` with a binary (`Ki`…`Ei`), decimal
    /// (`n`, `u`, `m`, `k`, `M`…`E`) or exponent (`e3`, `E-2`) suffix; `None` when `s` is
    /// not a quantity.
    pub fn parse(s: &str) -> Option<Quantity> {
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
        let (pow10, pow2) = match suffix {
            "" => (0, 0),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            exponent => {
                let digits = exponent.strip_prefix(['e', 'E'])?;
                let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
                if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                (digits.parse::<i32>().ok()?, 0)
            }
        };
        // The digits as one integer, scaled to nano-units: value = digits × 10^(exp).
        let mut value: i128 = 0;
        for b in whole.bytes().chain(fraction.bytes()) {
            value = value
                .saturating_mul(10)
                .saturating_add(i128::from(b - b'0'));
        }
        let exp = 9i32
            .saturating_add(pow10)
            .saturating_sub(i32::try_from(fraction.len()).ok()?);
        if exp >= 0 {
            value = value.saturating_mul(10i128.saturating_pow(exp as u32));
        } else {
            let divisor = 10i128.checked_pow(exp.unsigned_abs()).unwrap_or(i128::MAX);
            value = value / divisor + i128::from(value % divisor != 0);
        }
        value = value.saturating_mul(1i128 << pow2);
        Some(Quantity(if negative { -value } else { value }))
    }

    /// Whether the quantity is above zero.
    pub fn is_positive(self) -> bool {
        self.cmp(&Quantity::ZERO) == Ordering::Greater
    }

    /// The sum, saturating.
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity(self.0.saturating_add(other.0))
    }
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
}
