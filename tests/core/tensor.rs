//! Core tests: tensor.
