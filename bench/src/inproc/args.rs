//! Command-line flags shared by the in-process benchmarks.
//!
//! Every mode accepts `--rt`, `--flavor` and `--quick`; each adds its own value flags (e.g.
//! `--pipes N`). Values are given as `--flag VALUE` or `--flag=VALUE`. Unknown flags, missing
//! values, repeated flags and stray arguments are errors.

use std::fmt;

use crate::error::Error;

/// Which contender runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rt {
    /// weir, with tasks on `weir::io::unix::AsyncFd` / `weir::time`.
    Weir,
    /// tokio, with tasks on `tokio::io::unix::AsyncFd` / `tokio::time`.
    Tokio,
    /// One thread with a hand-written edge-triggered epoll loop.
    RawEpoll,
    /// One thread looping over nonblocking reads, no epoll.
    BusyLoop,
}

impl fmt::Display for Rt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rt::Weir => "weir",
            Rt::Tokio => "tokio",
            Rt::RawEpoll => "raw-epoll",
            Rt::BusyLoop => "busy-loop",
        })
    }
}

/// Runtime flavour of weir and tokio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// Multi-thread, 2 workers.
    Mt,
    /// Current-thread: everything on the thread calling `block_on`.
    Ct,
}

/// Parsed flags of one mode.
#[derive(Debug)]
pub(crate) struct Args {
    /// `--rt` (required).
    pub(crate) rt: Rt,
    /// `--flavor` (default `mt`).
    pub(crate) flavor: Flavor,
    /// `--quick`.
    pub(crate) quick: bool,
    /// The mode's value flags that were given, as (flag, raw value).
    values: Vec<(&'static str, String)>,
}

/// Parses `args`; `value_flags` are the mode's own flags that take a value (each with its
/// leading `--`).
pub(crate) fn parse(args: &[String], value_flags: &[&'static str]) -> Result<Args, Error> {
    let mut rt = None;
    let mut flavor = None;
    let mut quick = false;
    let mut values: Vec<(&'static str, String)> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        if name == "--quick" {
            if inline.is_some() {
                return Err(Error::usage("--quick takes no value"));
            }
            if quick {
                return Err(Error::usage("--quick given twice"));
            }
            quick = true;
            continue;
        }
        let known = ["--rt", "--flavor"]
            .iter()
            .chain(value_flags)
            .find(|&&f| f == name)
            .copied();
        let Some(flag) = known else {
            return Err(Error::usage(format!(
                "unknown argument `{arg}` (expected --rt, --flavor, --quick{})",
                value_flags
                    .iter()
                    .map(|f| format!(", {f}"))
                    .collect::<String>()
            )));
        };
        let value = match inline {
            Some(v) => v,
            None => it
                .next()
                .cloned()
                .ok_or_else(|| Error::usage(format!("{flag} needs a value")))?,
        };
        match flag {
            "--rt" => {
                if rt.is_some() {
                    return Err(Error::usage("--rt given twice"));
                }
                rt = Some(parse_rt(&value)?);
            }
            "--flavor" => {
                if flavor.is_some() {
                    return Err(Error::usage("--flavor given twice"));
                }
                flavor = Some(match value.as_str() {
                    "mt" => Flavor::Mt,
                    "ct" => Flavor::Ct,
                    other => {
                        return Err(Error::usage(format!(
                            "--flavor must be mt or ct, not `{other}`"
                        )));
                    }
                });
            }
            _ => {
                if values.iter().any(|(f, _)| *f == flag) {
                    return Err(Error::usage(format!("{flag} given twice")));
                }
                values.push((flag, value));
            }
        }
    }
    let rt = rt.ok_or_else(|| Error::usage("--rt weir|tokio|raw-epoll|busy-loop is required"))?;
    Ok(Args {
        rt,
        flavor: flavor.unwrap_or(Flavor::Mt),
        quick,
        values,
    })
}

fn parse_rt(s: &str) -> Result<Rt, Error> {
    match s {
        "weir" => Ok(Rt::Weir),
        "tokio" => Ok(Rt::Tokio),
        "raw-epoll" => Ok(Rt::RawEpoll),
        "busy-loop" => Ok(Rt::BusyLoop),
        other => Err(Error::usage(format!(
            "--rt must be weir, tokio, raw-epoll or busy-loop, not `{other}`"
        ))),
    }
}

impl Args {
    /// `flag`'s raw value, if given.
    pub(crate) fn raw(&self, flag: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(f, _)| *f == flag)
            .map(|(_, v)| v.as_str())
    }

