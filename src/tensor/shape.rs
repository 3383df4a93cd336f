//! Static shapes: [`Dim`], [`Shape`] and [`TensorType`].
//!
//! Invariant: a `Shape` always has a known rank; each dim is either a fixed size or
//! dynamic (known only at run time, optionally named so that two dims with the same
//! symbol are known equal: a session checks that the feeds of one run agree on every
//! named dim). Shape inference never loses rank information. Size arithmetic on dims is
//! checked: a product that overflows is `None`, never a wrapped value or a panic.

use std::fmt;
use std::sync::Arc;

use smallvec::SmallVec;

use super::DType;

/// One dimension of a static shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// Known at graph-build time.
    Fixed(usize),
    /// Known only at run time; an optional symbol names it (same symbol = same size).
    Dynamic(Option<Arc<str>>),
}

impl Dim {
    /// A fixed dim.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Dim::fixed(3).value(), Some(3));
    /// # Ok(())
    /// # }
    /// ```
    pub fn fixed(n: usize) -> Dim {
        Dim::Fixed(n)
    }
    /// A named dynamic dim.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let n = Dim::dynamic("batch"); // the same name: the same size in one run
    /// assert_eq!((n.value(), n.to_string()), (None, "batch".to_string()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn dynamic(name: &str) -> Dim {
        Dim::Dynamic(Some(Arc::from(name)))
    }
    /// An anonymous dynamic dim.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Dim::unknown().to_string(), "?");
    /// # Ok(())
    /// # }
    /// ```
    pub fn unknown() -> Dim {
        Dim::Dynamic(None)
    }
    /// The size if fixed.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!((Dim::fixed(2).value(), Dim::unknown().value()), (Some(2), None));
    /// # Ok(())
    /// # }
    /// ```
    pub fn value(&self) -> Option<usize> {
        match self {
            Dim::Fixed(n) => Some(*n),
            Dim::Dynamic(_) => None,
        }
    }
    /// True if this dim is fixed.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert!(Dim::fixed(2).is_fixed() && !Dim::dynamic("n").is_fixed());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_fixed(&self) -> bool {
        matches!(self, Dim::Fixed(_))
    }
    /// Whether the two dims may be equal at run time.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert!(Dim::fixed(2).compatible(&Dim::dynamic("n")));
    /// assert!(!Dim::fixed(2).compatible(&Dim::fixed(3)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn compatible(&self, other: &Dim) -> bool {
        match (self, other) {
            (Dim::Fixed(a), Dim::Fixed(b)) => a == b,
            _ => true,
        }
    }
    /// Unify two dims that must be equal (`None` when they cannot be).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Dim::dynamic("n").unify(&Dim::fixed(4)), Some(Dim::fixed(4)));
    /// assert_eq!(Dim::fixed(2).unify(&Dim::fixed(3)), None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn unify(&self, other: &Dim) -> Option<Dim> {
        match (self, other) {
            (Dim::Fixed(a), Dim::Fixed(b)) => (a == b).then_some(Dim::Fixed(*a)),
            (Dim::Fixed(a), _) | (_, Dim::Fixed(a)) => Some(Dim::Fixed(*a)),
            (Dim::Dynamic(a), Dim::Dynamic(b)) => {
                Some(if a == b { Dim::Dynamic(a.clone()) } else { Dim::Dynamic(None) })
            }
        }
    }
    /// Product of two dims (dynamic if either is); `None` when the product of two fixed
    /// dims overflows `usize`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Dim::fixed(2).mul(&Dim::fixed(3)), Some(Dim::fixed(6)));
    /// assert_eq!(Dim::fixed(1).mul(&Dim::dynamic("n")), Some(Dim::dynamic("n")));
    /// assert_eq!(Dim::fixed(usize::MAX).mul(&Dim::fixed(2)), None); // overflow
    /// # Ok(())
    /// # }
    /// ```
    pub fn mul(&self, other: &Dim) -> Option<Dim> {
        Some(match (self, other) {
            (Dim::Fixed(a), Dim::Fixed(b)) => Dim::Fixed(a.checked_mul(*b)?),
            (Dim::Fixed(0), _) | (_, Dim::Fixed(0)) => Dim::Fixed(0),
            (Dim::Fixed(1), d) | (d, Dim::Fixed(1)) => d.clone(),
            _ => Dim::Dynamic(None),
        })
    }
}

impl From<usize> for Dim {
    fn from(n: usize) -> Dim {
        Dim::Fixed(n)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Dynamic(Some(s)) => write!(f, "{s}"),
            Dim::Dynamic(None) => write!(f, "?"),
        }
    }
}

/// A static shape: rank is always known, dims may be dynamic.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub SmallVec<[Dim; 6]>);

