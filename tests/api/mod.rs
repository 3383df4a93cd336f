//! The user-facing API as a user calls it: vectorized maps with explicit axes (`map`) and
//! the function-level derivative transforms (`func`); unbatched outputs (`map_out_axes`).

pub mod func;
pub mod map;
pub mod map_out_axes;
