//! pfor converters, one file per op family (mirroring `src/ops/`). See README.md for the
//! rules of writing one. Populated by the vectorizer.
