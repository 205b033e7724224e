//! Checking the annotated function and generating the synchronous wrapper.
//!
//! For
//!
//! ```text
//! #[weir::main(workers = 4)]
//! async fn main() -> Result<(), Error> { body }
//! ```
//!
//! the expansion is, in outline:
//!
//! ```text
//! fn main() -> Result<(), Error> {
//!     async fn __weir_body() -> Result<(), Error> { body }
//!     let __weir_runtime = match ::weir::runtime::Builder::new_multi_thread().workers(4).build() {
//!         Ok(runtime) => runtime,
//!         Err(e) => panic!("#[weir::main]: could not build the weir runtime: {e}"),
//!     };
//!     __weir_runtime.block_on(__weir_body())
//! }
//! ```
//!
//! The body stays an `async fn` with the declared return type, so `return`, `?` and `.await`
//! behave exactly as the user wrote them, and type errors point into the body (at the
//! offending expression, against the declared return type) rather than at the macro. The
//! body's tokens keep their spans. A `#[weir::main]` function other than `main` may take
//! parameters, `self` included (`#[weir::main] async fn run(&self)` in an `impl` block): its
//! body becomes an `async move` block that captures them.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::{AttrStyle, Attribute, ItemFn, Path};

use weir_config::{MAX_BUSY_POLL, MAX_MIN_WAIT, MAX_WORKERS};

use crate::args::{self, Args, Errors, Flavor, Kind, path_text};

// The runtime's limits appear in messages (`weir-config`'s, the runtime's own); the generated
// checks compare against the constants the user's weir crate exports
// (`weir::runtime::MAX_WORKERS`, ...).

