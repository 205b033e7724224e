//! Small pieces every part of weir-bench shares, each defined once: the descriptor limit,
//! number formatting, percentiles, the date and the git commit.

use std::io;

use crate::model::QUANTILES;

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit (to the kernel's `fs.nr_open`
/// when the hard limit is unlimited, since no soft limit may exceed that) and returns the soft
/// limit now in force. A soft limit already at or above that target is left alone.
///
/// The orchestrator, every server child and the pipes child call it: the idle scenario holds
/// 10 000+ sockets, the pipes scenario 4 000 pipe ends.
pub(crate) fn raise_nofile_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let target = if lim.rlim_max == libc::RLIM_INFINITY {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1 << 20)
    } else {
        lim.rlim_max
    };
    if lim.rlim_cur >= target {
        return Ok(lim.rlim_cur);
    }
    let raised = libc::rlimit {
        rlim_cur: target,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: `raised` is a live, initialised rlimit whose soft limit does not exceed the hard
    // limit; setrlimit only reads it.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("setrlimit(RLIMIT_NOFILE, {target}): {e}"),
        ));
    }
    Ok(target)
}

/// Formats a number with 3 significant digits and a k/M/G suffix from a thousand on:
/// `212345.0` → `212k`, `1234.0` → `1.23k`, `45.67` → `45.7`, `0.01234` → `0.0123`,
/// `0` → `0`.
/// Non-finite values are shown as `–`.
pub(crate) fn fmt_num(value: f64) -> String {
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

/// The percentile of weir-bench, the only one: the value at quantile `q` (0..=1) of the
/// ascending `sorted` is the sample at index `round(q · (n − 1))`, i.e. the sample nearest to
/// the position that linear interpolation would use. `q = 0` is the minimum, `q = 1` the
/// maximum, `q = 0.5` of an even count the upper middle sample. 0 when `sorted` is empty.
///
/// It applies alike to raw samples and to a stored distribution from [`quantiles`]: the
/// points are themselves sorted samples, so `quantile_at(&quantiles(v)?, q)` picks the stored
/// point nearest to `q`.
pub(crate) fn quantile_at(sorted: &[f64], q: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return 0.0;
    };
    let i = (q * last as f64).round() as usize;
    sorted[i.min(last)]
}

/// Sorts `samples` and returns their distribution as [`QUANTILES`] points, the point `i` being
/// [`quantile_at`] `i / (QUANTILES − 1)`. Empty input gives `None`.
pub(crate) fn quantiles(samples: &mut [f64]) -> Option<Vec<f64>> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(f64::total_cmp);
    Some(
        (0..QUANTILES)
            .map(|i| quantile_at(samples, i as f64 / (QUANTILES - 1) as f64))
            .collect(),
    )
}

/// Now (UTC) as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    utc_date(secs)
}

/// Seconds since 1970-01-01 UTC as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_date(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm, written out).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The commit the run was made at (`git rev-parse HEAD`), with `-dirty` when tracked files
/// differ from it; `unknown` outside a git checkout.
pub(crate) fn git_commit() -> String {
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
    fn percentile_definition() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        // Index round(q · 99): 0.5 → 49.5 → 50 (the upper middle), 0.99 → 98.01 → 98.
        assert_eq!(quantile_at(&v, 0.5), 51.0);
        assert_eq!(quantile_at(&v, 0.99), 99.0);
        assert_eq!(quantile_at(&v, 1.0), 100.0);
        assert_eq!(quantile_at(&v, 0.0), 1.0);
        assert_eq!(quantile_at(&[7.0], 0.99), 7.0);
        assert_eq!(quantile_at(&[], 0.5), 0.0);
    }

    #[test]
    fn quantile_points() {
        let mut v: Vec<f64> = (0..=1000).rev().map(f64::from).collect();
        let q = quantiles(&mut v).unwrap();
        assert_eq!(q.len(), QUANTILES);
        assert_eq!(quantile_at(&q, 0.5), 500.0);
        assert_eq!(quantile_at(&q, 0.99), 990.0);
        assert_eq!(quantile_at(&q, 1.0), 1000.0);
        assert_eq!(quantiles(&mut []), None);
    }

    #[test]
    fn date_format() {
        let d = utc_now();
        assert_eq!(d.len(), 20);
        assert!(d.ends_with('Z'));
        assert_eq!(utc_date(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 12:34:56 UTC: a leap day of a century divisible by 400.
        assert_eq!(utc_date(951_827_696), "2000-02-29T12:34:56Z");
        assert_eq!(utc_date(-1), "1969-12-31T23:59:59Z");
    }
}
