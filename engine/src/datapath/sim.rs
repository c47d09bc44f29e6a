//! The in-process datapath: devices are ports of a [`nicsim::Network`], all driven from one thread.

use super::Datapath;
use crate::roce::path::canonical;
use nicsim::{Frame, LinkConfig, Network, PortId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;
use std::time::Duration;

#[derive(Debug)]
struct Shared {
    net: Network,
    neighbours: HashMap<IpAddr, [u8; 6]>,
    ports: Vec<(String, PortId, IpAddr, [u8; 6])>,
}

/// A simulated network with named devices on it. Clones share the same network.
#[derive(Debug, Clone)]
pub struct SimNet {
    shared: Rc<RefCell<Shared>>,
}

/// A device on a [`SimNet`]: one port.
#[derive(Debug)]
pub struct SimPort {
    shared: Rc<RefCell<Shared>>,
    port: PortId,
    mac: [u8; 6],
    gid: IpAddr,
}

impl SimNet {
    /// An empty network whose impairments draw from `seed`.
    pub fn new(seed: u64) -> SimNet {
        SimNet {
            shared: Rc::new(RefCell::new(Shared {
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
        let a = net.add_port("sim0", Ipv4Addr::new(10, 0, 0, 1).into());
        let b = net.add_port("sim1", Ipv4Addr::new(10, 0, 0, 2).into());
        let (pa, pb) = (a.port, b.port);
        net.with(|n| n.connect(pa, pb, a_to_b, b_to_a)).unwrap_or_else(|e| unreachable!("fresh ports: {e}"));
        (net, a, b)
    }

    /// Adds a device with this name and IP address (its MAC is 02:00:00:00:xx:yy by creation order).
    pub fn add_port(&self, name: &str, ip: IpAddr) -> SimPort {
        let mut s = self.shared.borrow_mut();
        let n = s.ports.len() as u16 + 1;
        let mac = [2, 0, 0, 0, (n >> 8) as u8, n as u8];
        let port = s.net.add_port(mac);
        let ip = canonical(ip);
        s.neighbours.insert(ip, mac);
        s.ports.push((name.to_string(), port, ip, mac));
        SimPort { shared: self.shared.clone(), port, mac, gid: ip }
    }

    /// Runs `f` on the network (to connect ports, change links, read counters or the tap).
    pub fn with<R>(&self, f: impl FnOnce(&mut Network) -> R) -> R {
        f(&mut self.shared.borrow_mut().net)
    }

    /// The names and addresses of the devices.
    pub fn devices(&self) -> Vec<(String, IpAddr)> {
        self.shared.borrow().ports.iter().map(|(n, _, ip, _)| (n.clone(), *ip)).collect()
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

impl Datapath for SimPort {
    fn now(&self) -> Duration {
        self.shared.borrow().net.now()
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn gid(&self) -> IpAddr {
        self.gid
    }

    fn resolve(&self, ip: IpAddr) -> Option<[u8; 6]> {
        self.shared.borrow().neighbours.get(&canonical(ip)).copied()
    }

    fn alloc(&mut self) -> Frame {
        self.shared.borrow_mut().net.alloc()
    }

    fn transmit(&mut self, frame: Frame) -> Result<(), &'static str> {
        self.shared.borrow_mut().net.transmit(self.port, frame).map_err(|_| "simulated port has no link")
    }

    fn receive(&mut self) -> Option<Frame> {
        self.shared.borrow_mut().net.receive(self.port)
    }

    fn recycle(&mut self, frame: Frame) {
        self.shared.borrow_mut().net.recycle(frame);
    }
}
