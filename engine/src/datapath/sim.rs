//! The in-process datapath: devices are ports of a [`nicsim::Network`], all driven from one thread.
//! The network sits behind a mutex only so that a device is `Send` (a [`Context`](crate::verbs::Context)
//! can move to a progress thread); the lock is never contended.

use super::{Datapath, TxError};
use frame::Frame;
use nicsim::{LinkConfig, Network, PortId};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

#[derive(Debug)]
struct Shared {
    net: Network,
    neighbours: HashMap<IpAddr, [u8; 6]>,
    ports: Vec<SimDevice>,
}

#[derive(Debug)]
struct SimDevice {
    name: String,
    port: PortId,
    ip: IpAddr,
    mac: [u8; 6],
    open: bool,
}

/// A simulated network with named devices on it. Clones share the same network.
#[derive(Debug, Clone)]
pub struct SimNet {
    shared: Arc<Mutex<Shared>>,
}

/// A device on a [`SimNet`]: one port.
#[derive(Debug)]
pub struct SimPort {
    shared: Arc<Mutex<Shared>>,
    port: PortId,
    mac: [u8; 6],
    gid: IpAddr,
}

/// The shared network, whatever a panicking holder left (each step leaves it consistent).
fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SimNet {
    /// An empty network whose impairments draw from `seed`.
    pub fn new(seed: u64) -> SimNet {
        SimNet {
            shared: Arc::new(Mutex::new(Shared {
                net: Network::new(seed),
                neighbours: HashMap::new(),
                ports: Vec::new(),
            })),
        }
    }

    /// Two devices, `sim0` (10.0.0.1) and `sim1` (10.0.0.2), joined by a cable whose two directions
    /// have the given impairments.
    pub fn pair(seed: u64, a_to_b: LinkConfig, b_to_a: LinkConfig) -> (SimNet, SimPort, SimPort) {
        let net = SimNet::new(seed);
        let mut s = lock(&net.shared);
        let mut port = |name: &str, ip: Ipv4Addr, n: u8| {
            let mac = [2, 0, 0, 0, 0, n];
            let port = s.net.add_port(mac);
            let ip = IpAddr::V4(ip);
            s.neighbours.insert(ip, mac);
            s.ports.push(SimDevice { name: name.to_string(), port, ip, mac, open: true });
            SimPort { shared: net.shared.clone(), port, mac, gid: ip }
        };
        let a = port("sim0", Ipv4Addr::new(10, 0, 0, 1), 1);
        let b = port("sim1", Ipv4Addr::new(10, 0, 0, 2), 2);
        // Two fresh ports always connect.
        let _ = s.net.connect(a.port, b.port, a_to_b, b_to_a);
        drop(s);
        (net, a, b)
    }

    /// Adds a device with this name and IP address (its MAC is 02:00:00:00:xx:yy by creation order)
    /// and returns it opened.
    pub fn add_port(&self, name: &str, ip: IpAddr) -> Result<SimPort, &'static str> {
        self.add_device(name, ip)?;
        self.open(name)
    }

    /// Adds a device without opening it; [`open`](Self::open) it by name.
    pub fn add_device(&self, name: &str, ip: IpAddr) -> Result<PortId, &'static str> {
        let mut s = lock(&self.shared);
        if s.ports.iter().any(|d| d.name == name) {
            return Err("device name in use");
        }
        let n = s.ports.len() as u16 + 1;
        let mac = [2, 0, 0, 0, (n >> 8) as u8, n as u8];
        let port = s.net.add_port(mac);
        let ip = ip.to_canonical();
        s.neighbours.insert(ip, mac);
        s.ports.push(SimDevice { name: name.to_string(), port, ip, mac, open: false });
        Ok(port)
    }

    /// Opens a device by name (`ibv_open_device`). A device is opened once: a second open would
    /// steal the first one's frames.
    pub fn open(&self, name: &str) -> Result<SimPort, &'static str> {
        let mut s = lock(&self.shared);
        let d = s.ports.iter_mut().find(|d| d.name == name).ok_or("no device of that name")?;
        if d.open {
            return Err("device already open");
        }
        d.open = true;
        Ok(SimPort { shared: self.shared.clone(), port: d.port, mac: d.mac, gid: d.ip })
    }

    /// Runs `f` on the network (to connect ports, change links, read counters or the tap).
    pub fn with<R>(&self, f: impl FnOnce(&mut Network) -> R) -> R {
        f(&mut lock(&self.shared).net)
    }

    /// The names and GIDs (as IP addresses) of the devices (`ibv_get_device_list`).
    pub fn devices(&self) -> Vec<(String, IpAddr)> {
        lock(&self.shared).ports.iter().map(|d| (d.name.clone(), d.ip)).collect()
    }

    /// Virtual time now.
    pub fn now(&self) -> Duration {
        self.with(|n| n.now())
    }

    /// When the next frame arrives.
    pub fn next_event(&self) -> Option<Duration> {
        self.with(|n| n.next_event())
    }

    /// Moves virtual time forward.
    pub fn advance_to(&self, t: Duration) {
        self.with(|n| n.advance_to(t));
    }
}

