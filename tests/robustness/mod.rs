//! Robustness: misuse of the public API gives an error naming what is wrong, never a panic
//! or another node's value.

mod handles;
