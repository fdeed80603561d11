//! Cross-crate test suites live in `tests/tests/`; fixtures in `tests/fixtures/`.

/// An error and its sources, `outer <- inner <- ...`, for assertions on the whole chain.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(" <- ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}