    /// `flag` as a positive, finite number of seconds (or any positive factor); `default` if
    /// absent.
    pub(crate) fn positive_f64(&self, flag: &str, default: f64) -> Result<f64, Error> {
        match self.raw(flag) {
            None => Ok(default),
            Some(v) => match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => Err(Error::usage(format!(
                    "{flag} must be a positive number, not `{v}`"
                ))),
            },
        }
    }

    /// `flag` as an integer of at least 1; `default` if absent.
    pub(crate) fn positive_usize(&self, flag: &str, default: usize) -> Result<usize, Error> {
        match self.raw(flag) {
            None => Ok(default),
            Some(v) => match v.parse::<usize>() {
                Ok(x) if x >= 1 => Ok(x),
                _ => Err(Error::usage(format!(
                    "{flag} must be an integer >= 1, not `{v}`"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn defaults_and_forms() {
        let a = parse(&s(&["--rt", "weir", "--pipes=10", "--quick"]), &["--pipes"]).unwrap();
        assert_eq!(a.rt, Rt::Weir);
        assert_eq!(a.flavor, Flavor::Mt);
        assert!(a.quick);
        assert_eq!(a.positive_usize("--pipes", 5).unwrap(), 10);
        assert_eq!(a.positive_f64("--secs", 3.0).unwrap(), 3.0);

        let a = parse(
            &s(&["--flavor", "ct", "--rt=busy-loop", "--secs", "0.5"]),
            &["--secs"],
        )
        .unwrap();
        assert_eq!(a.rt, Rt::BusyLoop);
        assert_eq!(a.flavor, Flavor::Ct);
        assert!(!a.quick);
        assert_eq!(a.positive_f64("--secs", 3.0).unwrap(), 0.5);
    }

    #[test]
    fn rejects_bad_input() {
        let bad: &[&[&str]] = &[
            &[],
            &["--rt", "glommio"],
            &["--rt", "weir", "--bogus"],
            &["--rt", "weir", "--pipes"],
            &["--rt", "weir", "--rt", "tokio"],
            &["--rt", "weir", "--flavor", "st"],
            &["--rt", "weir", "--quick=1"],
            &["--rt", "weir", "--quick", "--quick"],
            &["--rt", "weir", "--pipes", "1", "--pipes", "2"],
            &["--rt", "weir", "stray"],
        ];
        for b in bad {
            let r = parse(&s(b), &["--pipes"]);
            assert!(matches!(r, Err(Error::Usage(_))), "{b:?}: {r:?}");
        }
        fn usage<T>(r: Result<T, Error>) -> bool {
            matches!(r, Err(Error::Usage(_)))
        }
        let a = parse(&s(&["--rt", "tokio", "--pipes", "0"]), &["--pipes"]).unwrap();
        assert!(usage(a.positive_usize("--pipes", 1)));
        let a = parse(&s(&["--rt", "tokio", "--secs", "-1"]), &["--secs"]).unwrap();
        assert!(usage(a.positive_f64("--secs", 1.0)));
        let a = parse(&s(&["--rt", "tokio", "--secs", "inf"]), &["--secs"]).unwrap();
        assert!(usage(a.positive_f64("--secs", 1.0)));
        assert_eq!(
            a.positive_f64("--secs", 1.0).unwrap_err().to_string(),
            "--secs must be a positive number, not `inf`"
        );
    }
}
