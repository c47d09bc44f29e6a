//! The out-of-band TCP connection the rdma-core and perftest tools meet on (port 18515) before any
//! RoCE traffic, shared by `softrdma pingpong` and `softrdma perf --perftest`, and the source
//! address a side takes when it is given none ([`route_source`]).

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// How long a client retries a refused or unreachable server (the stock tools retry the same way
/// while their server starts; a VM's address answers ARP only once it is up).
pub const CONNECT_RETRY: Duration = Duration::from_secs(60);

/// The longest line a JSON exchange (`perf --backend udp|afxdp`) accepts: a hello of 256 QPs is
/// about 20 KiB.
pub const MAX_LINE: usize = 64 * 1024;

/// How long a side waits for its peer's next exchange message by default ([`exchange_timeout`]).
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a side waits for its peer's next exchange message before it gives up: the
/// `SOFTRDMA_EXCHANGE_TIMEOUT` environment variable in seconds if set (and above 0), otherwise
/// [`EXCHANGE_TIMEOUT`]. A peer that connects and says nothing gets this clear error instead of
/// keeping the side waiting for ever.
pub fn exchange_timeout() -> Duration {
    std::env::var("SOFTRDMA_EXCHANGE_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(EXCHANGE_TIMEOUT, Duration::from_secs)
}

fn silent(who: &str, timeout: Duration, got: usize) -> String {
    let s = timeout.as_secs_f64();
    if got == 0 {
        format!("the {who} sent nothing for {s} s (SOFTRDMA_EXCHANGE_TIMEOUT)")
    } else {
        format!("the {who} sent {got} bytes and then nothing for {s} s (SOFTRDMA_EXCHANGE_TIMEOUT)")
    }
}

/// Reads one line (without its `\n`) of at most [`MAX_LINE`] bytes from a blocking stream within
/// `timeout` in all (a peer trickling bytes does not stretch it). `who` names the peer in errors.
pub fn read_line_within(
    r: &mut BufReader<TcpStream>,
    timeout: Duration,
    who: &str,
) -> Result<Vec<u8>, String> {
    let deadline = Instant::now() + timeout;
    let mut line = Vec::new();
    let result = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(silent(who, timeout, line.len()));
        }
        if let Err(e) = r.get_ref().set_read_timeout(Some(left)) {
            break Err(format!("exchange connection: {e}"));
        }
        let avail = match r.fill_buf() {
            Ok(b) => b,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                continue;
            }
            Err(e) => break Err(format!("exchange connection: {e}")),
        };
        if avail.is_empty() {
            break Err(if line.is_empty() {
                format!("the {who} closed the connection")
            } else {
                format!("the {who} closed the connection in the middle of a line ({} bytes)", line.len())
            });
        }
        let (take, end) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        line.extend_from_slice(&avail[..take]);
        r.consume(take);
        if line.len() > MAX_LINE + usize::from(end) {
            break Err(format!("the {who} sent a line longer than {} KiB", MAX_LINE / 1024));
        }
        if end {
            line.pop();
            break Ok(line);
        }
    };
    let _ = r.get_ref().set_read_timeout(None);
    result
}

/// Reads exactly `buf.len()` bytes from a blocking stream within `timeout` in all; `what` names
/// the message in errors ("the server's address").
pub fn read_exact_within(
    tcp: &mut TcpStream,
    buf: &mut [u8],
    timeout: Duration,
    what: &str,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut got = 0;
    let result = loop {
        if got == buf.len() {
            break Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(format!(
                "reading {what}: the peer sent {got} of {} bytes and then nothing for {} s (SOFTRDMA_EXCHANGE_TIMEOUT)",
                buf.len(),
                timeout.as_secs_f64()
            ));
        }
        if let Err(e) = tcp.set_read_timeout(Some(left)) {
            break Err(format!("reading {what}: {e}"));
        }
        match tcp.read(&mut buf[got..]) {
            Ok(0) => {
                break Err(format!(
                    "reading {what}: the peer closed the connection after {got} of {} bytes",
                    buf.len()
                ));
            }
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => break Err(format!("reading {what}: {e}")),
        }
    };
    let _ = tcp.set_read_timeout(None);
    result
}

