//! The stand-in for a managed resource that this stack cannot rebuild from state (its family
//! is not registered, or its entry is incomplete). Plans refuse it with the reason; should it
//! ever be asked to read or write, it fails with the same reason.

use std::collections::BTreeMap;

use crate::contract::{
    Ask, BoxFuture, Change, Cx, ErrorKind, Failure, Guard, ObjectRef, OnStarted, Probe, Resource,
};
use crate::state::ResourceState;

#[derive(Debug)]
pub(crate) struct Unknown(pub(crate) ResourceState);

impl Unknown {
    fn refuse<T: Send + 'static>(&self) -> BoxFuture<'static, Result<T, Failure>> {
        let why = format!(
            "family {:?} is unknown to this stack; register it with Stack::register",
            self.0.kind
        );
        Box::pin(async move { Err(Failure::new(ErrorKind::UnknownFamily, why)) })
    }
}

impl Resource for Unknown {
    fn address(&self) -> BTreeMap<String, String> {
        self.0.address.clone()
    }

    /// The object as state records it, under its family's own name.
    fn object(&self) -> ObjectRef {
        ObjectRef::from_address(self.0.kind.clone(), &self.0.address)
    }

    fn declared(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn probe<'a>(&'a self, _cx: &'a Cx, _ask: Ask<'a>) -> BoxFuture<'a, Result<Probe, Failure>> {
        self.refuse()
    }

    fn create<'a>(
        &'a self,
        _cx: &'a Cx,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        self.refuse()
    }

    fn update<'a>(
        &'a self,
        _cx: &'a Cx,
        _changes: &'a [Change],
        _guard: &'a Guard,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        self.refuse()
    }

    fn destroy<'a>(
        &'a self,
        _cx: &'a Cx,
        _last: &'a BTreeMap<String, String>,
        _on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        self.refuse()
    }
}
