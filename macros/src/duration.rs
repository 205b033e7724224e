//! Duration strings: an integer followed by a unit, such as `"200us"`.
//!
//! The grammar is deliberately small: `DIGITS UNIT`, where `DIGITS` is a decimal integer (digits,
//! optionally separated by `_`) and `UNIT` is one of `ns`, `us` (also `µs`/`μs`), `ms` or `s`.
//! The result is a number of nanoseconds that fits in a `u64` (what
//! `Duration::from_nanos` takes). Anything else is an error carrying enough detail to tell the
//! user what to write instead.

/// Accepted units and their length in nanoseconds. `µs` is the micro sign (U+00B5), `μs` the
/// Greek letter mu (U+03BC): both look the same, so both are accepted.
const UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
];

/// The units listed in error messages.
pub(crate) const UNIT_LIST: &str = "ns, us, ms, s";

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DurationError {
    /// The string does not start with a digit (empty, negative, a word, …).
    NoNumber,
    /// A number without a unit, such as `"200"`.
    MissingUnit,
    /// A number followed by something that is not a unit, such as `"200xs"`.
    UnknownUnit,
    /// A fraction such as `"1.5ms"`; `suggestion` is the same duration written as an integer
    /// in a smaller unit (`"1500us"`), when there is one.
    Fraction {
        /// The duration as an integer with a unit, if it can be written so.
        suggestion: Option<String>,
    },
    /// Whitespace inside the string, such as `"200 us"`; `suggestion` is the string without it,
    /// when that is a valid duration.
    Whitespace {
        /// The string without whitespace, if that parses.
        suggestion: Option<String>,
    },
    /// More nanoseconds than a `u64` holds (about 584 years).
    Overflow,
}

/// Parses `"200us"` into nanoseconds.
pub(crate) fn parse_duration(s: &str) -> Result<u64, DurationError> {
    if s.chars().any(char::is_whitespace) {
        let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let suggestion = parse_duration(&compact).ok().map(|_| compact);
        return Err(DurationError::Whitespace { suggestion });
    }
    let (int, rest) = split_digits(s);
    if int.is_empty() {
        return Err(DurationError::NoNumber);
    }
    if let Some(after_dot) = rest.strip_prefix('.') {
        let (frac, unit) = split_digits(after_dot);
        let suggestion = match (frac.is_empty(), unit_nanos(unit)) {
            (false, Some(per_unit)) => fraction_nanos(&int, &frac, per_unit).map(format_duration),
            _ => None,
        };
        return Err(DurationError::Fraction { suggestion });
    }
    if rest.is_empty() {
        return Err(DurationError::MissingUnit);
    }
    let per_unit = unit_nanos(rest).ok_or(DurationError::UnknownUnit)?;
    let value: u64 = int.parse().map_err(|_| DurationError::Overflow)?;
    value.checked_mul(per_unit).ok_or(DurationError::Overflow)
}

/// Writes `nanos` as an integer in the largest unit that divides it exactly: `1500000` is
/// `"1500us"`, `2000000000` is `"2s"`.
pub(crate) fn format_duration(nanos: u64) -> String {
    for (unit, per_unit) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if nanos != 0 && nanos.is_multiple_of(per_unit) {
            return format!("{}{unit}", nanos / per_unit);
        }
    }
    format!("{nanos}ns")
}

/// Splits off the leading digits (with `_` separators, which are dropped) from `s`.
fn split_digits(s: &str) -> (String, &str) {
    let mut digits = String::new();
    for (i, c) in s.char_indices() {
        match c {
            '0'..='9' => digits.push(c),
            '_' if !digits.is_empty() => {}
            _ => return (digits, &s[i..]),
        }
    }
    (digits, "")
}

fn unit_nanos(unit: &str) -> Option<u64> {
    UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|&(_, n)| n)
}

