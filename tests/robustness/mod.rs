//! Robustness: runs that would not terminate or would overflow the native stack end in
//! clear errors (iteration caps, deadlines, cancellation, the stack guard), identically in
//! every interpreter.

mod limits;
mod limits_autobatch;
mod stack;
