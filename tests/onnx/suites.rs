//! The model suites ONNX ships beside its node tests (`onnx/backend/test/data/{pytorch-converted,
//! pytorch-operator,simple}`, copied into the cache by `tools/onnx_testdata.sh`): every case
//! (`model.onnx` + `test_data_set_k/`) is imported, run and compared at ONNX's model-test
//! tolerances (rtol 1e-3, atol 1e-7), and every passing case is also run under `pfor` (n = 3
//! perturbed copies, strict) against the loop — the node suite's driver
//! ([`super::node_suite::run_case`]), counted and asserted the same way: a failure among the
//! cases we support fails the test; unsupported ops and non-tensor values are listed.

use super::node_suite::{Tally, run_case, suite_cases, suite_dir};

fn run_suite(suite: &str) {
    let Some(root) = suite_dir(suite) else { return };
    let mut tally = Tally::default();
    for dir in suite_cases(&root) {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        tally.add(&name, run_case(&dir), true);
    }
    tally.report(suite, &root);
}

#[test]
fn onnx_pytorch_converted_suite() {
    run_suite("pytorch-converted");
}

#[test]
fn onnx_pytorch_operator_suite() {
    run_suite("pytorch-operator");
}

#[test]
fn onnx_simple_suite() {
    run_suite("simple");
}
