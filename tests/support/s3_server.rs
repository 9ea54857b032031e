//! A real S3-compatible endpoint for tests: moto's server mode (PyPI
//! `moto[server]`, pinned and installed by `scripts/install-s3-server.sh`),
//! the stand-in for R2's S3 API. Each [`S3Server`] is its own process on a
//! free loopback port, killed when dropped. Std only, so every test crate can
//! include it with `#[path]`.
//!
//! Nothing is skipped: if the server cannot be installed or does not start,
//! the test fails saying why.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Access key the tests use (moto accepts any unless authentication is on).
pub const ACCESS_KEY: &str = "ledgertestkey";
pub const SECRET_KEY: &str = "ledgertestsecret";

/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    // Both including crates sit at depth 1 or 2; walk up to the workspace root.
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join("scripts/install-s3-server.sh").exists() {
        assert!(
            dir.pop(),
            "scripts/install-s3-server.sh not found above the crate"
        );
    }
    dir
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Runs the idempotent install script once per test process.
fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let script = repo().join("scripts/install-s3-server.sh");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} failed, so the S3 tests cannot run (they need moto's server from PyPI):\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// A free loopback port: bound by the OS, released for the server.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

pub struct S3Server {
    child: Child,
    pub port: u16,
    /// The server's stderr (its request log), kept in a file: a pipe nobody
    /// drains would stall the server once full.
    log: PathBuf,
}

impl S3Server {
    /// A server with moto's defaults (no authentication: any key is accepted).
    pub fn start() -> S3Server {
        S3Server::start_with(&[])
    }

    /// A server that authenticates every request: an access key it does
    /// not know is refused with `InvalidAccessKeyId`, as R2 refuses one.
    pub fn start_authenticating() -> S3Server {
        S3Server::start_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")])
    }

    fn start_with(env: &[(&str, &str)]) -> S3Server {
        install();
        // The port is free when chosen but may be taken before moto binds
        // it: a server that exits at once is started again on another port.
        let mut failures = Vec::new();
        for _ in 0..3 {
            let port = free_port();
            let log =
                std::env::temp_dir().join(format!("ledger-moto-{}-{port}.log", std::process::id()));
            let log_file = std::fs::File::create(&log).expect("create the moto log file");
            let mut cmd = Command::new(python());
            cmd.args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
            for (k, v) in env {
                cmd.env(k, v);
            }
            let child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {} -m moto.server: {e}", python()));
            let mut server = S3Server { child, port, log };
            match server.wait_until_accepting() {
                Ok(()) => return server,
                Err(why) => failures.push(why),
            }
        }
        panic!("the moto server did not start:\n{}", failures.join("\n"));
    }

    /// Polls the port until the server answers an HTTP request; the
    /// server's log if it exits first. A connection alone proves nothing: a
    /// port in the ephemeral range can connect to itself (TCP simultaneous
    /// open) before the server binds it, and the next request is refused.
    fn wait_until_accepting(&mut self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if http_request(self.port, "GET", "/").is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait().expect("poll the moto server") {
                let err = std::fs::read_to_string(&self.log).unwrap_or_default();
                return Err(format!(
                    "moto server exited ({status}) before accepting on 127.0.0.1:{}:\n{err}",
                    self.port
                ));
            }
            assert!(
                started.elapsed() < START_TIMEOUT,
                "moto server not accepting on 127.0.0.1:{} after {START_TIMEOUT:?}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment a process needs to reach this server, as
    /// `AmazonS3Builder::from_env` reads it (region left to the default).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ENDPOINT_URL".into(), self.endpoint()),
            ("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET_KEY.into()),
            ("AWS_ALLOW_HTTP".into(), "true".into()),
        ]
    }

    /// Creates a bucket (object_store has no call for it): one plain
    /// `PUT /bucket`, which moto accepts unsigned.
    pub fn create_bucket(&self, bucket: &str) {
        let reply = http_request(self.port, "PUT", &format!("/{bucket}"))
            .unwrap_or_else(|e| panic!("create bucket {bucket} on 127.0.0.1:{}: {e}", self.port));
        assert!(
            reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.0 200"),
            "create bucket {bucket}: {reply}"
        );
    }
}

/// One request without a body on a fresh connection, the whole reply read
/// until the server closes it (the request says `Connection: close`). A
/// reply that does not start as HTTP's does is an error at once: a socket
/// connected to itself echoes the request back and would otherwise wait for
/// the timeout.
fn http_request(port: u16, method: &str, path: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 5];
    s.read_exact(&mut head)?;
    if &head != b"HTTP/" {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not an HTTP reply: {:?}", String::from_utf8_lossy(&head)),
        ));
    }
    let mut reply = String::from("HTTP/");
    s.read_to_string(&mut reply)?;
    Ok(reply)
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// `cmd` with every `AWS_*` variable of the test's own environment removed
/// and `env` set: the child sees only what the test means it to.
pub fn with_env<'a>(cmd: &'a mut Command, env: &[(String, String)]) -> &'a mut Command {
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// What [`FaultyProxy`] does to a request instead of forwarding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer it with this status and no body, without forwarding it.
    Status(u16),
    /// Forward it without its body (an intermediary that truncates an
    /// upload): the server stores an empty object and says it did.
    EmptyBody,
    /// Answer it with this status and an S3 error body of this code
    /// (`ExpiredToken`, `InvalidAccessKeyId`), without forwarding it.
    S3Error(u16, &'static str),
}

