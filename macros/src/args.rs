//! Parsing and checking the arguments of `#[weir::main(...)]` and `#[weir::test(...)]`.
//!
//! One idea: the attributes' arguments — the table of names, how each value parses, and the
//! error each mistake gets — in one file (its last two hundred lines are the unit tests).
//!
//! The arguments are `name = value` pairs separated by commas. Every problem becomes a
//! `syn::Error` at the offending token; parsing carries on after an error so that all problems
//! are reported at once, and the settings that were valid are still returned (the caller expands
//! the function with them, which keeps follow-up errors out of the user's way).

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, ExprLit, ExprUnary, Lit, LitStr, Path, UnOp};

use weir_config::MAX_WORKERS;

use crate::duration::{self, DurationError, UNIT_LIST};

/// Which macro is being expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Main,
    Test,
}

impl Kind {
    /// The attribute as users write it, for messages.
    pub(crate) fn attr(self) -> &'static str {
        match self {
            Kind::Main => "#[weir::main]",
            Kind::Test => "#[weir::test]",
        }
    }
}

// The flavours, the backends and the limits are the runtime's own definitions (`weir-config`).
pub(crate) use weir_config::Flavor;
weir_config::define_backend!(pub(crate));

/// One accepted setting: its value and where it was written.
#[derive(Clone)]
pub(crate) struct Setting<T> {
    pub(crate) value: T,
    /// The argument's name (`workers`).
    pub(crate) name_span: Span,
    /// The value's first token (`4`, `"200us"`).
    pub(crate) value_span: Span,
    /// The value as written, for messages (`"200us"`).
    pub(crate) text: String,
}

/// The settings given in the attribute; `None` where not given (or given wrongly).
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) workers: Option<Setting<usize>>,
    pub(crate) flavor: Option<Setting<Flavor>>,
    pub(crate) name: Option<Setting<LitStr>>,
    pub(crate) min_wait: Option<Setting<u64>>,
    pub(crate) min_wait_adaptive: Option<Setting<u64>>,
    pub(crate) busy_poll: Option<Setting<u64>>,
    pub(crate) backend: Option<Setting<Backend>>,
    pub(crate) tokio_compat: Option<Setting<bool>>,
    pub(crate) start_paused: Option<Setting<bool>>,
    pub(crate) krate: Option<Setting<Path>>,
}

/// Accumulated errors, reported together.
#[derive(Debug, Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, message: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    pub(crate) fn to_compile_errors(&self) -> TokenStream {
        self.0
            .as_ref()
            .map(syn::Error::to_compile_error)
            .unwrap_or_default()
    }
}

/// The accepted arguments, with the example shown in messages about them.
const ARGUMENTS: &[(&str, &str)] = &[
    ("workers", "workers = 4"),
    ("flavor", "flavor = \"multi_thread\""),
    ("name", "name = \"my-runtime\""),
    ("min_wait", "min_wait = \"200us\""),
    ("min_wait_adaptive", "min_wait_adaptive = \"200us\""),
    ("busy_poll", "busy_poll = \"50us\""),
    ("backend", "backend = \"epoll\""),
    ("tokio_compat", "tokio_compat = true"),
    ("start_paused", "start_paused = true"),
    ("crate", "crate = \"::weir\""),
];

/// Other spellings accepted for an argument: tokio's names, so that a tokio attribute ports
/// unchanged.
const SYNONYMS: &[(&str, &str)] = &[("worker_threads", "workers")];

/// Names users may reach for, mapped to the argument they mean.
const ALIASES: &[(&str, &str)] = &[
    ("threads", "workers"),
    ("num_workers", "workers"),
    ("flavour", "flavor"),
    ("runtime", "flavor"),
    ("min_wait_max", "min_wait_adaptive"),
    ("adaptive_min_wait", "min_wait_adaptive"),
    ("busy_wait", "busy_poll"),
    ("spin", "busy_poll"),
    ("reactor", "backend"),
    ("tokio", "tokio_compat"),
    ("compat", "tokio_compat"),
    ("paused", "start_paused"),
    ("pause", "start_paused"),
    ("pause_time", "start_paused"),
    ("weir", "crate"),
];

/// The accepted `flavor` values.
fn flavors() -> Vec<(&'static str, Flavor)> {
    Flavor::ALL.iter().map(|&f| (f.name(), f)).collect()
}

