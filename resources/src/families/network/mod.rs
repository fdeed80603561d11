//! Node network families: [`Iface`] (an interface in a node's staged network configuration)
//! and [`NetworkApply`] (applying a node's staged changes, behind the health gate).

mod apply;
mod iface;

pub use apply::{ApplyError, NetworkApply};
pub use iface::{Iface, IfaceObject};

pub(crate) use apply::rebuild as rebuild_apply;
