//! The one dtype-dispatch mechanism. Kernels are written once, generically over
//! [`Element`](super::Element), and these macros pick the monomorphized instance.

/// Bind the array inside a [`Tensor`](crate::Tensor) to `$a` (all dtypes) and evaluate `$body`.
#[macro_export]
#[doc(hidden)]
macro_rules! dispatch {
    ($t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::Tensor::F32($a) => $body,
            $crate::Tensor::F64($a) => $body,
            $crate::Tensor::I64($a) => $body,
            $crate::Tensor::Bool($a) => $body,
        }
    };
}

/// Bind the element type of `$dtype` to the type alias `$T` and evaluate `$body`.
#[macro_export]
#[doc(hidden)]
macro_rules! dispatch_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                #[allow(unused)]
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                #[allow(unused)]
                type $T = f64;
                $body
            }
            $crate::DType::I64 => {
                #[allow(unused)]
                type $T = i64;
                $body
            }
            $crate::DType::Bool => {
                #[allow(unused)]
                type $T = bool;
                $body
            }
        }
    };
}

/// Like [`dispatch_dtype!`] for float dtypes only; other dtypes evaluate `$else`.
#[macro_export]
#[doc(hidden)]
macro_rules! dispatch_float {
    ($dtype:expr, $T:ident => $body:expr, _ => $else:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                #[allow(unused)]
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                #[allow(unused)]
                type $T = f64;
                $body
            }
            _ => $else,
        }
    };
}

/// Like [`dispatch_dtype!`] for numeric dtypes (f32, f64, i64); bool evaluates `$else`.
#[macro_export]
#[doc(hidden)]
macro_rules! dispatch_numeric {
    ($dtype:expr, $T:ident => $body:expr, _ => $else:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                #[allow(unused)]
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                #[allow(unused)]
                type $T = f64;
                $body
            }
            $crate::DType::I64 => {
                #[allow(unused)]
                type $T = i64;
                $body
            }
            _ => $else,
        }
    };
}
