//! Core tests: tensors, graph IR, executor, reference loop, errors.

mod alloc_cache;
mod boundaries;
mod dispatch;
mod examples;
mod exec;
mod fuse;
mod fuse_elementwise;
mod fuse_patch_product;
mod ir;
mod layout_copy;
mod options;
mod passes;
mod pretranspose;
mod random_graphs;
mod serialize;
mod standalone;
mod surface;
mod tensor;
mod workers;