/// The fault for a request, given its method, its path (query included)
/// and how many requests of that method and path came before it (0 for
/// the first); `None` forwards it as it is.
pub type FaultRule = dyn Fn(&str, &str, usize) -> Option<Fault> + Send + Sync;

/// A mock, for the faults a real store cannot be made to produce on demand
/// (a 500 or a 404 in the middle of a run, an upload cut short): an HTTP
/// proxy in front of an [`S3Server`] that forwards every request, one per
/// connection, except those its rule faults. Point the tool's
/// `AWS_ENDPOINT_URL` at [`FaultyProxy::endpoint`].
pub struct FaultyProxy {
    pub port: u16,
}

impl FaultyProxy {
    pub fn start(upstream: u16, rule: Box<FaultRule>) -> FaultyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let rule: std::sync::Arc<FaultRule> = rule.into();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::<
            String,
            usize,
        >::new()));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (rule, seen) = (rule.clone(), seen.clone());
                std::thread::spawn(move || {
                    let _ = proxy_one(client, upstream, &*rule, &seen);
                });
            }
        });
        FaultyProxy { port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `server`'s environment ([`S3Server::env`]) with this proxy as the
    /// endpoint.
    pub fn env(&self, server: &S3Server) -> Vec<(String, String)> {
        let mut env = server.env();
        env[0].1 = self.endpoint();
        env
    }
}

/// One request from `client`: faulted by `rule`, or forwarded to the
/// server with `Connection: close`, its body (however encoded) copied on
/// while the reply is piped back.
fn proxy_one(
    mut client: TcpStream,
    upstream: u16,
    rule: &FaultRule,
    seen: &std::sync::Mutex<std::collections::HashMap<String, usize>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request = lines.next().unwrap_or("").split(' ');
    let (method, path) = (request.next().unwrap_or(""), request.next().unwrap_or(""));
    let nth = {
        let mut seen = seen.lock().unwrap();
        let n = seen.entry(format!("{method} {path}")).or_insert(0);
        *n += 1;
        *n - 1
    };
    let fault = rule(method, path, nth);
    if let Some(Fault::Status(status)) = fault {
        let reply =
            format!("HTTP/1.1 {status} Injected\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return client.write_all(reply.as_bytes());
    }
    if let Some(Fault::S3Error(status, code)) = fault {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
             <Message>Injected</Message></Error>"
        );
        let reply = format!(
            "HTTP/1.1 {status} Injected\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        return client.write_all(reply.as_bytes());
    }
    let empty = fault == Some(Fault::EmptyBody);
    let mut forwarded = format!("{method} {path} HTTP/1.1\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or("").to_ascii_lowercase();
        let body_header = ["content-length", "transfer-encoding", "content-md5"]
            .contains(&name.as_str())
            || name.starts_with("x-amz-content-sha256")
            || name.starts_with("x-amz-checksum");
        if name == "connection" || (empty && body_header) {
            continue;
        }
        forwarded.push_str(line);
        forwarded.push_str("\r\n");
    }
    if empty {
        forwarded.push_str("Content-Length: 0\r\n");
    }
    forwarded.push_str("Connection: close\r\n\r\n");
    let mut server = TcpStream::connect(("127.0.0.1", upstream))?;
    server.write_all(forwarded.as_bytes())?;
    // The rest of the body, dropped for `EmptyBody`.
    let (mut from_client, mut to_server) = (client.try_clone()?, server.try_clone()?);
    if !empty {
        to_server.write_all(&buf[head_end..])?;
    }
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = from_client.read(&mut chunk) {
            if n == 0 || (!empty && to_server.write_all(&chunk[..n]).is_err()) {
                break;
            }
        }
    });
    std::io::copy(&mut server, &mut client)?;
    let _ = client.shutdown(std::net::Shutdown::Both);
    Ok(())
}
