//! Cross-crate test suites live in `tests/tests/`; fixtures in `tests/fixtures/`.
