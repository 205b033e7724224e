//! hyper 1.x on weir.
// PLACEHOLDER: being written (helper "compat").
