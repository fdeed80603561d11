//! Problems found by a stage, each with its schema location.

use std::fmt;

/// One problem, at one place in the schema (or a patch file).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    /// Where: `PUT /nodes/{node}/network/{iface} param "type"`, a JSON pointer, or a file.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// Every problem of one stage. A stage that found any stops the pipeline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics {
    /// The stage's name (`load`, `patch`, `lower`, `check`, ...).
    pub stage: &'static str,
    /// The problems, sorted by location.
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty list for `stage`.
    pub fn new(stage: &'static str) -> Self {
        Diagnostics {
            stage,
            items: Vec::new(),
        }
    }

    /// Records a problem.
    pub fn push(&mut self, location: impl Into<String>, message: impl Into<String>) {
        self.items.push(Diagnostic {
            location: location.into(),
            message: message.into(),
        });
    }

    /// `Ok(value)` when nothing was recorded, else the sorted problems.
    ///
    /// # Errors
    ///
    /// Returns `self` when any problem was recorded.
    pub fn finish<T>(mut self, value: T) -> Result<T, Diagnostics> {
        if self.items.is_empty() {
            Ok(value)
        } else {
            self.items.sort();
            self.items.dedup();
            Err(self)
        }
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} problem(s) in stage {}:",
            self.items.len(),
            self.stage
        )?;
        for d in &self.items {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}
