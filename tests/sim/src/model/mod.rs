//! One model per family the simulator serves as a config collection: each a [`Kind`] of the
//! generic model ([`crate::collections`]) with the hooks its upstream code needs (how it reads
//! back, what it refuses, its own answers, the set `append` adds to), and its sources.
//!
//! [`Kind`]: crate::collections::Kind

pub mod group;
pub mod pool;
pub mod role;
pub mod storage;
pub mod user;
