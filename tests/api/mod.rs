//! The user-facing API as a user calls it: vectorized maps with explicit axes (`map`) and
//! the function-level derivative transforms (`func`).

pub mod func;
pub mod map;