/// The accepted `backend` values.
fn backends() -> Vec<(&'static str, Backend)> {
    Backend::ALL.iter().map(|&b| (b.name(), b)).collect()
}

fn accepted_arguments() -> String {
    let names: Vec<&str> = ARGUMENTS.iter().map(|&(name, _)| name).collect();
    names.join(", ")
}

fn example(name: &str) -> &'static str {
    ARGUMENTS
        .iter()
        .find(|&&(n, _)| n == name)
        .map_or("", |&(_, example)| example)
}

fn accepted_values<T>(values: &[(&str, T)]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|(name, _)| format!("\"{name}\""))
        .collect();
    quoted.join(", ")
}

/// Parses the attribute's arguments. Problems go to `errors`; the valid settings are returned.
pub(crate) fn parse(kind: Kind, tokens: TokenStream, errors: &mut Errors) -> Args {
    let mut args = Args::default();
    let mut seen = Vec::new();
    for segment in split_commas(tokens, errors) {
        parse_argument(&segment, &mut args, &mut seen, errors);
    }
    check_combinations(kind, &args, &seen, errors);
    args
}

/// Splits the tokens at top-level commas. Empty arguments (`a = 1,, b = 2`) are reported; one
/// trailing comma is fine.
fn split_commas(tokens: TokenStream, errors: &mut Errors) -> Vec<Vec<TokenTree>> {
    let mut segments = Vec::new();
    let mut current = Vec::new();
    for tt in tokens {
        match &tt {
            TokenTree::Punct(p) if p.as_char() == ',' => {
                if current.is_empty() {
                    errors.at(p.span(), "unexpected `,`: expected an argument before it");
                } else {
                    segments.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(tt),
        }
    }
    if !current.is_empty() {
        segments.push(current);
    }
    segments
}

/// Parses one `name = value` argument.
fn parse_argument(
    segment: &[TokenTree],
    args: &mut Args,
    seen: &mut Vec<&'static str>,
    errors: &mut Errors,
) {
    let all: TokenStream = segment.iter().cloned().collect();
    let name_ident = match &segment[0] {
        TokenTree::Ident(ident) => ident.clone(),
        TokenTree::Literal(lit) if is_flavor_string(&lit.to_string()) => {
            let flavor = lit.to_string();
            errors.spanned(
                &all,
                format!("expected `name = value`; to choose the runtime flavor write `flavor = {flavor}`"),
            );
            return;
        }
        _ => {
            errors.spanned(
                &all,
                format!(
                    "expected an argument of the form `name = value`, such as `workers = 4`; \
                     accepted arguments: {}",
                    accepted_arguments()
                ),
            );
            return;
        }
    };
    let name_span = name_ident.span();
    let name_text = name_ident.to_string();
    let canonical = SYNONYMS
        .iter()
        .find(|&&(synonym, _)| synonym == name_text)
        .map_or(name_text.as_str(), |&(_, name)| name);
    let Some(&(name, _)) = ARGUMENTS.iter().find(|&&(n, _)| n == canonical) else {
        errors.at(name_span, unknown_argument(&name_text));
        return;
    };

    // `= value`
    let rest = &segment[1..];
    let value_tokens = match rest.first() {
        None => {
            errors.at(
                name_span,
                format!("missing value for `{name}`: write `{}`", example(name)),
            );
            return;
        }
        Some(TokenTree::Punct(p)) if p.as_char() == '=' => &rest[1..],
        Some(other) => {
            errors.at(
                other.span(),
                format!("expected `=` after `{name}`: write `{}`", example(name)),
            );
            return;
        }
    };
    if value_tokens.is_empty() {
        errors.at(
            rest[0].span(),
            format!("missing value after `{name} =`: write `{}`", example(name)),
        );
        return;
    }
    if seen.contains(&name) {
        let same = if name_text == name {
            String::new()
        } else {
            format!(" (`{name_text}` is another name for it)")
        };
        errors.at(
            name_span,
            format!("duplicate argument `{name}`{same}: each argument may be given only once"),
        );
        return;
    }
    seen.push(name);
    let value_stream: TokenStream = value_tokens.iter().cloned().collect();
    let parse_value = |input: ParseStream<'_>| {
        let value: Expr = input.parse()?;
        let rest: TokenStream = input.parse()?;
        Ok((value, rest))
    };
    let (value, rest) = match parse_value.parse2(value_stream.clone()) {
        Ok(parsed) => parsed,
        Err(_) => {
            errors.spanned(
                &value_stream,
                format!(
                    "invalid value for `{name}`: expected a literal, as in `{}`",
                    example(name)
                ),
            );
            return;
        }
    };
    // `workers = 2 flavor = "multi_thread"`: report the missing comma, then carry on with the
    // next argument.
    let rest: Vec<TokenTree> = rest.into_iter().collect();
    if let Some(next) = rest.first() {
        errors.at(
            next.span(),
            format!("expected `,` before `{next}`: separate the arguments with commas"),
        );
    }
    let value = strip_groups(value);
    match name {
        "workers" => args.workers = parse_workers(&value, name_span, errors),
        "flavor" => {
            args.flavor = parse_choice(name, &flavors(), &value, name_span, errors);
        }
        "name" => args.name = parse_name(&value, name_span, errors),
        "min_wait" => args.min_wait = parse_duration_arg(name, &value, name_span, errors),
        "min_wait_adaptive" => {
            args.min_wait_adaptive = parse_duration_arg(name, &value, name_span, errors);
        }
        "busy_poll" => args.busy_poll = parse_duration_arg(name, &value, name_span, errors),
        "backend" => {
            args.backend = parse_choice(name, &backends(), &value, name_span, errors);
        }
        "tokio_compat" => args.tokio_compat = parse_bool(name, &value, name_span, errors),
        "start_paused" => args.start_paused = parse_bool(name, &value, name_span, errors),
        "crate" => args.krate = parse_crate(&value, name_span, errors),
        _ => unreachable!("argument `{name}` is listed but not handled"),
    }
    if !rest.is_empty() {
        parse_argument(&rest, args, seen, errors);
    }
}

fn is_flavor_string(literal: &str) -> bool {
    flavors()
        .iter()
        .any(|(name, _)| literal == format!("\"{name}\""))
}

/// The message for an unknown argument, with a suggestion when the name is close to one.
fn unknown_argument(name: &str) -> String {
    let mut message = format!(
        "unknown argument `{name}`; accepted arguments: {}",
        accepted_arguments()
    );
    if let Some((flavor, _)) = flavors().iter().find(|(f, _)| *f == name) {
        message.push_str(&format!(
            "; to choose the runtime flavor write `flavor = \"{flavor}\"`"
        ));
    } else if let Some(suggestion) = suggest(name) {
        message.push_str(&format!(
            "; did you mean `{suggestion}`? e.g. `{}`",
            example(suggestion)
        ));
    }
    message
}

/// An accepted argument that `name` probably means: an alias, or a name within a small edit
/// distance.
fn suggest(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if let Some(&(_, target)) = ALIASES.iter().find(|&&(alias, _)| alias == lower) {
        return Some(target);
    }
    ARGUMENTS
        .iter()
        .map(|&(candidate, _)| (edit_distance(&lower, candidate), candidate))
        .filter(|&(distance, candidate)| distance <= (candidate.len() / 3).max(1))
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance between two strings.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// Removes invisible groups (from `macro_rules!` fragments such as `$n:literal`) and parens.
fn strip_groups(value: Expr) -> Expr {
    match value {
        Expr::Group(group) => strip_groups(*group.expr),
        Expr::Paren(paren) => strip_groups(*paren.expr),
        other => other,
    }
}

fn value_text(value: &Expr) -> String {
    match value {
        Expr::Lit(ExprLit { lit, .. }) => lit.to_token_stream().to_string(),
        other => format!("`{}`", other.to_token_stream()),
    }
}

fn first_span(value: &Expr) -> Span {
    value
        .to_token_stream()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |tt| tt.span())
}

fn setting<T>(value: T, name_span: Span, expr: &Expr) -> Option<Setting<T>> {
    Some(Setting {
        value,
        name_span,
        value_span: first_span(expr),
        text: value_text(expr),
    })
}

fn parse_workers(value: &Expr, name_span: Span, errors: &mut Errors) -> Option<Setting<usize>> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) => match int.base10_parse::<usize>() {
            Ok(0) => {
                errors.spanned(
                    value,
                    "`workers` must be at least 1 (it is the number of worker threads)",
                );
                None
            }
            Ok(n) => setting(n, name_span, value),
            Err(_) => {
                errors.spanned(
                    value,
                    format!(
                        "invalid value for `workers`: {int} is too large; \
                         at most weir::runtime::MAX_WORKERS ({MAX_WORKERS}) workers are supported"
                    ),
                );
                None
            }
        },
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_), ..
        }) => {
            errors.spanned(
                value,
                "`workers` must be at least 1 (it is the number of worker threads)",
            );
            None
        }
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => {
            let hint = match s.value().trim().parse::<usize>() {
                Ok(n) => format!("write `workers = {n}` without quotes"),
                Err(_) => "write, for example, `workers = 4`".to_string(),
            };
            errors.spanned(
                value,
                format!(
                    "invalid value for `workers`: {}; expected an integer literal: {hint}",
                    value_text(value)
                ),
            );
            None
        }
        _ => {
            errors.spanned(
                value,
                format!(
                    "invalid value for `workers`: {}; expected an integer literal such as \
                     `workers = 4` (constants and expressions are not supported)",
                    value_text(value)
                ),
            );
            None
        }
    }
}

