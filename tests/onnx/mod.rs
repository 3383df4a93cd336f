//! ONNX import (`pfor::onnx`): the decoder and importer on models built in memory
//! (`import`), ONNX's own backend node test suite (`node_suite`), the model suites it ships
//! (`suites`: pytorch-converted, pytorch-operator, simple) and its `light` real architectures
//! (`light`: import, weights lifted to parameters, per-example gradients under pfor).

mod coverage;
mod encode;
mod import;
mod layout;
mod lift_legacy;
mod light;
mod node_suite;
mod suites;
