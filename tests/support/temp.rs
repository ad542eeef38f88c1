//! A directory of a test's own under the system's temporary directory,
//! removed with everything in it when the test passes (a CI machine runs
//! the suite many times); a failing test leaves it, logs and all, for a look.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The directory; removed on drop unless the test is failing.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `<tmp>/<name>-<pid>` afresh.
    pub fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("creating the test's directory");
        TempDir(path)
    }

    /// `file` written with `text` in the directory; its path.
    pub fn write(&self, file: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(file);
        std::fs::write(&path, text).expect("writing a test file");
        path
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} (the test failed)", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
