//! ONNX import (`pfor::onnx`): the decoder and importer on models built in memory
//! (`import`), and ONNX's own backend node test suite (`node_suite`).

mod coverage;
mod encode;
mod import;
mod node_suite;
