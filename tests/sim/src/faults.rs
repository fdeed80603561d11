//! Scripted answers and faults, scoped to a method, a path pattern and the n-th matching request.

use std::time::Duration;

use serde_json::Value;

/// What a matching request gets instead of (or before) its normal handling.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Answer with this status and JSON body; the request is not handled.
    Respond {
        /// HTTP status.
        status: u16,
        /// The whole body.
        body: Value,
    },
    /// A proxy error for the node (595 `Connection refused` or 596 `Broken pipe` style): the
    /// request is not handled.
    ProxyError {
        /// 595 or 596.
        status: u16,
        /// The reason text.
        message: String,
    },
    /// Wait this long, then handle normally. The handling happens whether or not the client is
    /// still waiting (as in PVE, where a handler does not notice the client leave): a client
    /// that times out during the wait still gets its write applied, after the wait.
    Delay(Duration),
    /// Handle the request now (a write is applied and logged), then wait this long before
    /// answering: "the write was applied, then the client timed out".
    AnswerLate(Duration),
    /// Close the connection without an answer, before the request is handled (a write is not
    /// applied).
    DropBefore,
    /// Handle the request (a write is applied), then close the connection without an answer.
    DropAfter,
}

/// A rule: which requests, which ones of them, and what happens.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// `GET`, `POST`, ... or `*`.
    pub method: String,
    /// A path below `/api2/json`; `*` matches one segment, a trailing `**` any rest.
    pub path: String,
    /// Only the n-th matching request (1-based); `None`: every one.
    pub nth: Option<usize>,
    /// Only requests of this credential (`root@pam!sim`, `root@pam`); `None`: any.
    pub credential: Option<String>,
    /// What happens.
    pub action: Action,
    /// Matching requests seen so far.
    pub(crate) seen: usize,
}

impl Rule {
    /// A rule for every request matching `method` and `path`.
    pub fn new(method: &str, path: &str, action: Action) -> Self {
        Rule {
            method: method.to_owned(),
            path: path.to_owned(),
            nth: None,
            credential: None,
            action,
            seen: 0,
        }
    }

    /// Only the n-th matching request (1-based).
    pub fn nth(mut self, n: usize) -> Self {
        self.nth = Some(n);
        self
    }

    /// Only requests of this credential.
    pub fn for_credential(mut self, credential: &str) -> Self {
        self.credential = Some(credential.to_owned());
        self
    }

    pub(crate) fn matches(&self, method: &str, path: &str, credential: &str) -> bool {
        (self.method == "*" || self.method == method)
            && path_matches(&self.path, path)
            && self.credential.as_deref().is_none_or(|c| c == credential)
    }
}

fn path_matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    let s: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    for (i, part) in p.iter().enumerate() {
        if *part == "**" {
            return true;
        }
        match s.get(i) {
            Some(seg) if *part == "*" || part == seg => {}
            _ => return false,
        }
    }
    p.len() == s.len()
}

/// The first action that applies to this request, counting it against every matching rule.
pub(crate) fn apply(
    rules: &mut [Rule],
    method: &str,
    path: &str,
    credential: &str,
) -> Option<Action> {
    let mut chosen = None;
    for rule in rules
        .iter_mut()
        .filter(|r| r.matches(method, path, credential))
    {
        rule.seen += 1;
        let hit = rule.nth.is_none_or(|n| n == rule.seen);
        if hit && chosen.is_none() {
            chosen = Some(rule.action.clone());
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_nth() {
        assert!(path_matches("/nodes/*/qemu", "/nodes/pve1/qemu"));
        assert!(!path_matches("/nodes/*/qemu", "/nodes/pve1/qemu/100"));
        assert!(path_matches(
            "/nodes/pve2/**",
            "/nodes/pve2/qemu/100/config"
        ));
        let mut rules = vec![Rule::new("GET", "/version", Action::Delay(Duration::ZERO)).nth(2)];
        assert_eq!(apply(&mut rules, "GET", "/version", "a"), None);
        assert!(apply(&mut rules, "GET", "/version", "a").is_some());
        assert_eq!(apply(&mut rules, "GET", "/version", "a"), None);
        let mut only_b =
            vec![Rule::new("*", "/**", Action::Delay(Duration::ZERO)).for_credential("b")];
        assert_eq!(apply(&mut only_b, "GET", "/version", "a"), None);
        assert!(apply(&mut only_b, "GET", "/version", "b").is_some());
    }
}
