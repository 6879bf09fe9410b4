//! The process's log lines, captured: every deployment a test makes installs the JSON subscriber
//! once, writing both to the test's captured output (shown when a test fails) and to a buffer a
//! test can search for what a run logged.

use std::io::Write;
use std::sync::Mutex;

static LINES: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Writes log lines to stdout and to [`LINES`].
#[derive(Debug)]
struct Tee;

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LINES.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
        std::io::stdout().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush()
    }
}

/// Installs the capturing subscriber, once per process (later calls do nothing).
pub fn capture() {
    sundial_wiring::telemetry::init_with_writer(|| Tee);
}

/// Everything logged in this process so far, one JSON object per line.
pub fn captured() -> String {
    String::from_utf8_lossy(&LINES.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
}