/// Connects to `server` (client role) or waits for one client on `port` (server role), from or on
/// `local` if given (any address otherwise). Returns the stream and this side's address on it: the
/// local GID defaults to it, so a server needs no address option.
pub fn meet(
    server: Option<&str>,
    port: u16,
    local: Option<Ipv4Addr>,
) -> Result<(TcpStream, Ipv4Addr), String> {
    let stream = match server {
        Some(host) => {
            let give_up = Instant::now() + CONNECT_RETRY;
            loop {
                let attempt = match local {
                    None => TcpStream::connect((host, port)),
                    Some(ip) => connect_from(ip, host, port),
                };
                match attempt {
                    Ok(s) => break s,
                    Err(e)
                        if matches!(
                            e.kind(),
                            ErrorKind::ConnectionRefused
                                | ErrorKind::HostUnreachable
                                | ErrorKind::NetworkUnreachable
                        ) && Instant::now() < give_up =>
                    {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    Err(e) => return Err(format!("connecting to {host}:{port}: {e}")),
                }
            }
        }
        None => {
            let l = TcpListener::bind((local.unwrap_or(Ipv4Addr::UNSPECIFIED), port))
                .map_err(|e| format!("listening on TCP port {port}: {e}"))?;
            l.accept().map_err(|e| format!("accepting on TCP port {port}: {e}"))?.0
        }
    };
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let peer = stream.peer_addr().map_err(|e| e.to_string())?;
    tracing::info!(%peer, port, role = if server.is_some() { "client" } else { "server" }, "exchange: connected");
    match stream.local_addr().map_err(|e| e.to_string())?.ip() {
        IpAddr::V4(ip) => Ok((stream, ip)),
        IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
            Some(v4) => Ok((stream, v4)),
            None => Err(format!("the exchange runs over IPv6 ({ip}); the datapaths are IPv4 only")),
        },
    }
}

/// A TCP connection to `host:port` from `local` (bound before connecting).
fn connect_from(local: Ipv4Addr, host: &str, port: u16) -> std::io::Result<TcpStream> {
    use std::net::{SocketAddr, SocketAddrV4, ToSocketAddrs};
    let to = (host, port)
        .to_socket_addrs()?
        .find(SocketAddr::is_ipv4)
        .ok_or_else(|| std::io::Error::new(ErrorKind::NotFound, format!("{host} has no IPv4 address")))?;
    let fd = rustix::net::socket(rustix::net::AddressFamily::INET, rustix::net::SocketType::STREAM, None)?;
    rustix::net::bind(&fd, &SocketAddrV4::new(local, 0))?;
    rustix::net::connect(&fd, &to)?;
    Ok(TcpStream::from(fd))
}

/// The source address the kernel's route towards `to` chooses (a UDP socket connected there;
/// nothing is sent).
pub fn route_source(to: Ipv4Addr) -> Result<Ipv4Addr, String> {
    let probe = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| e.to_string())?;
    probe.connect((to, 9)).map_err(|e| format!("no route to {to}: {e}"))?;
    match probe.local_addr().map_err(|e| e.to_string())?.ip() {
        IpAddr::V4(ip) => Ok(ip),
        IpAddr::V6(_) => Err(format!("no IPv4 route to {to}")),
    }
}

/// A random 24-bit PSN from the kernel's cryptographic generator, getrandom(2) (the tools draw
/// theirs from lrand48 seeded with the time and pid): an off-path host spoofing the peer must guess
/// it. Not aws-lc's generator: its first use seeds it from CPU jitter, which took 32 of the 36 ms
/// of CPU a 10-message `perf write` client used on this project's 2-core machine, and about 0.3 s
/// in an emulated VM, for 3 bytes. Where the system call is refused (a seccomp filter, an old
/// kernel), aws-lc's.
pub fn random_psn() -> u32 {
    let mut b = [0u8; 4];
    match rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()) {
        Ok(4) => u32::from_ne_bytes(b) & 0xFF_FFFF,
        _ => u32::from_ne_bytes(tss::kdf::random()) & 0xFF_FFFF,
    }
}

/// The exchange connection of one side: fixed-size messages, the client writing first and the
/// server reading first, as perftest's `ctx_xchg_data` does. While it waits for the peer it calls
/// `idle`, so the engine keeps answering RoCE traffic; `idle` returns whether the peer showed signs
/// of life there (RoCE frames received), which counts like bytes on the connection: a bandwidth run
/// through a lossy link can keep the connection silent for minutes.
pub struct Exchange {
    tcp: TcpStream,
    client: bool,
    /// Give up when the peer has sent nothing for this long.
    pub patience: Duration,
}

impl Exchange {
    /// Wraps a connected stream.
    pub fn new(tcp: TcpStream, client: bool) -> Result<Exchange, String> {
        tcp.set_nonblocking(true).map_err(|e| e.to_string())?;
        Ok(Exchange { tcp, client, patience: Duration::from_secs(120) })
    }

    /// Whether this side is the client.
    pub fn is_client(&self) -> bool {
        self.client
    }

