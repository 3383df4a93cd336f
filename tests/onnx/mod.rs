//! ONNX import (`pfor::onnx`): the decoder and importer on models built in memory
//! (`import`; inputs bound to known values: `bind`; the training-domain optimizers:
//! `training`; `DFT`, `AffineGrid`, `QuantizeLinear`: `dft_grid_quant`), ONNX's own backend
//! node test suite (`node_suite`), the model suites it ships (`suites`: pytorch-converted,
//! pytorch-operator, simple) and its `light` real architectures (`light`: import, weights
//! lifted to parameters, per-example gradients under pfor).

mod bind;
mod coverage;
mod dft_grid_quant;
mod encode;
mod import;
mod layout;
mod lift_legacy;
mod light;
mod node_suite;
mod suites;
mod training;