impl SimPort {
    /// The port on the network.
    pub fn port(&self) -> PortId {
        self.port
    }
}

impl Drop for SimPort {
    /// Closing a device lets it be opened again.
    fn drop(&mut self) {
        if let Ok(mut s) = self.shared.try_lock() {
            if let Some(d) = s.ports.iter_mut().find(|d| d.port == self.port) {
                d.open = false;
            }
        }
    }
}

impl Datapath for SimPort {
    fn now(&self) -> Duration {
        lock(&self.shared).net.now()
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn gid(&self) -> IpAddr {
        self.gid
    }

    fn resolve(&self, ip: IpAddr) -> Option<[u8; 6]> {
        lock(&self.shared).neighbours.get(&ip.to_canonical()).copied()
    }

    fn alloc(&mut self) -> Frame {
        lock(&self.shared).net.alloc()
    }

    /// Never full: the simulated network queues or drops by its links' settings.
    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        let sent = lock(&self.shared).net.transmit(self.port, frame);
        sent.map_err(|_| TxError::Failed("simulated port has no link"))
    }

    fn receive(&mut self) -> Option<Frame> {
        lock(&self.shared).net.receive(self.port)
    }

    fn recycle(&mut self, frame: Frame) {
        lock(&self.shared).net.recycle(frame);
    }

    fn link_up(&self) -> bool {
        lock(&self.shared).net.port_up(self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_and_open_devices() {
        let net = SimNet::new(1);
        let a = net.add_device("a", "10.0.0.1".parse().unwrap()).unwrap();
        let b = net.add_device("b", "::ffff:10.0.0.2".parse().unwrap()).unwrap();
        assert_eq!(net.add_device("a", "10.0.0.9".parse().unwrap()), Err("device name in use"));
        net.with(|n| n.connect(a, b, LinkConfig::default(), LinkConfig::default())).unwrap();
        let names: Vec<(String, IpAddr)> = net.devices();
        assert_eq!(names[1], ("b".to_string(), "10.0.0.2".parse().unwrap()));
        let mut pa = net.open("a").unwrap();
        assert_eq!(net.open("a").err(), Some("device already open"));
        assert_eq!(net.open("c").err(), Some("no device of that name"));
        let mut pb = net.open("b").unwrap();
        assert_eq!(pa.resolve("10.0.0.2".parse().unwrap()), Some(pb.mac()));
        let mut f = pa.alloc();
        f.buffer_mut()[..3].copy_from_slice(&[1, 2, 3]);
        f.set_len(3);
        pa.transmit(f).unwrap();
        net.advance_to(Duration::from_micros(1));
        assert_eq!(pb.receive().unwrap().as_slice(), &[1, 2, 3]);
        drop(pa);
        assert!(net.open("a").is_ok(), "a closed device opens again");
    }
}
