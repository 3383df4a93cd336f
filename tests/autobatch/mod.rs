//! Auto-batching interpreter tests: values of the classic programs, agreement of the
//! stackless executor, the VM and the unbatched reference (proptest), allocation tables,
//! primop execution counts, lowering and errors.

mod allocation;
mod counts;
mod equivalence;
mod errors;
mod handoff;
mod lowering;
mod options;
pub mod programs;
mod values;
