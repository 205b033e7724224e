#!/usr/bin/env bash
# The module structure of weir's crates (reactor, executor, net, macros, config, the facade), as the
# structure test sees it: for every module with two or more children, which child imports
# which (with one reference, file:line, per edge), and the cycles among them; then the files
# over 500 lines in reactor/, executor/ and net/ and whether their module doc argues
# `One idea:`.
#
#   scripts/module-graph.sh
#
# The same analysis fails `cargo test --workspace` on any cycle
# (tests/tests/structure.rs, `no_import_cycles_between_sibling_modules`).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --quiet -p weir-tests --test structure -- --nocapture --exact print_graph
