//! The user-facing API as a user calls it: vectorized maps with explicit axes (`map`),
//! unbatched outputs (`map_out_axes`), the function-level derivative transforms (`func`),
//! the pipeline engine (`pipeline`) and its Arrow / Parquet sources and sinks
//! (`pipeline_parquet`, feature `parquet`), the DataFusion UDF (`pipeline_sql`, feature
//! `datafusion`) and its run on a local Ballista cluster (`pipeline_ballista`, feature
//! `ballista`).

pub mod func;
pub mod map;
pub mod map_out_axes;
pub mod pipeline;
#[cfg(feature = "ballista")]
pub mod pipeline_ballista;
#[cfg(feature = "parquet")]
pub mod pipeline_parquet;
#[cfg(feature = "datafusion")]
pub mod pipeline_sql;
