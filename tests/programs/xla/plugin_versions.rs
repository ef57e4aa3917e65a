//! Plugin checks against small fake plugins built with the C compiler that
//! links Rust on this platform (`cc`): a wrong major version, a null API
//! table, and a table too short for the functions infeed calls.
#![cfg(feature = "xla")]

use std::path::PathBuf;
use std::process::Command;

use infeed::xla::{Plugin, XlaError};

/// Builds a shared library whose `GetPjrtApi` returns a table with this
/// version and `struct_size` (or null when `major` is negative).
fn fake_plugin(dir: &std::path::Path, name: &str, major: i32, minor: i32) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    let so = dir.join(format!("{name}.so"));
    let body = if major < 0 {
        "const void* GetPjrtApi(void) { return 0; }".to_owned()
    } else {
        format!(
            "#include <stddef.h>
struct V {{ size_t struct_size; void* ext; int major; int minor; }};
struct Api {{ size_t struct_size; void* ext; struct V v; }};
static const struct Api api = {{ sizeof(struct Api), 0, {{ sizeof(struct V), 0, {major}, {minor} }} }};
const struct Api* GetPjrtApi(void) {{ return &api; }}"
        )
    };
    std::fs::write(&src, body).unwrap();
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .expect("a C compiler (cc) to build the fake plugins");
    assert!(status.success());
    so
}

#[test]
fn other_major_version_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let so = fake_plugin(dir.path(), "v1", 1, 3);
    let err = Plugin::load(&so).unwrap_err();
    assert!(
        matches!(
            err,
            XlaError::ApiVersion {
                plugin_major: 1,
                plugin_minor: 3,
                ours_major: 0,
                ours_minor: 81,
                ..
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("implements PJRT C API 1.3; infeed's bindings are 0.81"),
        "{msg}"
    );
}

#[test]
fn null_table_is_not_a_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let so = fake_plugin(dir.path(), "null", -1, 0);
    let err = Plugin::load(&so).unwrap_err();
    assert!(
        matches!(&err, XlaError::NotAPlugin { message, .. } if message == "GetPjrtApi returned null"),
        "{err:?}"
    );
}

#[test]
fn missing_functions_are_named() {
    // Major 0 but a table that ends after the version: an old plugin.
    let dir = tempfile::tempdir().unwrap();
    let so = fake_plugin(dir.path(), "short", 0, 1);
    let err = Plugin::load(&so).unwrap_err();
    assert!(
        matches!(
            err,
            XlaError::Unsupported {
                function: "PJRT_Plugin_Initialize",
                major: 0,
                minor: 1
            }
        ),
        "{err:?}"
    );
}