/// A string value from a fixed list (`flavor`, `backend`).
fn parse_choice<T: Copy>(
    name: &str,
    choices: &[(&str, T)],
    value: &Expr,
    name_span: Span,
    errors: &mut Errors,
) -> Option<Setting<T>> {
    let accepted = accepted_values(choices);
    if let Expr::Lit(ExprLit {
        lit: Lit::Str(s), ..
    }) = value
    {
        let text = s.value();
        if let Some(&(_, choice)) = choices.iter().find(|(c, _)| *c == text) {
            return setting(choice, name_span, value);
        }
        let mut message =
            format!("invalid value for `{name}`: {text:?}; accepted values: {accepted}");
        // "multi-thread", "MultiThread", "Mio", ...
        let normalized = text.to_ascii_lowercase().replace(['-', ' '], "_");
        if let Some((close, _)) = choices
            .iter()
            .find(|(c, _)| *c == normalized || c.replace('_', "") == normalized)
        {
            message.push_str(&format!("; did you mean `{name} = \"{close}\"`?"));
        }
        errors.spanned(value, message);
        return None;
    }
    let mut message = format!(
        "invalid value for `{name}`: {}; expected a string literal; accepted values: {accepted}",
        value_text(value)
    );
    let written = value.to_token_stream().to_string();
    if let Some((close, _)) = choices.iter().find(|(c, _)| *c == written) {
        message.push_str(&format!("; add quotes: `{name} = \"{close}\"`"));
    }
    errors.spanned(value, message);
    None
}

