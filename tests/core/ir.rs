//! Core tests: ir.
