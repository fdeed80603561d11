//! Regexes compiled once per pattern and shared: the typed-error matchers and the format table
//! name theirs as `&'static str`.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// The compiled regex of `pattern`, compiled on first use; `None` if it does not compile.
pub(crate) fn cached(pattern: &'static str) -> Option<regex::Regex> {
    static CACHE: OnceLock<Mutex<BTreeMap<&'static str, Option<regex::Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut map = cache.lock().unwrap_or_else(PoisonError::into_inner);
    map.entry(pattern)
        .or_insert_with(|| regex::Regex::new(pattern).ok())
        .clone()
}