impl Shape {
    /// Scalar shape `[]`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Shape::scalar().rank(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scalar() -> Shape {
        Shape(SmallVec::new())
    }
    /// A shape of fixed dims.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Shape::fixed(&[2, 3]).to_string(), "[2,3]");
    /// # Ok(())
    /// # }
    /// ```
    pub fn fixed(dims: &[usize]) -> Shape {
        Shape(dims.iter().map(|&d| Dim::Fixed(d)).collect())
    }
    /// From a list of dims.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let s = Shape::from_dims([Dim::dynamic("n"), Dim::fixed(3)]);
    /// assert_eq!(s.to_string(), "[n,3]");
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_dims(dims: impl IntoIterator<Item = Dim>) -> Shape {
        Shape(dims.into_iter().collect())
    }
    /// The rank.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Shape::fixed(&[2, 3, 4]).rank(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn rank(&self) -> usize {
        self.0.len()
    }
    /// The dims.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Shape::fixed(&[2, 3]).dims(), [Dim::fixed(2), Dim::fixed(3)]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn dims(&self) -> &[Dim] {
        &self.0
    }
    /// Dim `i` (panics on out-of-range; callers check the rank first).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Shape::fixed(&[2, 3]).dim(1), &Dim::fixed(3));
    /// # Ok(())
    /// # }
    /// ```
    pub fn dim(&self, i: usize) -> &Dim {
        &self.0[i]
    }
    /// All dims as fixed sizes, if they all are.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Shape::fixed(&[2, 3]).as_fixed(), Some(vec![2, 3]));
    /// assert_eq!(Shape::from_dims([Dim::unknown()]).as_fixed(), None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn as_fixed(&self) -> Option<Vec<usize>> {
        self.0.iter().map(Dim::value).collect()
    }
    /// Number of elements if fully fixed; `None` if a dim is dynamic or the count overflows
    /// `usize` (no tensor of such a shape can exist).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Shape::fixed(&[2, 3]).num_elements(), Some(6));
    /// assert_eq!(Shape::fixed(&[usize::MAX, 2]).num_elements(), None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn num_elements(&self) -> Option<usize> {
        self.0.iter().try_fold(1usize, |n, d| n.checked_mul(d.value()?))
    }
    /// True if every dim is fixed.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert!(Shape::fixed(&[2]).is_fixed() && !Shape::from_dims([Dim::unknown()]).is_fixed());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_fixed(&self) -> bool {
        self.0.iter().all(Dim::is_fixed)
    }
    /// Whether a concrete shape matches this static shape.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let s = Shape::from_dims([Dim::dynamic("n"), Dim::fixed(3)]);
    /// assert!(s.matches(&[7, 3]) && !s.matches(&[7, 4]) && !s.matches(&[3]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn matches(&self, concrete: &[usize]) -> bool {
        self.rank() == concrete.len() && self.0.iter().zip(concrete).all(|(d, &c)| d.value().is_none_or(|v| v == c))
    }
    /// Whether two static shapes may be equal at run time.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let s = Shape::from_dims([Dim::dynamic("n"), Dim::fixed(3)]);
    /// assert!(s.compatible(&Shape::fixed(&[5, 3])) && !s.compatible(&Shape::fixed(&[5, 2])));
    /// # Ok(())
    /// # }
    /// ```
    pub fn compatible(&self, other: &Shape) -> bool {
        self.rank() == other.rank() && self.0.iter().zip(other.0.iter()).all(|(a, b)| a.compatible(b))
    }
    /// A new shape with `d` prepended.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Shape::fixed(&[3]).prepend(Dim::dynamic("batch")).to_string(), "[batch,3]");
    /// # Ok(())
    /// # }
    /// ```
    pub fn prepend(&self, d: Dim) -> Shape {
        let mut v = SmallVec::with_capacity(self.rank() + 1);
        v.push(d);
        v.extend(self.0.iter().cloned());
        Shape(v)
    }
    /// The shape without its first dim (scalar stays scalar).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Shape::fixed(&[8, 3, 4]).tail(), Shape::fixed(&[3, 4]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn tail(&self) -> Shape {
        Shape(self.0.iter().skip(1).cloned().collect())
    }
}

impl From<&[usize]> for Shape {
    fn from(d: &[usize]) -> Shape {
        Shape::fixed(d)
    }
}
impl<const N: usize> From<[usize; N]> for Shape {
    fn from(d: [usize; N]) -> Shape {
        Shape::fixed(&d)
    }
}
impl<const N: usize> From<[Dim; N]> for Shape {
    fn from(d: [Dim; N]) -> Shape {
        Shape::from_dims(d)
    }
}
impl From<Vec<Dim>> for Shape {
    fn from(d: Vec<Dim>) -> Shape {
        Shape::from_dims(d)
    }
}
impl From<Vec<usize>> for Shape {
    fn from(d: Vec<usize>) -> Shape {
        Shape::fixed(&d)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

/// The static type of a graph value: dtype and shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Shape,
}

impl TensorType {
    /// Construct a type.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = TensorType::new(DType::F32, [2, 3]);
    /// assert_eq!(t.to_string(), "f32[2,3]");
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(dtype: DType, shape: impl Into<Shape>) -> TensorType {
        TensorType { dtype, shape: shape.into() }
    }
    /// A scalar of `dtype`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(TensorType::scalar(DType::I64).to_string(), "i64[]");
    /// # Ok(())
    /// # }
    /// ```
    pub fn scalar(dtype: DType) -> TensorType {
        TensorType { dtype, shape: Shape::scalar() }
    }
    /// The rank.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(TensorType::new(DType::F32, [2, 3]).rank(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}