/// `int.frac` units in nanoseconds, if that is a whole number of nanoseconds fitting in a u64.
fn fraction_nanos(int: &str, frac: &str, per_unit: u64) -> Option<u64> {
    let int: u64 = int.parse().ok()?;
    let frac_digits = u32::try_from(frac.len()).ok()?;
    let scale = 10u128.checked_pow(frac_digits)?;
    let frac: u128 = frac.parse().ok()?;
    let frac_nanos = frac.checked_mul(u128::from(per_unit))?;
    if frac_nanos % scale != 0 {
        return None;
    }
    let total = u128::from(int) * u128::from(per_unit) + frac_nanos / scale;
    u64::try_from(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("50ns"), Ok(50));
        assert_eq!(parse_duration("200us"), Ok(200_000));
        assert_eq!(parse_duration("200\u{b5}s"), Ok(200_000));
        assert_eq!(parse_duration("200\u{3bc}s"), Ok(200_000));
        assert_eq!(parse_duration("1ms"), Ok(1_000_000));
        assert_eq!(parse_duration("2s"), Ok(2_000_000_000));
    }

    #[test]
    fn zero_and_separators() {
        assert_eq!(parse_duration("0us"), Ok(0));
        assert_eq!(parse_duration("0s"), Ok(0));
        assert_eq!(parse_duration("000ns"), Ok(0));
        assert_eq!(parse_duration("1_000us"), Ok(1_000_000));
        assert_eq!(parse_duration("_1us"), Err(DurationError::NoNumber));
    }

    #[test]
    fn limits() {
        assert_eq!(parse_duration("18446744073709551615ns"), Ok(u64::MAX));
        assert_eq!(
            parse_duration("18446744073709551616ns"),
            Err(DurationError::Overflow)
        );
        assert_eq!(
            parse_duration("18446744073s"),
            Ok(18_446_744_073_000_000_000)
        );
        assert_eq!(parse_duration("18446744074s"), Err(DurationError::Overflow));
        assert_eq!(
            parse_duration("99999999999999999999999999999999s"),
            Err(DurationError::Overflow)
        );
    }

    #[test]
    fn rejects() {
        assert_eq!(parse_duration(""), Err(DurationError::NoNumber));
        assert_eq!(parse_duration("us"), Err(DurationError::NoNumber));
        assert_eq!(parse_duration("-5us"), Err(DurationError::NoNumber));
        assert_eq!(parse_duration("+5us"), Err(DurationError::NoNumber));
        assert_eq!(parse_duration("200"), Err(DurationError::MissingUnit));
        assert_eq!(parse_duration("200xs"), Err(DurationError::UnknownUnit));
        assert_eq!(parse_duration("200US"), Err(DurationError::UnknownUnit));
        assert_eq!(parse_duration("200usec"), Err(DurationError::UnknownUnit));
        assert_eq!(parse_duration("200mss"), Err(DurationError::UnknownUnit));
        assert_eq!(parse_duration("1m"), Err(DurationError::UnknownUnit));
        assert_eq!(parse_duration("1e3ns"), Err(DurationError::UnknownUnit));
    }

    #[test]
    fn fractions() {
        let frac = |s: Option<&str>| DurationError::Fraction {
            suggestion: s.map(String::from),
        };
        assert_eq!(parse_duration("1.5ms"), Err(frac(Some("1500us"))));
        assert_eq!(parse_duration("0.5s"), Err(frac(Some("500ms"))));
        assert_eq!(parse_duration("2.0s"), Err(frac(Some("2s"))));
        assert_eq!(parse_duration("0.25us"), Err(frac(Some("250ns"))));
        // Below a nanosecond: no integer spelling.
        assert_eq!(parse_duration("1.5ns"), Err(frac(None)));
        assert_eq!(parse_duration("1.ms"), Err(frac(None)));
        assert_eq!(parse_duration("1.5"), Err(frac(None)));
        assert_eq!(parse_duration("1.5xs"), Err(frac(None)));
    }

    #[test]
    fn whitespace() {
        let ws = |s: Option<&str>| DurationError::Whitespace {
            suggestion: s.map(String::from),
        };
        assert_eq!(parse_duration("200 us"), Err(ws(Some("200us"))));
        assert_eq!(parse_duration(" 1ms "), Err(ws(Some("1ms"))));
        assert_eq!(parse_duration("200 xs"), Err(ws(None)));
    }

    #[test]
    fn format() {
        assert_eq!(format_duration(0), "0ns");
        assert_eq!(format_duration(7), "7ns");
        assert_eq!(format_duration(1_500), "1500ns");
        assert_eq!(format_duration(200_000), "200us");
        assert_eq!(format_duration(1_500_000), "1500us");
        assert_eq!(format_duration(1_000_000), "1ms");
        assert_eq!(format_duration(3_000_000_000), "3s");
        for s in ["50ns", "200us", "1ms", "2s", "1500us"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }
}
