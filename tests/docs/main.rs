//! What the docs say, checked against the code, in one binary.

mod docs_honesty;
mod settings_table;
