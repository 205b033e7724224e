//! Placeholder until the macros land.
use proc_macro::TokenStream;

/// Runs `async fn main` on a weir runtime.
#[proc_macro_attribute]
pub fn main(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Runs an async test on a weir runtime.
#[proc_macro_attribute]
pub fn test(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
