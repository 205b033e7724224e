//! How a run labels its report: the date, the commit and the number format.

/// Formats a number with 3 significant digits and a k/M/G suffix from a thousand on:
/// `212345.0` → `212k`, `1234.0` → `1.23k`, `45.67` → `45.7`, `0.01234` → `0.0123`,
/// `0` → `0`.
/// Non-finite values are shown as `–`.
pub fn fmt_num(value: f64) -> String {
    if !value.is_finite() {
        return "–".to_owned();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    // Round to 3 significant digits first so that e.g. 999.7 becomes 1.00k, not 1000.
    let exponent = value.abs().log10().floor() as i32;
    let scale = 10f64.powi(exponent - 2);
    let rounded = (value / scale).round() * scale;
    let (mantissa, suffix) = match rounded.abs() {
        a if a >= 1e12 => return format!("{rounded:.2e}"),
        a if a >= 1e9 => (rounded / 1e9, "G"),
        a if a >= 1e6 => (rounded / 1e6, "M"),
        a if a >= 1e3 => (rounded / 1e3, "k"),
        _ => (rounded, ""),
    };
    let digits = mantissa.abs().log10().floor() as i32;
    let decimals = (2 - digits).max(0) as usize;
    format!("{mantissa:.decimals$}{suffix}")
}

/// Now (UTC) as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The commit the run was made at (`git rev-parse HEAD`), with `-dirty` when tracked files
/// differ from it; `unknown` outside a git checkout.
pub fn git_commit() -> String {
    let git = |a: &[&str]| {
        std::process::Command::new("git")
            .args(a)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let mut commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    if git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty()) {
        commit.push_str("-dirty");
    }
    commit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formatting() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(212_345.0), "212k");
        assert_eq!(fmt_num(1234.0), "1.23k");
        assert_eq!(fmt_num(999.7), "1.00k");
        assert_eq!(fmt_num(45.67), "45.7");
        assert_eq!(fmt_num(3.0), "3.00");
        assert_eq!(fmt_num(0.012_34), "0.0123");
        assert_eq!(fmt_num(-2_500_000.0), "-2.50M");
        assert_eq!(fmt_num(7.5e9), "7.50G");
        assert_eq!(fmt_num(f64::NAN), "–");
    }

    #[test]
    fn date_format() {
        let d = utc_now();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.ends_with('Z'), "{d}");
        assert_eq!(&d[4..5], "-");
        assert_eq!(&d[10..11], "T");
    }
}