/// Expands `#[weir::main(args)]` / `#[weir::test(args)]` on `item`.
pub(crate) fn expand(kind: Kind, args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let args = args::parse(kind, args, &mut errors);

    let func = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(func) => func,
        Err(parse_error) => {
            if syn::parse2::<syn::Item>(item.clone()).is_ok() {
                errors.at(
                    first_token_after_attributes(&item),
                    format!(
                        "{} can only be applied to an `async fn`{}",
                        kind.attr(),
                        match kind {
                            Kind::Main => ", such as `async fn main() { ... }`",
                            Kind::Test => ", such as `async fn my_test() { ... }`",
                        }
                    ),
                );
            } else {
                // Not an item at all; rustc has most likely reported the syntax error already.
                errors.push(parse_error);
            }
            let errors = errors.to_compile_errors();
            return quote!(#errors #item);
        }
    };

    if !check_function(kind, &func, &mut errors) {
        // The function cannot be wrapped. Emit a plain stub under the same name so that the
        // errors above are the only ones (no "`main` function not found", no errors from uses).
        let errors = errors.to_compile_errors();
        let ItemFn { vis, sig, .. } = &func;
        let ident = &sig.ident;
        return quote! {
            #errors
            #[allow(dead_code)]
            #vis fn #ident() {}
        };
    }

    let generated = generate(kind, &args, func);
    let errors = errors.to_compile_errors();
    quote!(#errors #generated)
}

/// Checks the function's shape; reports every problem and returns whether it can be wrapped.
fn check_function(kind: Kind, func: &ItemFn, errors: &mut Errors) -> bool {
    let mut ok = true;
    let attr = kind.attr();
    let sig = &func.sig;
    let is_main = kind == Kind::Main && sig.ident == "main";

    if sig.asyncness.is_none() {
        errors.at(
            sig.fn_token.span,
            format!(
                "the `async` keyword is missing from the function declaration; {attr} runs an \
                 async function: write `async fn {}`",
                sig.ident
            ),
        );
        ok = false;
    }
    if let Some(constness) = &sig.constness {
        errors.at(
            constness.span,
            format!("{attr} cannot be applied to a `const fn`"),
        );
        ok = false;
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.at(
            unsafety.span,
            format!(
                "{attr} cannot be applied to an `unsafe fn`; use an `unsafe` block inside the \
                 function instead"
            ),
        );
        ok = false;
    }
    if let Some(abi) = &sig.abi {
        errors.spanned(
            abi,
            format!("{attr} cannot be applied to an `extern` function; remove the ABI"),
        );
        ok = false;
    }
    if !sig.generics.params.is_empty() {
        let what = if is_main {
            "the `main` function"
        } else {
            "the function"
        };
        errors.spanned(
            &sig.generics,
            format!(
                "{what} cannot be generic: {attr} must know every type to run the body; remove \
                 the generic parameters"
            ),
        );
        ok = false;
    }
    if let Some(where_clause) = &sig.generics.where_clause {
        errors.spanned(
            where_clause,
            format!("{attr} functions cannot have a `where` clause; remove it"),
        );
        ok = false;
    }
    // Methods (`async fn run(&self)`) and other functions with parameters are fine for
    // `#[weir::main]` on anything but `main`, as with tokio: the body captures them.
    let parameters_allowed = kind == Kind::Main && !is_main && sig.variadic.is_none();
    if !parameters_allowed && (!sig.inputs.is_empty() || sig.variadic.is_some()) {
        let message = match kind {
            Kind::Main if is_main => "the `main` function cannot take parameters; read \
                                      command-line arguments with `std::env::args()`"
                .to_string(),
            Kind::Main => format!(
                "{attr} functions cannot take parameters: the generated function starts a \
                 runtime and is called without arguments"
            ),
            Kind::Test => format!(
                "{attr} functions cannot take parameters: the test harness calls tests \
                 without arguments"
            ),
        };
        let inputs = &sig.inputs;
        let variadic = &sig.variadic;
        errors.spanned(quote!(#inputs #variadic), message);
        ok = false;
    }
    if kind == Kind::Test {
        for attr in &func.attrs {
            if is_test_attribute(attr) {
                errors.spanned(
                    attr,
                    "`#[weir::test]` already marks the function as a test; remove this \
                     attribute",
                );
                // Still expandable: the duplicate is dropped below.
            }
        }
    }
    ok
}

/// `#[test]`, `#[core::prelude::v1::test]`, `#[::std::prelude::rust_2024::test]`, …
fn is_test_attribute(attr: &Attribute) -> bool {
    let path = attr.path();
    let last_is_test = path.segments.last().is_some_and(|s| s.ident == "test");
    let std_path = path
        .segments
        .first()
        .is_some_and(|s| s.ident == "core" || s.ident == "std")
        && path.segments.iter().any(|s| s.ident == "prelude");
    matches!(attr.style, AttrStyle::Outer) && last_is_test && (path.segments.len() == 1 || std_path)
}

/// Generates the synchronous function.
fn generate(kind: Kind, args: &Args, func: ItemFn) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        mut sig,
        block,
    } = func;
    let (inner_attrs, outer_attrs): (Vec<Attribute>, Vec<Attribute>) = attrs
        .into_iter()
        .filter(|attr| !(kind == Kind::Test && is_test_attribute(attr)))
        .partition(|attr| matches!(attr.style, AttrStyle::Inner(_)));

    let krate: Path = args
        .krate
        .as_ref()
        .map_or_else(|| syn::parse_quote!(::weir), |s| s.value.clone());
    let krate_text = path_text(&krate);

    let output = sig.output.clone();
    sig.asyncness = None;
    let body_fn = format_ident!("__weir_body");

    let flavor = args.flavor.as_ref().map_or(
        match kind {
            Kind::Main => Flavor::MultiThread,
            Kind::Test => Flavor::CurrentThread,
        },
        |s| s.value,
    );
    let constructor = match flavor {
        Flavor::MultiThread => quote!(new_multi_thread),
        Flavor::CurrentThread => quote!(new_current_thread),
    };

    // Builder calls, each spanned at its argument; compile-time range checks against the
    // runtime's own limits, spanned at the value.
    let mut calls = Vec::new();
    let mut checks = Vec::new();
    if let Some(workers) = &args.workers {
        let n = workers.value;
        let method = quote_spanned!(workers.name_span=> workers);
        calls.push(quote!(.#method(#n)));
        let message = format!(
            "`workers = {n}` is more than {krate_text}::runtime::MAX_WORKERS ({MAX_WORKERS})"
        );
        checks.push(quote_spanned! {workers.value_span=>
            const _: () = ::core::assert!(#n <= #krate::runtime::MAX_WORKERS, #message);
        });
    }
    let durations = [
        ("min_wait", &args.min_wait, "MAX_MIN_WAIT", MAX_MIN_WAIT),
        (
            "min_wait_adaptive",
            &args.min_wait_adaptive,
            "MAX_MIN_WAIT",
            MAX_MIN_WAIT,
        ),
        ("busy_poll", &args.busy_poll, "MAX_BUSY_POLL", MAX_BUSY_POLL),
    ];
    for (name, setting, limit, limit_value) in durations {
        let Some(setting) = setting else { continue };
        let nanos = setting.value;
        let method = syn::Ident::new(name, setting.name_span);
        calls.push(quote!(.#method(::core::time::Duration::from_nanos(#nanos))));
        let limit = syn::Ident::new(limit, setting.value_span);
        // `Duration`'s `Debug`: "100ms", "1s".
        let message = format!(
            "`{name} = {}` is longer than {krate_text}::runtime::{limit} ({limit_value:?})",
            setting.text
        );
        let nanos = proc_macro2::Literal::u128_suffixed(u128::from(nanos));
        checks.push(quote_spanned! {setting.value_span=>
            const _: () = ::core::assert!(
                #nanos <= #krate::runtime::#limit.as_nanos(),
                #message
            );
        });
    }
    if let Some(backend) = &args.backend {
        let variant = syn::Ident::new(backend.value.variant(), backend.value_span);
        let method = quote_spanned!(backend.name_span=> backend);
        calls.push(quote!(.#method(#krate::runtime::Backend::#variant)));
    }

    if let Some(name) = &args.name {
        let value = &name.value;
        let method = quote_spanned!(name.name_span=> name);
        calls.push(quote!(.#method(#value)));
    }

    if let Some(compat) = &args.tokio_compat {
        let on = compat.value;
        let method = quote_spanned!(compat.name_span=> tokio_compat);
        calls.push(quote!(.#method(#on)));
        if on {
            // A clear compile error when the weir crate was built without the feature.
            let check = quote_spanned!(compat.value_span=> __require_tokio_compat);
            checks.push(quote!(#krate::#check!();));
        }
    }

    if let Some(paused) = &args.start_paused {
        let on = paused.value;
        let method = quote_spanned!(paused.name_span=> start_paused);
        calls.push(quote!(.#method(#on)));
    }

    let test_attr = match kind {
        Kind::Test => quote!(#[::core::prelude::v1::test]),
        Kind::Main => quote!(),
    };
    let panic_message = format!("{}: could not build the weir runtime: {{}}", kind.attr());
    let runtime = format_ident!("__weir_runtime");
    // Without parameters the body becomes a nested `async fn` (its errors point into the body
    // against the declared return type). With parameters — `self` among them — a nested fn
    // could not see them, so the body is an `async move` block that captures them; its output
    // is tied to the declared return type by `block_on`'s result being the function's.
    let body = if sig.inputs.is_empty() {
        quote! {
            async fn #body_fn() #output #block
            let #body_fn = #body_fn();
        }
    } else {
        quote! {
            let #body_fn = async move #block;
        }
    };
    quote! {
        #test_attr
        #(#outer_attrs)*
        #vis #sig {
            #(#inner_attrs)*
            #body
            #(#checks)*
            let #runtime = match #krate::runtime::Builder::#constructor() #(#calls)* .build() {
                ::core::result::Result::Ok(runtime) => runtime,
                ::core::result::Result::Err(error) => ::core::panic!(#panic_message, error),
            };
            #runtime.block_on(#body_fn)
        }
    }
}

/// The span of the first token after the outer attributes (`pub`, `struct`, …).
fn first_token_after_attributes(item: &TokenStream) -> Span {
    let mut tokens = item.clone().into_iter().peekable();
    while let Some(TokenTree::Punct(p)) = tokens.peek() {
        if p.as_char() != '#' {
            break;
        }
        tokens.next();
        tokens.next(); // the `[...]` group
    }
    tokens.next().map_or_else(Span::call_site, |tt| tt.span())
}
