//! Access families, all cluster-wide: [`User`], [`Group`] and [`Role`] from the schema
//! ([`Declared`](crate::families::schema::Declared)); and
//! hand-written: [`ApiToken`] (its secret handed over once) and [`Acl`] (entries of PVE's one
//! list).
//! Dropped from the declaration, all are kept (S20): a deleted group or role breaks the ACLs
//! that name it, and a deleted user takes its API tokens with it.

mod acl;
mod api_token;
mod group;
mod role;
mod user;

pub use acl::{check_path, normalize_path, Acl, Subject};
pub use api_token::ApiToken;
pub use group::{Group, GroupObject};
pub use role::{Role, RoleObject};
pub use user::{User, UserObject};

pub(crate) use acl::rebuild as rebuild_acl;
pub(crate) use api_token::rebuild as rebuild_token;