fn parse_duration_arg(
    name: &str,
    value: &Expr,
    name_span: Span,
    errors: &mut Errors,
) -> Option<Setting<u64>> {
    let example_value = example(name).rsplit(' ').next().unwrap_or("\"200us\"");
    let Expr::Lit(ExprLit {
        lit: Lit::Str(s), ..
    }) = value
    else {
        let mut message = format!(
            "invalid value for `{name}`: {}; expected a duration string such as {example_value} \
             (units: {UNIT_LIST})",
            value_text(value)
        );
        if let Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) = value
        {
            message.push_str(&format!(
                "; add a unit and quotes, e.g. `{name} = \"{}us\"`",
                int.base10_digits()
            ));
        }
        errors.spanned(value, message);
        return None;
    };
    let text = s.value();
    let problem = match duration::parse_duration(&text) {
        Ok(nanos) => return setting(nanos, name_span, value),
        Err(DurationError::NoNumber | DurationError::UnknownUnit) => {
            format!("expected a duration such as {example_value} (units: {UNIT_LIST})")
        }
        Err(DurationError::MissingUnit) => {
            format!("the unit is missing: write \"{text}us\", \"{text}ms\", … (units: {UNIT_LIST})")
        }
        Err(DurationError::Fraction {
            suggestion: Some(s),
        }) => {
            format!("fractions are not supported; write {s:?} instead")
        }
        Err(DurationError::Fraction { suggestion: None }) => format!(
            "fractions are not supported; write a whole number of a smaller unit \
             (units: {UNIT_LIST})"
        ),
        Err(DurationError::Whitespace {
            suggestion: Some(s),
        }) => {
            format!("remove the whitespace: write {s:?}")
        }
        Err(DurationError::Whitespace { suggestion: None }) => format!(
            "expected a duration without whitespace, such as {example_value} (units: {UNIT_LIST})"
        ),
        Err(DurationError::Overflow) => format!(
            "the duration is too large (at most {}ns, about 584 years)",
            u64::MAX
        ),
    };
    errors.spanned(
        value,
        format!("invalid value for `{name}`: {text:?}; {problem}"),
    );
    None
}

