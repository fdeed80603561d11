//! How plans and reports print: Terraform-like text (`Display`) and JSON.

use std::collections::BTreeMap;
use std::fmt;

use crate::contract::ObjectRef;
use crate::engine::{Action, Outcome, Plan, Report};

/// Serialises an object ref as its text (`vm pve1/100`).
pub(crate) fn as_text<S: serde::Serializer>(o: &ObjectRef, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(o)
}

/// An address as `key=value` pairs.
pub(crate) fn address_text(address: &BTreeMap<String, String>) -> String {
    address
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Plan {
    /// The plan as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

impl fmt::Display for Plan {
    /// Terraform-like text: a sigil per resource, then the fields that change.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.entries.iter().map(|e| e.id.len()).max().unwrap_or(0);
        for e in &self.entries {
            let sigil = match &e.action {
                Action::Noop { adopt: false } => " ",
                Action::Noop { adopt: true } => "&",
                Action::Create { .. } => "+",
                Action::Update { .. } => "~",
                Action::Delete => "-",
                Action::Retain | Action::Forget => ".",
                Action::Resume { .. } => ">",
                Action::Refuse { .. } => "!",
                Action::Unowned { .. } => "?",
                Action::Unreadable { .. } => "x",
                Action::Unknown { .. } => "*",
            };
            let what = match &e.action {
                Action::Noop { adopt: true } => "adopt (matches)".to_owned(),
                Action::Update { adopt: true, .. } => "adopt and update".to_owned(),
                Action::Retain => "retain: dropped from the declaration, left on the cluster and no longer managed".to_owned(),
                Action::Forget => "forget: no longer managed; nothing is undone or destroyed (an apply, a built-in)".to_owned(),
                Action::Resume { upid, task } => format!("resume: await the {task} task {upid}"),
                Action::Refuse { error } => format!("refuse: {}", error.reason()),
                Action::Unowned { .. } => "unowned: exists but is not managed by this stack; adopt it to manage it".to_owned(),
                Action::Unreadable { error } => format!("unreadable: {}", error.reason()),
                Action::Unknown { error } => format!("unknown: {}", error.reason()),
                other => other.name().to_owned(),
            };
            writeln!(f, "  {sigil} {:<width$}  {}: {what}", e.id, e.object)?;
            if let Action::Create { steps } = &e.action {
                for step in steps {
                    writeln!(f, "      > {step}")?;
                }
            }
            if let Action::Update { changes, .. } | Action::Unowned { changes } = &e.action {
                for c in changes {
                    match &c.old {
                        Some(old) => writeln!(f, "      ~ {}: {old:?} -> {:?}", c.key, c.new)?,
                        None => writeln!(f, "      + {} = {:?}", c.key, c.new)?,
                    }
                }
            }
            if let Action::Update { notes, .. } = &e.action {
                for note in notes {
                    writeln!(f, "      > {note}")?;
                }
            }
            if let Some(what) = &e.disruptive {
                writeln!(
                    f,
                    "      ! disruptive: {what}; runs alone, after the cluster-health gate"
                )?;
            }
        }
        let counts = self.counts();
        let n = |k: &str| counts.get(k).copied().unwrap_or(0);
        write!(
            f,
            "Plan: {} to create, {} to update, {} to delete, {} unchanged",
            n("create"),
            n("update"),
            n("delete"),
            n("noop")
        )?;
        for k in [
            "resume",
            "retain",
            "forget",
            "refuse",
            "unowned",
            "unreadable",
            "unknown",
        ] {
            if n(k) > 0 {
                write!(f, ", {} {k}", n(k))?;
            }
        }
        writeln!(f, ".")
    }
}

impl fmt::Display for Report {
    /// One line per resource that did not reach its declared state (its outcome, the error's
    /// kind and reason), then the counts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for (id, o) in &self.outcomes {
            *counts.entry(o.name()).or_default() += 1;
            if let Some(e) = o.error() {
                writeln!(f, "  {id}: {} ({}): {}", o.name(), e.kind(), e.reason())?;
            }
        }
        let summary: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        writeln!(
            f,
            "Deploy: {}{}.",
            summary.join(", "),
            if self.converged() {
                ""
            } else {
                "; the declared state is not reached"
            }
        )
    }
}

impl Outcome {
    /// The outcome as one line of text: its name, and for an error its kind and reason.
    pub fn text(&self) -> String {
        match self.error() {
            Some(e) => format!("{} ({}): {}", self.name(), e.kind(), e.reason()),
            None => self.name().to_owned(),
        }
    }
}
