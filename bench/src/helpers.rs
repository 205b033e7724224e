//! Small pieces every part of weir-bench shares, each defined once: the descriptor limit,
//! number formatting, percentiles, the date and the git commit.

use std::io;

use crate::model::LATENCY_Q;

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
/// A round's p50/p99/p99.9 are taken with it from the round's raw samples ([`sorted`]); its
/// stored distribution ([`latency_distribution`]) is the same rule at each q of
/// [`LATENCY_Q`].
pub(crate) fn quantile_at(sorted: &[f64], q: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return 0.0;
    };
    let i = (q * last as f64).round() as usize;
    sorted[i.min(last)]
}

/// A sorted copy of `samples`, for [`quantile_at`]; `None` when there are none.
pub(crate) fn sorted(samples: &[f64]) -> Option<Vec<f64>> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    Some(v)
}

/// Sorts `samples` and returns their distribution as results.json stores it: the sample at
/// each quantile of [`LATENCY_Q`] ([`quantile_at`]), rounded by [`round_latency`]. Empty input
/// gives `None`.
pub(crate) fn latency_distribution(samples: &mut [f64]) -> Option<Vec<f64>> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(f64::total_cmp);
    Some(
        LATENCY_Q
            .iter()
            .map(|&q| round_latency(quantile_at(samples, q)))
            .collect(),
    )
}

/// A latency in µs rounded for storage: to 4 significant digits, and never finer than 0.01 µs
/// (`1052.37` → `1052`, `24.537` → `24.54`, `0.805` → `0.81`). A thousandth of the value is
/// below a pixel on any plot and far below the run-to-run spread. Non-finite values and 0
/// are kept as they are.
pub(crate) fn round_latency(us: f64) -> f64 {
    if !us.is_finite() || us == 0.0 {
        return us;
    }
    let decimals = (3 - us.abs().log10().floor() as i32).min(2);
    // An integer divided or multiplied by an exact power of ten: the nearest f64 to the
    // rounded decimal, which serializes as that decimal.
    if decimals >= 0 {
        let scale = 10f64.powi(decimals);
        (us * scale).round() / scale
    } else {
        let scale = 10f64.powi(-decimals);
        (us / scale).round() * scale
    }
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
    fn latency_distribution_points() {
        let mut v: Vec<f64> = (0..=1000).rev().map(f64::from).collect();
        let q = latency_distribution(&mut v).unwrap();
        assert_eq!(q.len(), LATENCY_Q.len());
        // Sample k of 0..=1000 sits at quantile k / 1000: every point is its own q.
        for (x, q) in q.iter().zip(LATENCY_Q) {
            assert_eq!(*x, (q * 1000.0).round(), "at q = {q}");
        }
        assert_eq!(q[100], 500.0);
        assert_eq!(q[198], 990.0);
        assert_eq!(q[207], 999.0);
        assert_eq!(q[208], 1000.0);
        assert_eq!(latency_distribution(&mut []), None);
        // The same points as the percentile definition on the raw samples.
        let raw: Vec<f64> = (0..3000).map(|i| f64::from(i % 977) * 1.37).collect();
        let s = sorted(&raw).unwrap();
        let d = latency_distribution(&mut raw.clone()).unwrap();
        for (x, &q) in d.iter().zip(&LATENCY_Q) {
            assert_eq!(*x, round_latency(quantile_at(&s, q)), "at q = {q}");
        }
        assert_eq!(sorted(&[]), None);
    }

    #[test]
    fn latency_rounding() {
        assert_eq!(round_latency(1052.37), 1052.0);
        assert_eq!(round_latency(24.537), 24.54);
        assert_eq!(round_latency(0.8051), 0.81);
        assert_eq!(round_latency(0.004), 0.0);
        assert_eq!(round_latency(123.45678), 123.5);
        assert_eq!(round_latency(12_345.6), 12_350.0);
        assert_eq!(round_latency(-4.5678), -4.57);
        assert_eq!(round_latency(0.0), 0.0);
        assert!(round_latency(f64::NAN).is_nan());
        // What serde_json writes is the short decimal.
        let json = serde_json::to_string(&[round_latency(24.537), round_latency(123.45678)]);
        assert_eq!(json.unwrap(), "[24.54,123.5]");
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