/// The runtime's name: a non-empty string literal.
fn parse_name(value: &Expr, name_span: Span, errors: &mut Errors) -> Option<Setting<LitStr>> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) if !s.value().trim().is_empty() => setting(s.clone(), name_span, value),
        Expr::Lit(ExprLit {
            lit: Lit::Str(_), ..
        }) => {
            errors.spanned(
                value,
                "invalid value for `name`: the runtime's name must not be empty",
            );
            None
        }
        _ => {
            errors.spanned(
                value,
                format!(
                    "invalid value for `name`: {}; expected a string literal such as \
                     `name = \"my-runtime\"`",
                    value_text(value)
                ),
            );
            None
        }
    }
}

/// A `true`/`false` literal (`tokio_compat`, `start_paused`).
fn parse_bool(
    name: &str,
    value: &Expr,
    name_span: Span,
    errors: &mut Errors,
) -> Option<Setting<bool>> {
    if let Expr::Lit(ExprLit {
        lit: Lit::Bool(b), ..
    }) = value
    {
        return setting(b.value, name_span, value);
    }
    let hint = match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) if matches!(s.value().trim(), "true" | "false") => {
            format!("write `{name} = {}` without quotes", s.value().trim())
        }
        _ => format!("write `{name} = true` or `{name} = false`"),
    };
    errors.spanned(
        value,
        format!(
            "invalid value for `{name}`: {}; expected `true` or `false`: {hint}",
            value_text(value)
        ),
    );
    None
}

fn parse_crate(value: &Expr, name_span: Span, errors: &mut Errors) -> Option<Setting<Path>> {
    let message = |shown: String| {
        format!(
            "invalid value for `crate`: {shown}; expected a string literal holding the path of \
             the weir crate, such as `crate = \"::weir\"` or `crate = \"my_crate::weir\"`"
        )
    };
    let Expr::Lit(ExprLit {
        lit: Lit::Str(s), ..
    }) = value
    else {
        errors.spanned(value, message(value_text(value)));
        return None;
    };
    match parse_path(s) {
        Some(path) => setting(path, name_span, value),
        None => {
            errors.spanned(value, message(format!("{:?}", s.value())));
            None
        }
    }
}

/// Parses the path inside a string literal; its tokens get the literal's span, so resolution
/// errors point at the string.
fn parse_path(s: &LitStr) -> Option<Path> {
    let path: Path = s.parse().ok()?;
    // `crate = "weir<T>"` and friends: only plain paths make sense.
    let plain = path
        .segments
        .iter()
        .all(|segment| segment.arguments.is_none());
    plain.then_some(path)
}

