//! The checked-in OpenAPI document (`docs/openapi.json`) is the one the code generates.
//! Regenerate with `SUNDIAL_WRITE_OPENAPI=1 cargo test -p sundial-api --test openapi`.

use std::path::PathBuf;

#[test]
fn checked_in_openapi_matches_the_code() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let generated = sundial_api::openapi::document();
    if std::env::var_os("SUNDIAL_WRITE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/openapi.json differs from the code; regenerate it with \
         SUNDIAL_WRITE_OPENAPI=1 cargo test -p sundial-api --test openapi"
    );
}
