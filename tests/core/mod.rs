//! Core tests: tensors, graph IR, executor, reference loop, errors.

mod exec;
mod random_graphs;
mod ir;
mod tensor;