/// Checks that depend on more than one argument.
/// `seen` lists the argument names in the order they were written.
fn check_combinations(kind: Kind, args: &Args, seen: &[&str], errors: &mut Errors) {
    if let (Some(fixed), Some(adaptive)) = (&args.min_wait, &args.min_wait_adaptive) {
        // Point at whichever came second.
        let position = |name| seen.iter().position(|&n| n == name);
        let later = if position("min_wait_adaptive") > position("min_wait") {
            adaptive.name_span
        } else {
            fixed.name_span
        };
        errors.at(
            later,
            "`min_wait` and `min_wait_adaptive` cannot both be set: `min_wait` sets a fixed \
             window, `min_wait_adaptive` the largest window of an adaptive one; keep one of them",
        );
    }
    if let Some(adaptive) = &args.min_wait_adaptive
        && adaptive.value == 0
    {
        errors.at(
            adaptive.value_span,
            format!(
                "invalid value for `min_wait_adaptive`: {}; the largest adaptive window must be \
                 greater than zero (to turn min_wait off, leave both `min_wait` and \
                 `min_wait_adaptive` out)",
                adaptive.text
            ),
        );
    }
    if let Some(paused) = &args.start_paused
        && paused.value
    {
        let flavor = args.flavor.as_ref().map(|s| s.value);
        match (flavor, kind) {
            (Some(Flavor::MultiThread), _) => errors.at(
                paused.name_span,
                "`start_paused` needs `flavor = \"current_thread\"`: only a current-thread \
                 runtime's clock can be paused (each worker of a multi-thread runtime keeps its \
                 own clock); remove `flavor = \"multi_thread\"` or `start_paused`",
            ),
            (None, Kind::Main) => errors.at(
                paused.name_span,
                format!(
                    "`start_paused` needs `flavor = \"current_thread\"`: {} uses a multi-thread \
                     runtime by default, whose clock cannot be paused; write \
                     `#[weir::main(flavor = \"current_thread\", start_paused = true)]`",
                    Kind::Main.attr()
                ),
            ),
            _ => {}
        }
    }
    if let Some(workers) = &args.workers {
        match (&args.flavor, kind) {
            (
                Some(Setting {
                    value: Flavor::CurrentThread,
                    ..
                }),
                _,
            ) => errors.at(
                workers.name_span,
                "`workers` cannot be used with `flavor = \"current_thread\"`: a current-thread \
                 runtime runs everything on the calling thread; use `flavor = \"multi_thread\"` \
                 or remove `workers`",
            ),
            (None, Kind::Test) => errors.at(
                workers.name_span,
                format!(
                    "`workers` requires `flavor = \"multi_thread\"`: {} uses a current-thread \
                     runtime by default; write `#[weir::test(flavor = \"multi_thread\", workers \
                     = {})]`",
                    Kind::Test.attr(),
                    workers.value
                ),
            ),
            _ => {}
        }
    }
}

