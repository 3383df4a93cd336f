//! pfor converters, one file per op family (mirroring `src/ops/`).
