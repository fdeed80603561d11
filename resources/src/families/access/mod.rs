//! Access families, all cluster-wide: [`Group`] and [`Role`] from the schema
//! ([`Declared`](crate::families::schema::Declared)), [`User`] on the generic
//! [`ConfigObject`](crate::families::config::ConfigObject); and
//! hand-written: [`ApiToken`] (its secret handed over once) and [`Acl`] (entries of PVE's one
//! list).
//! Dropped from the declaration, all are kept (S20): a deleted group or role breaks the ACLs
//! that name it, and a deleted user takes its API tokens with it.

mod acl;
mod group;
mod role;
mod token;
mod user;

pub use acl::{check_path, normalize_path, Acl, Subject};
pub use group::{Group, GroupObject};
pub use role::{Role, RoleObject};
pub use token::ApiToken;
pub use user::User;

pub(crate) use acl::rebuild as rebuild_acl;
pub(crate) use token::rebuild as rebuild_token;
pub(crate) use user::rebuild as rebuild_user;