    /// Sends `mine` and receives exactly `theirs.len()` bytes, in the order of this side's role.
    pub fn xchg(
        &mut self,
        mine: &[u8],
        theirs: &mut [u8],
        idle: &mut dyn FnMut() -> Result<bool, String>,
    ) -> Result<(), String> {
        if self.client {
            self.send(mine, idle)?;
            self.recv(theirs, idle)?;
        } else {
            self.recv(theirs, idle)?;
            self.send(mine, idle)?;
        }
        tracing::debug!(sent = mine.len(), received = theirs.len(), "exchange: message swapped");
        Ok(())
    }

    /// Writes all of `buf`.
    pub fn send(
        &mut self,
        mut buf: &[u8],
        idle: &mut dyn FnMut() -> Result<bool, String>,
    ) -> Result<(), String> {
        let mut give_up = Instant::now() + self.patience;
        while !buf.is_empty() {
            match self.tcp.write(buf) {
                Ok(0) => return Err("the peer closed the exchange connection".into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < give_up => {
                    if idle()? {
                        give_up = Instant::now() + self.patience;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Err("the peer stopped reading".into()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("exchange connection: {e}")),
            }
        }
        Ok(())
    }

    /// Reads exactly `buf.len()` bytes.
    pub fn recv(
        &mut self,
        buf: &mut [u8],
        idle: &mut dyn FnMut() -> Result<bool, String>,
    ) -> Result<(), String> {
        let mut give_up = Instant::now() + self.patience;
        let mut got = 0;
        while got < buf.len() {
            match self.tcp.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(format!(
                        "the peer closed the exchange connection ({got} of a {}-byte message read)",
                        buf.len()
                    ));
                }
                Ok(n) => {
                    got += n;
                    give_up = Instant::now() + self.patience;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < give_up => {
                    if idle()? {
                        give_up = Instant::now() + self.patience;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    return Err(format!("the peer sent nothing for {} s", self.patience.as_secs()));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("exchange connection: {e}")),
            }
        }
        Ok(())
    }

    /// Sends `msg` and then reads whatever the peer still sends until it closes (or `linger`
    /// passes): the tools end with a `"done"` each way.
    pub fn finish(&mut self, msg: &[u8], linger: Duration, idle: &mut dyn FnMut() -> Result<bool, String>) {
        if self.send(msg, idle).is_err() {
            return;
        }
        tracing::debug!(bytes = msg.len(), "exchange: closing message sent");
        let until = Instant::now() + linger;
        let mut sink = [0u8; 64];
        while Instant::now() < until {
            match self.tcp.read(&mut sink) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if idle().is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_writes_first_server_reads_first() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut x = Exchange::new(s, false).unwrap();
            let mut got = [0u8; 3];
            x.xchg(b"srv!", &mut got, &mut || Ok(false)).unwrap();
            assert_eq!(&got, b"cli");
            let mut more = [0u8; 2];
            x.xchg(b"ok", &mut more, &mut || Ok(false)).unwrap();
            more
        });
        let (s, local) = meet(Some("127.0.0.1"), port, None).unwrap();
        assert_eq!(local, Ipv4Addr::LOCALHOST);
        let mut x = Exchange::new(s, true).unwrap();
        let mut got = [0u8; 4];
        x.xchg(b"cli", &mut got, &mut || Ok(false)).unwrap();
        assert_eq!(&got, b"srv!");
        let mut ok = [0u8; 2];
        x.xchg(b"hi", &mut ok, &mut || Ok(false)).unwrap();
        assert_eq!(&ok, b"ok");
        assert_eq!(&server.join().unwrap(), b"hi");
    }

    #[test]
    fn the_route_source_is_the_address_the_kernel_sends_from() {
        assert_eq!(route_source(Ipv4Addr::LOCALHOST), Ok(Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn a_closed_peer_is_an_error_not_a_hang() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || drop(l.accept().unwrap()));
        let (s, _) = meet(Some("127.0.0.1"), port, Some(Ipv4Addr::new(127, 0, 0, 3))).unwrap();
        t.join().unwrap();
        let mut x = Exchange::new(s, true).unwrap();
        let mut buf = [0u8; 8];
        let e = x.recv(&mut buf, &mut || Ok(false)).unwrap_err();
        assert!(e.contains("closed"), "{e}");
    }

    #[test]
    fn psns_are_24_bits_drawn_at_random() {
        let psns: std::collections::HashSet<u32> = (0..8).map(|_| random_psn()).collect();
        assert!(psns.iter().all(|&p| p <= 0xFF_FFFF));
        assert!(psns.len() > 1, "drawn, not fixed: {psns:?}");
    }
}