/// Renders a path for messages, without a leading `::` (`weir`, `my_crate::weir`).
pub(crate) fn path_text(path: &Path) -> String {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    segments.join("::")
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn messages(kind: Kind, tokens: TokenStream) -> (Args, Vec<String>) {
        let mut errors = Errors::default();
        let args = parse(kind, tokens, &mut errors);
        let messages = errors
            .0
            .map(|e| e.into_iter().map(|e| e.to_string()).collect())
            .unwrap_or_default();
        (args, messages)
    }

    #[test]
    fn all_arguments() {
        let (args, errors) = messages(
            Kind::Main,
            quote!(
                workers = 4,
                flavor = "multi_thread",
                min_wait = "200us",
                busy_poll = "50ns",
                backend = "mio",
                name = "api",
                crate = "my::weir",
            ),
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(args.name.unwrap().value.value(), "api");
        assert_eq!(args.workers.unwrap().value, 4);
        assert_eq!(args.flavor.unwrap().value, Flavor::MultiThread);
        assert_eq!(args.min_wait.unwrap().value, 200_000);
        assert_eq!(args.busy_poll.unwrap().value, 50);
        assert_eq!(args.backend.unwrap().value, Backend::Mio);
        assert_eq!(path_text(&args.krate.unwrap().value), "my::weir");
    }

    #[test]
    fn errors_are_collected() {
        let (args, errors) = messages(
            Kind::Main,
            quote!(
                foo = 1,
                workers = 0,
                flavor = "bogus",
                min_wait = "200xs",
                backend = "epoll"
            ),
        );
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(errors[0].starts_with("unknown argument `foo`; accepted arguments: workers,"));
        assert!(errors[1].starts_with("`workers` must be at least 1"));
        assert!(errors[2].starts_with(
            "invalid value for `flavor`: \"bogus\"; accepted values: \"current_thread\", \
             \"multi_thread\""
        ));
        assert_eq!(
            errors[3],
            "invalid value for `min_wait`: \"200xs\"; expected a duration such as \"200us\" \
             (units: ns, us, ms, s)"
        );
        assert_eq!(args.backend.unwrap().value, Backend::Epoll);
    }

    #[test]
    fn name_is_a_non_empty_string() {
        let (_, errors) = messages(Kind::Main, quote!(name = ""));
        assert_eq!(
            errors,
            ["invalid value for `name`: the runtime's name must not be empty"]
        );
        let (_, errors) = messages(Kind::Test, quote!(name = api));
        assert_eq!(
            errors,
            [
                "invalid value for `name`: `api`; expected a string literal such as \
                 `name = \"my-runtime\"`"
            ]
        );
    }

    #[test]
    fn workers_rules() {
        let (_, errors) = messages(Kind::Test, quote!(workers = 2));
        assert!(
            errors[0].contains("requires `flavor = \"multi_thread\"`"),
            "{errors:?}"
        );
        let (_, errors) = messages(Kind::Main, quote!(workers = 2));
        assert!(errors.is_empty());
        let (_, errors) = messages(Kind::Main, quote!(flavor = "current_thread", workers = 1));
        assert!(errors[0].contains("cannot be used with `flavor = \"current_thread\"`"));
        let (_, errors) = messages(Kind::Test, quote!(workers = "4"));
        assert!(
            errors[0].contains("write `workers = 4` without quotes"),
            "{errors:?}"
        );
    }

    #[test]
    fn start_paused_rules() {
        let (args, errors) = messages(Kind::Test, quote!(start_paused = true));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(args.start_paused.unwrap().value);
        let (_, errors) = messages(
            Kind::Test,
            quote!(flavor = "multi_thread", start_paused = true),
        );
        assert!(
            errors[0].starts_with("`start_paused` needs `flavor = \"current_thread\"`"),
            "{errors:?}"
        );
        let (_, errors) = messages(Kind::Main, quote!(start_paused = true));
        assert!(
            errors[0].contains("uses a multi-thread runtime by default"),
            "{errors:?}"
        );
        let (_, errors) = messages(
            Kind::Main,
            quote!(flavor = "current_thread", start_paused = true),
        );
        assert!(errors.is_empty(), "{errors:?}");
        let (_, errors) = messages(Kind::Main, quote!(start_paused = false));
        assert!(errors.is_empty(), "false is fine anywhere: {errors:?}");
        let (_, errors) = messages(Kind::Test, quote!(start_paused = "true"));
        assert!(
            errors[0].contains("write `start_paused = true` without quotes"),
            "{errors:?}"
        );
    }

    #[test]
    fn tokio_spelling_of_workers() {
        let (args, errors) = messages(Kind::Main, quote!(worker_threads = 3));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(args.workers.map(|s| s.value), Some(3));
        let (_, errors) = messages(Kind::Main, quote!(workers = 1, worker_threads = 2));
        assert_eq!(
            errors,
            [
                "duplicate argument `workers` (`worker_threads` is another name for it): each \
                 argument may be given only once"
            ]
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest("threads"), Some("workers"));
        assert_eq!(suggest("worker"), Some("workers"));
        assert_eq!(suggest("min_wiat"), Some("min_wait"));
        assert_eq!(suggest("busypoll"), Some("busy_poll"));
        assert_eq!(suggest("backends"), Some("backend"));
        assert_eq!(suggest("paused"), Some("start_paused"));
        assert_eq!(suggest("start_pause"), Some("start_paused"));
        assert_eq!(suggest("auto_advance"), None);
        assert_eq!(suggest("x"), None);
    }

    #[test]
    fn duplicates_and_syntax() {
        let (_, errors) = messages(Kind::Main, quote!(workers = 1, workers = 2));
        assert_eq!(
            errors,
            ["duplicate argument `workers`: each argument may be given only once"]
        );
        let (_, errors) = messages(Kind::Main, quote!(workers));
        assert_eq!(errors, ["missing value for `workers`: write `workers = 4`"]);
        let (_, errors) = messages(Kind::Main, quote!(workers = ));
        assert_eq!(
            errors,
            ["missing value after `workers =`: write `workers = 4`"]
        );
        let (_, errors) = messages(Kind::Main, quote!(workers(4)));
        assert_eq!(
            errors,
            ["expected `=` after `workers`: write `workers = 4`"]
        );
        let (_, errors) = messages(Kind::Main, quote!(, workers = 4));
        assert_eq!(errors.len(), 1);
        let (args, errors) = messages(Kind::Main, quote!(workers = 2 flavor = "current_thread"));
        assert_eq!(
            errors,
            [
                "expected `,` before `flavor`: separate the arguments with commas",
                "`workers` cannot be used with `flavor = \"current_thread\"`: a current-thread \
                 runtime runs everything on the calling thread; use `flavor = \"multi_thread\"` \
                 or remove `workers`"
            ]
        );
        assert_eq!(args.workers.unwrap().value, 2);
    }
}
