//! `reactor run` as a child process, for tests that kill it with SIGKILL
//! mid-transaction (an in-process crash stops only between batches).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A free loopback port for a child's admin API, never one handed out
/// before in this test process: a port is let go before the child binds
/// it, and the next `bind` to port 0 may pick it again (seen: two
/// instances given one port, the second failing to start).
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        if given.insert(port) {
            return port;
        }
    }
}

/// A running `reactor run`; killed when dropped.
pub struct ReactorChild {
    child: Child,
    admin: String,
}

impl ReactorChild {
    /// Starts `reactor run -c CONFIG --instance-id INSTANCE` with its admin
    /// API on a free loopback port; its log goes to `log`.
    pub fn spawn(config: &Path, instance: &str, log: &Path) -> ReactorChild {
        ReactorChild::spawn_with(config, instance, log, &[])
    }

    /// [`ReactorChild::spawn`] with more environment variables (e.g.
    /// `REACTOR_FAILPOINT`).
    pub fn spawn_with(
        config: &Path,
        instance: &str,
        log: &Path,
        env: &[(&str, &str)],
    ) -> ReactorChild {
        let admin = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_reactor"))
            .args(["run", "--instance-id", instance, "--admin", &admin, "-c"])
            .arg(config)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("reactor run");
        ReactorChild { child, admin }
    }

    /// Waits until `/readyz` answers 200.
    pub fn wait_ready(&mut self, timeout: Duration) {
        let until = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("child status") {
                panic!("reactor run exited with {status}");
            }
            if self
                .get("/readyz")
                .is_some_and(|r| r.starts_with("HTTP/1.1 200"))
            {
                return;
            }
            assert!(Instant::now() < until, "reactor run not ready in time");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the process exits by itself (a failpoint).
    pub fn wait_exit(mut self, timeout: Duration) {
        let until = Instant::now() + timeout;
        while self.child.try_wait().expect("child status").is_none() {
            assert!(Instant::now() < until, "reactor run did not exit in time");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: whatever transaction is open stays open until fenced.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn get(&self, path: &str) -> Option<String> {
        let mut stream = TcpStream::connect(&self.admin).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.admin
        )
        .ok()?;
        let mut reply = String::new();
        stream.read_to_string(&mut reply).ok()?;
        Some(reply)
    }
}

impl Drop for ReactorChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
