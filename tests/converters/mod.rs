//! pfor converter tests: the oracle per op family (mirrors `converters/`).

pub mod oracle;
