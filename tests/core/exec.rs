//! Core tests: exec.
