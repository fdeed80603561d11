//! Two misuses: `start` on an operation that answers no task, and a type that is not a
//! `Resource` handed to a stack. `.ci/misuse` expects each to fail with its own message.

/// `/version` answers data, not a task id.
pub async fn start_a_read(client: pve_sdk::Client) {
    let _ = client
        .start(&pve_sdk::generated::version::Version::new())
        .await;
}

/// Not a family's declaration.
#[derive(Debug)]
pub struct NotAResource;

/// A stack holds declarations only.
pub fn add_a_plain_type(stack: &mut pve_resources::Stack) {
    let _ = stack.add("x", NotAResource);
}
