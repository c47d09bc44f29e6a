//! rdma_cm on a [`Context`]: connection identifiers, event channels, address and route resolution,
//! listen / connect / accept / reject / disconnect, and the QP attributes that follow from the
//! exchange, over the port's [`Cm`] on QP1.
//!
//! This is what librdmacm and the kernel's rdma_cm do together, shaped as the Rust API: an ID with
//! a QP attached ([`Context::cm_attach_qp`]) has it moved through INIT, RTR and RTS as the
//! exchange goes (as librdmacm does for `rdma_create_qp` QPs); without one, the consumer takes the
//! attributes from [`Context::cm_qp_attr`] and calls [`Context::cm_establish`] itself.
//!
//! Addresses follow rdma_cm over RoCEv2: the service ID is [`wire::ib::cma::service_id`] of the port
//! space and port, and REQ and SIDR_REQ private data start with the [`CmaHdr`] (36 bytes) naming
//! both IP addresses and ports; the consumer's private data follows it.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use rand_xoshiro::rand_core::Rng;
use rustix::fd::BorrowedFd;
use wire::ib::cm::{private_len, rej_reason};
use wire::ib::cma::{CMA_HDR_LEN, CmaHdr, service_id};

use super::{Context, Qp};
use crate::cm::{AcceptParams, CmEvent, ConnId, ConnectParams, ReqInfo};
use crate::roce::types::{Access, AddressVector, QpAttr, QpState, QpType};
use crate::verbs::VerbsError;
use crate::verbs::cm::{
    ACK_TIMEOUT, CHANNEL_EVENTS, CmChannel, CmEventKind, CmId, CmIdEvent, ConnParam, EPHEMERAL, Id, IdState,
    MIN_RNR_TIMER, PortSpace, RDMA_UDP_QKEY, UdParam, gid_bytes, mtu_code, mtu_of,
};
use crate::verbs::cq::Channel;
use crate::verbs::gsi::{self, GSI_UDP_PORT};
use crate::verbs::tx::offer;

/// How often an ID resolving its address looks at the neighbour table again.
const ADDR_POLL: Duration = Duration::from_millis(10);

impl Context {
    fn cm_id(&mut self, id: CmId) -> Result<&mut Id, VerbsError> {
        self.cm
            .ids
            .get_mut(id.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(VerbsError::InvalidHandle("rdma_cm ID"))
    }

    fn cm_push(&mut self, ev: CmIdEvent) {
        let Some(Some(id)) = self.cm.ids.get(ev.id.0 as usize) else { return };
        if let Some(Some(ch)) = self.cm.channels.get_mut(id.channel as usize) {
            if ch.len() < CHANNEL_EVENTS {
                ch.signal(ev);
            }
        }
    }

    fn cm_event(&mut self, id: u32, kind: CmEventKind, status: i32, param: ConnParam, ud: Option<UdParam>) {
        self.cm_push(CmIdEvent { id: CmId(id), listen_id: None, kind, status, param, ud });
    }

    /// Creates an event channel (`rdma_create_event_channel`): an eventfd readable while events
    /// wait on it.
    pub fn cm_create_channel(&mut self) -> Result<CmChannel, VerbsError> {
        let ch = Channel::new()?;
        let slot = self.cm.channels.iter().position(Option::is_none);
        let i = match slot {
            Some(i) => {
                self.cm.channels[i] = Some(ch);
                i
            }
            None => {
                self.cm.channels.push(Some(ch));
                self.cm.channels.len() - 1
            }
        };
        Ok(CmChannel(i as u32))
    }

    /// The channel's descriptor, readable while an event waits (poll it, then
    /// [`cm_get_event`](Self::cm_get_event)).
    pub fn cm_channel_fd(&self, ch: CmChannel) -> Result<BorrowedFd<'_>, VerbsError> {
        match self.cm.channels.get(ch.0 as usize) {
            Some(Some(c)) => Ok(c.fd()),
            _ => Err(VerbsError::InvalidHandle("rdma_cm event channel")),
        }
    }

    /// `ch` names a live channel.
    fn cm_channel_ok(&self, ch: CmChannel) -> Result<(), VerbsError> {
        match self.cm.channels.get(ch.0 as usize) {
            Some(Some(_)) => Ok(()),
            _ => Err(VerbsError::InvalidHandle("rdma_cm event channel")),
        }
    }

    /// Destroys a channel no ID uses any more (`rdma_destroy_event_channel`).
    pub fn cm_destroy_channel(&mut self, ch: CmChannel) -> Result<(), VerbsError> {
        self.cm_channel_ok(ch)?;
        if self.cm.ids.iter().flatten().any(|i| i.channel == ch.0) {
            return Err(VerbsError::Busy("rdma_cm event channel: IDs still use it"));
        }
        self.cm.channels[ch.0 as usize] = None;
        Ok(())
    }

    /// The next event on a channel (`rdma_get_cm_event` without the wait).
    pub fn cm_get_event(&mut self, ch: CmChannel) -> Result<Option<CmIdEvent>, VerbsError> {
        match self.cm.channels.get_mut(ch.0 as usize) {
            Some(Some(c)) => Ok(c.take()),
            _ => Err(VerbsError::InvalidHandle("rdma_cm event channel")),
        }
    }

    /// Creates an ID reporting to `ch` (`rdma_create_id`).
    pub fn cm_create_id(&mut self, ch: CmChannel, ps: PortSpace) -> Result<CmId, VerbsError> {
        self.cm_channel_ok(ch)?;
        Ok(self.cm_insert(Id::new(ch.0, ps)))
    }

    fn cm_insert(&mut self, id: Id) -> CmId {
        match self.cm.ids.iter().position(Option::is_none) {
            Some(i) => {
                self.cm.ids[i] = Some(id);
                CmId(i as u32)
            }
            None => {
                self.cm.ids.push(Some(id));
                CmId(self.cm.ids.len() as u32 - 1)
            }
        }
    }

    /// Moves an ID's events to another channel (`rdma_migrate_id`).
    pub fn cm_migrate_id(&mut self, id: CmId, ch: CmChannel) -> Result<(), VerbsError> {
        self.cm_channel_ok(ch)?;
        let old = self.cm_id(id)?.channel;
        self.cm_id(id)?.channel = ch.0;
        if let Some(Some(c)) = self.cm.channels.get_mut(old as usize) {
            c.retain(|e| e.id != id);
        }
        Ok(())
    }

    /// Destroys an ID (`rdma_destroy_id`): a listener stops listening, a connection is closed
    /// (DREQ) or its request rejected; its events not yet taken are dropped. The attached QP is
    /// not destroyed (that is `rdma_destroy_qp`'s job).
    pub fn cm_destroy_id(&mut self, id: CmId) -> Result<(), VerbsError> {
        self.cm_id(id)?;
        let now = self.dp.now();
        let Some(s) = self.cm.ids[id.0 as usize].take() else { return Ok(()) };
        if let Some(svc) = s.listen {
            self.cm.listeners.remove(&svc);
            self.cm.cm.unlisten(now, svc);
        }
        if let Some(c) = s.conn {
            self.cm.by_conn.remove(&c);
            self.cm.cm.destroy(now, c);
        }
        if let Some(Some(c)) = self.cm.channels.get_mut(s.channel as usize) {
            c.retain(|e| e.id != id);
        }
        Ok(())
    }

    /// The ID's local and remote addresses (`rdma_get_local_addr`, `rdma_get_peer_addr`).
    pub fn cm_addrs(&mut self, id: CmId) -> Result<(Option<SocketAddr>, Option<SocketAddr>), VerbsError> {
        let s = self.cm_id(id)?;
        Ok((s.local, s.remote))
    }

    /// The QP type an ID's port space and attached QP imply.
    pub fn cm_qp_type(&mut self, id: CmId) -> Result<QpType, VerbsError> {
        let s = self.cm_id(id)?;
        Ok(s.qp_type.unwrap_or(if s.ps == PortSpace::Udp { QpType::Ud } else { QpType::Rc }))
    }

    fn cm_local_ok(&self, ip: IpAddr) -> bool {
        ip.is_unspecified() || ip.to_canonical() == self.dp.gid().to_canonical()
    }

    fn cm_port_in_use(&self, ps: PortSpace, port: u16) -> bool {
        self.cm
            .ids
            .iter()
            .flatten()
            .any(|i| i.ps == ps && i.holds_port && i.local.is_some_and(|a| a.port() == port))
    }

    fn cm_ephemeral(&mut self, ps: PortSpace) -> u16 {
        let span = EPHEMERAL.end() - EPHEMERAL.start() + 1;
        for _ in 0..span {
            let p = self.cm.next_port;
            self.cm.next_port = if p >= *EPHEMERAL.end() { *EPHEMERAL.start() } else { p + 1 };
            if !self.cm_port_in_use(ps, p) {
                return p;
            }
        }
        0
    }

    /// Binds an ID to a local address (`rdma_bind_addr`): this device's address or the wildcard;
    /// port 0 picks a free one.
    pub fn cm_bind(&mut self, id: CmId, addr: SocketAddr) -> Result<(), VerbsError> {
        let ps = self.cm_id(id)?.ps;
        if !self.cm_local_ok(addr.ip()) {
            return Err(VerbsError::AddrNotAvailable);
        }
        let port = match addr.port() {
            0 => self.cm_ephemeral(ps),
            p if self.cm_port_in_use(ps, p) => return Err(VerbsError::AddrInUse),
            p => p,
        };
        let s = self.cm_id(id)?;
        if s.state != IdState::Idle {
            return Err(VerbsError::CmState("rdma_bind_addr: the ID is bound already"));
        }
        s.local = Some(SocketAddr::new(addr.ip(), port));
        s.state = IdState::AddrBound;
        s.holds_port = true;
        Ok(())
    }

    /// Listens on the bound address (`rdma_listen`); connect requests arrive as
    /// [`CmEventKind::ConnectRequest`] events with IDs of their own.
    pub fn cm_listen(&mut self, id: CmId, backlog: usize) -> Result<(), VerbsError> {
        if self.cm_id(id)?.state == IdState::Idle {
            // rdma_listen on an unbound ID binds it to the wildcard and a free port.
            let any = SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);
            self.cm_bind(id, any)?;
        }
        let s = self.cm_id(id)?;
        if s.state != IdState::AddrBound {
            return Err(VerbsError::CmState("rdma_listen: the ID is not bound"));
        }
        let (ps, port) = (s.ps, s.local.map_or(0, |a| a.port()));
        let svc = service_id(ps.code(), port);
        self.cm
            .cm
            .listen(svc, if backlog == 0 { 1024 } else { backlog })
            .map_err(|_| VerbsError::AddrInUse)?;
        self.cm.listeners.insert(svc, id.0);
        let s = self.cm_id(id)?;
        s.listen = Some(svc);
        s.state = IdState::Listening;
        Ok(())
    }

    /// Resolves the destination (`rdma_resolve_addr`): the device is this one; the peer's MAC is
    /// looked up in the kernel's neighbour table. Reports [`CmEventKind::AddrResolved`] or
    /// [`CmEventKind::AddrError`] on the ID's channel.
    pub fn cm_resolve_addr(
        &mut self,
        id: CmId,
        src: Option<SocketAddr>,
        dst: SocketAddr,
    ) -> Result<(), VerbsError> {
        self.cm_resolve_addr_within(id, src, dst, Duration::from_secs(2))
    }

    /// [`cm_resolve_addr`](Self::cm_resolve_addr) giving up after `timeout` (`rdma_resolve_addr`'s
    /// `timeout_ms`): a neighbour the kernel does not know yet is asked for, and the event comes
    /// when it answers, or `AddrError` (`EHOSTUNREACH`) when the time is up.
    pub fn cm_resolve_addr_within(
        &mut self,
        id: CmId,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        timeout: Duration,
    ) -> Result<(), VerbsError> {
        let s = self.cm_id(id)?;
        if !matches!(s.state, IdState::Idle | IdState::AddrBound) {
            return Err(VerbsError::CmState("rdma_resolve_addr: the ID is in use"));
        }
        if s.state == IdState::Idle {
            let src = src.unwrap_or_else(|| SocketAddr::new(self.dp.gid().to_canonical(), 0));
            self.cm_bind(id, src)?;
        }
        let gid = self.dp.gid().to_canonical();
        let now = self.dp.now();
        let s = self.cm_id(id)?;
        s.remote = Some(SocketAddr::new(dst.ip().to_canonical(), dst.port()));
        if s.local.is_some_and(|l| l.ip().is_unspecified()) {
            s.local = s.local.map(|l| SocketAddr::new(gid, l.port()));
        }
        s.state = IdState::AddrQuery { deadline: now + timeout, next_poll: now };
        if !self.cm.querying.contains(&id.0) {
            self.cm.querying.push(id.0);
        }
        self.cm_query_addr(id.0, now);
        Ok(())
    }

    /// One look at the neighbour table for an ID resolving its address: the event when the MAC is
    /// known or the time is up; true if either happened.
    fn cm_query_addr(&mut self, id: u32, now: Duration) -> bool {
        let Some(Some(s)) = self.cm.ids.get(id as usize) else { return false };
        let (IdState::AddrQuery { deadline, .. }, Some(dst)) = (s.state, s.remote) else { return false };
        let dmac = if dst.ip() == self.dp.gid().to_canonical() {
            Some(self.dp.mac())
        } else {
            self.dp.resolve_now(dst.ip())
        };
        let Some(Some(s)) = self.cm.ids.get_mut(id as usize) else { return false };
        match dmac {
            Some(mac) => {
                s.dmac = Some(mac);
                s.state = IdState::AddrResolved;
                self.cm.gsi.learn(dst.ip(), mac);
                self.cm_event(id, CmEventKind::AddrResolved, 0, ConnParam::default(), None);
                true
            }
            None if now >= deadline => {
                s.state = IdState::AddrBound;
                self.cm_event(id, CmEventKind::AddrError, -(libc::EHOSTUNREACH), ConnParam::default(), None);
                true
            }
            None => {
                s.state = IdState::AddrQuery { deadline, next_poll: now + ADDR_POLL };
                false
            }
        }
    }

    /// Resolves the route (`rdma_resolve_route`); over RoCEv2 the path is the resolved address, so
    /// this reports [`CmEventKind::RouteResolved`] at once.
    pub fn cm_resolve_route(&mut self, id: CmId) -> Result<(), VerbsError> {
        let s = self.cm_id(id)?;
        if s.state != IdState::AddrResolved {
            return Err(VerbsError::CmState("rdma_resolve_route: resolve the address first"));
        }
        s.state = IdState::RouteResolved;
        self.cm_event(id.0, CmEventKind::RouteResolved, 0, ConnParam::default(), None);
        Ok(())
    }

    /// Attaches a QP to the ID (`rdma_create_qp`) and moves it to INIT with rdma_cm's attributes;
    /// from then on the exchange moves it to RTR and RTS.
    pub fn cm_attach_qp(&mut self, id: CmId, qp: Qp) -> Result<(), VerbsError> {
        let qp_type = self.entry(qp)?.qp.qp_type();
        let ps = self.cm_id(id)?.ps;
        if ps != PortSpace::Ib && (ps == PortSpace::Udp) != (qp_type == QpType::Ud) {
            return Err(VerbsError::InvalidAttr("rdma_create_qp: the port space's QP type"));
        }
        let s = self.cm_id(id)?;
        s.qp_type = Some(qp_type);
        let attr = self.cm_qp_attr(id, QpState::Init)?;
        self.modify_qp(qp, QpState::Init, &attr)?;
        if qp_type == QpType::Ud {
            // A UD QP needs no peer: it is ready at once (librdmacm's ucma_init_ud_qp).
            self.modify_qp(qp, QpState::Rtr, &QpAttr::default())?;
            let rts = self.cm_qp_attr(id, QpState::Rts)?;
            self.modify_qp(qp, QpState::Rts, &rts)?;
        }
        self.cm_id(id)?.qp = Some(qp.0);
        Ok(())
    }

    /// The QP attached to the ID, if any.
    pub fn cm_qp(&mut self, id: CmId) -> Result<Option<Qp>, VerbsError> {
        Ok(self.cm_id(id)?.qp.map(Qp))
    }

    /// Detaches the QP (`rdma_destroy_qp` destroys it after this).
    pub fn cm_detach_qp(&mut self, id: CmId) -> Result<(), VerbsError> {
        self.cm_id(id)?.qp = None;
        Ok(())
    }

    /// Sets the ID's type of service (`rdma_set_option(RDMA_OPTION_ID_TOS)`), before it connects:
    /// the traffic class (the IP header's DSCP and ECN byte) of its REQ's path and of its QP
    /// ([`Context::cm_qp_attr`]); an accepted connection takes the REQ's.
    pub fn cm_set_tos(&mut self, id: CmId, tos: u8) -> Result<(), VerbsError> {
        self.cm_id(id)?.tos = tos;
        Ok(())
    }

    /// The attributes that move a QP to `state` for this connection (`rdma_init_qp_attr`).
    pub fn cm_qp_attr(&mut self, id: CmId, state: QpState) -> Result<QpAttr, VerbsError> {
        let port_mtu = self.port_mtu();
        let qp_type = self.cm_qp_type(id)?;
        let s = self.cm_id(id)?;
        let mut a = QpAttr::default();
        match (state, qp_type) {
            (QpState::Init, QpType::Ud) => a.qkey = Some(RDMA_UDP_QKEY),
            (QpState::Init, _) => {
                a.qp_access_flags = Some(
                    Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
                )
            }
            (QpState::Rtr, QpType::Ud) => {}
            (QpState::Rts, QpType::Ud) => a.sq_psn = Some(s.psn),
            (QpState::Rtr, _) => {
                let remote = s.remote.ok_or(VerbsError::CmState("rdma_init_qp_attr: not connected"))?;
                let (qpn, mtu, resp) = match (&s.req, &s.rep) {
                    (Some(r), _) => (r.remote_qpn, r.path_mtu, s.param.responder_resources),
                    (None, Some(r)) => (r.remote_qpn, mtu_code(port_mtu), s.param.responder_resources),
                    _ => return Err(VerbsError::CmState("rdma_init_qp_attr: no REQ or REP yet")),
                };
                a.path_mtu = Some(
                    mtu_of(mtu).map_or(port_mtu, |m| if m.bytes() < port_mtu.bytes() { m } else { port_mtu }),
                );
                a.dest_qp_num = Some(qpn);
                // The PSN we told the peer to start from (a REQ's or REP's starting PSN is
                // the one its sender expects to receive: rxe's rping.pcap).
                a.rq_psn = Some(s.psn);
                let mut av = AddressVector::new(remote.ip());
                av.dmac = s.dmac;
                // The traffic class of the connection's path, as rdma_cm gives it: the REQ's on
                // the passive side, the ID's type of service on the active side.
                av.traffic_class = s.req.as_ref().map_or(s.tos, |r| r.traffic_class);
                a.ah_attr = Some(av);
                a.max_dest_rd_atomic = Some(resp);
                a.min_rnr_timer = Some(MIN_RNR_TIMER);
            }
            (QpState::Rts, _) => {
                match (&s.req, &s.rep) {
                    (Some(r), _) => {
                        a.sq_psn = Some(r.starting_psn);
                        // Our own retransmission timer, not the REQ's (rxe asks for 17, 0.54 s):
                        // 67 ms recovers a loss on a LAN eight times sooner.
                        a.timeout = Some(ACK_TIMEOUT);
                        a.retry_cnt = Some(r.retry_count);
                        a.rnr_retry = Some(r.rnr_retry_count);
                    }
                    (None, Some(r)) => {
                        a.sq_psn = Some(r.starting_psn);
                        a.timeout = Some(ACK_TIMEOUT);
                        a.retry_cnt = Some(s.param.retry_count);
                        a.rnr_retry = Some(r.rnr_retry_count);
                    }
                    _ => return Err(VerbsError::CmState("rdma_init_qp_attr: no REQ or REP yet")),
                }
                a.max_rd_atomic = Some(s.param.initiator_depth);
            }
            _ => return Err(VerbsError::InvalidAttr("rdma_init_qp_attr: INIT, RTR or RTS")),
        }
        Ok(a)
    }

    /// Connects (`rdma_connect`): a REQ to the resolved peer (UD: a SIDR_REQ). Events follow:
    /// Established, Rejected, Unreachable (and ConnectResponse when no QP is attached).
    pub fn cm_connect(&mut self, id: CmId, param: &ConnParam) -> Result<(), VerbsError> {
        let now = self.dp.now();
        let port_mtu = self.port_mtu();
        let gid = self.dp.gid();
        let psn = self.cm.rng.next_u32() & 0xFF_FFFF;
        let s = self.cm_id(id)?;
        if s.state != IdState::RouteResolved {
            return Err(VerbsError::CmState("rdma_connect: resolve the route first"));
        }
        let (local, remote) =
            (s.local.unwrap_or(SocketAddr::new(gid, 0)), s.remote.unwrap_or(SocketAddr::new(gid, 0)));
        let (ud, tos) = (s.ud(), s.tos);
        // REQ transport service type: 1 for UC, 0 (RC) otherwise.
        let transport = u8::from(s.qp_type == Some(QpType::Uc));
        let hdr = CmaHdr {
            version: 0,
            src_port: local.port(),
            src: local.ip().to_canonical(),
            dst: remote.ip().to_canonical(),
        };
        let cap = if ud { private_len::SIDR_REQ } else { private_len::REQ } - CMA_HDR_LEN;
        if param.private_data.len() > cap {
            return Err(VerbsError::InvalidAttr("rdma_connect: private data too long"));
        }
        let mut pd = vec![0u8; CMA_HDR_LEN];
        hdr.emit(&mut pd).map_err(|_| VerbsError::InvalidAttr("rdma_connect: addresses"))?;
        pd.extend_from_slice(&param.private_data);
        let svc = service_id(s.ps.code(), remote.port());
        let qpn = s.qp.unwrap_or(param.qp_num);
        s.param = param.clone();
        s.psn = psn;
        let conn = if ud {
            self.cm.cm.sidr_request(now, remote.ip(), svc, &pd)
        } else {
            let p = ConnectParams {
                service_id: svc,
                qpn,
                transport,
                starting_psn: psn,
                responder_resources: param.responder_resources,
                initiator_depth: param.initiator_depth,
                path_mtu: mtu_code(port_mtu),
                retry_count: param.retry_count.min(7),
                rnr_retry_count: param.rnr_retry_count.min(7),
                srq: param.srq,
                local_ack_timeout: ACK_TIMEOUT,
                local_gid: gid_bytes(local.ip()),
                remote_gid: gid_bytes(remote.ip()),
                hop_limit: 64,
                traffic_class: tos,
                private_data: pd,
            };
            self.cm.cm.connect(now, remote.ip(), &p)
        }
        .map_err(|_| VerbsError::OutOfResources)?;
        self.cm.by_conn.insert(conn, id.0);
        let s = self.cm_id(id)?;
        s.conn = Some(conn);
        s.state = IdState::Connecting;
        Ok(())
    }

    /// Accepts a connect request (`rdma_accept`) on the ID its event named: an attached QP goes to
    /// RTR and RTS, then the REP (UD: the SIDR_REP with the QP and its Q_Key) is sent.
    pub fn cm_accept(&mut self, id: CmId, param: &ConnParam) -> Result<(), VerbsError> {
        let now = self.dp.now();
        let psn = self.cm.rng.next_u32() & 0xFF_FFFF;
        let s = self.cm_id(id)?;
        let conn = s.conn.ok_or(VerbsError::CmState("rdma_accept: not a connect request"))?;
        if s.state != IdState::Connecting || (s.req.is_none() && !s.ud()) {
            return Err(VerbsError::CmState("rdma_accept: not a connect request"));
        }
        let (ud, qp) = (s.ud(), s.qp.map(Qp));
        let qpn = qp.map_or(param.qp_num, Qp::qpn);
        s.param = param.clone();
        if ud {
            let r = self.cm.cm.sidr_reply(now, conn, 0, qpn, RDMA_UDP_QKEY, &param.private_data);
            r.map_err(|_| VerbsError::CmState("rdma_accept: the request is gone"))?;
            self.cm_id(id)?.state = IdState::Connected;
            return Ok(());
        }
        if let Some(req) = &s.req {
            // Never more than the peer can take.
            s.param.responder_resources = param.responder_resources.min(req.initiator_depth);
            s.param.initiator_depth = param.initiator_depth.min(req.responder_resources);
        }
        s.psn = psn;
        let p = AcceptParams {
            qpn,
            starting_psn: psn,
            responder_resources: s.param.responder_resources,
            initiator_depth: s.param.initiator_depth,
            rnr_retry_count: param.rnr_retry_count.min(7),
            srq: param.srq,
            private_data: param.private_data.clone(),
        };
        if let Some(qp) = qp {
            if let Err(e) = self.cm_ready_qp(id, qp) {
                let _ = self.cm.cm.reject(now, conn, rej_reason::CONSUMER_REJECT, &[]);
                return Err(e);
            }
        }
        self.cm.cm.accept(now, conn, &p).map_err(|_| VerbsError::CmState("rdma_accept: the request is gone"))
    }

    /// Moves the attached QP to RTR and RTS.
    fn cm_ready_qp(&mut self, id: CmId, qp: Qp) -> Result<(), VerbsError> {
        let rtr = self.cm_qp_attr(id, QpState::Rtr)?;
        self.modify_qp(qp, QpState::Rtr, &rtr)?;
        let rts = self.cm_qp_attr(id, QpState::Rts)?;
        self.modify_qp(qp, QpState::Rts, &rts)
    }

    /// Active, after [`CmEventKind::ConnectResponse`] (no QP attached): sends the RTU
    /// (`rdma_establish`).
    pub fn cm_establish(&mut self, id: CmId) -> Result<(), VerbsError> {
        let now = self.dp.now();
        let conn = self.cm_id(id)?.conn.ok_or(VerbsError::CmState("rdma_establish: not connecting"))?;
        self.cm.cm.establish(now, conn).map_err(|_| VerbsError::CmState("rdma_establish: no REP to answer"))
    }

    /// Rejects a connect request or a connect response (`rdma_reject`), with private data.
    pub fn cm_reject(&mut self, id: CmId, private_data: &[u8]) -> Result<(), VerbsError> {
        let now = self.dp.now();
        let s = self.cm_id(id)?;
        let conn = s.conn.ok_or(VerbsError::CmState("rdma_reject: nothing to reject"))?;
        let ud = s.ud();
        s.state = IdState::Disconnected;
        let r = if ud {
            self.cm.cm.sidr_reply(now, conn, 2, 0, 0, private_data)
        } else {
            self.cm.cm.reject(now, conn, rej_reason::CONSUMER_REJECT, private_data)
        };
        r.map_err(|_| VerbsError::CmState("rdma_reject: nothing to reject"))
    }

    /// Disconnects (`rdma_disconnect`): the QP goes to the error state (its outstanding work
    /// flushes), and a DREQ is sent, or the DREP if the peer disconnected first.
    pub fn cm_disconnect(&mut self, id: CmId) -> Result<(), VerbsError> {
        let now = self.dp.now();
        let s = self.cm_id(id)?;
        let conn = s.conn.ok_or(VerbsError::CmState("rdma_disconnect: not connected"))?;
        let qp = s.qp.map(Qp);
        if let Some(qp) = qp {
            self.modify_qp(qp, QpState::Error, &QpAttr::default())?;
        }
        self.cm
            .cm
            .disconnect(now, conn, &[])
            .map_err(|_| VerbsError::CmState("rdma_disconnect: not connected"))
    }

    /// Destroys every rdma_cm ID (the process is going): connections get their DREQ, requests
    /// not answered their REJ.
    pub fn cm_shutdown(&mut self) {
        let ids: Vec<CmId> =
            (0..self.cm.ids.len()).filter(|&i| self.cm.ids[i].is_some()).map(|i| CmId(i as u32)).collect();
        for id in ids {
            let _ = self.cm_destroy_id(id);
        }
    }

    /// Whether the connection manager has nothing in flight: no MAD to send, no DREQ waiting for
    /// its DREP.
    pub fn cm_settled(&self) -> bool {
        self.cm.cm.settled()
    }

    /// A frame for QP1 arrived.
    pub(super) fn cm_receive(
        &mut self,
        now: Duration,
        src_ip: IpAddr,
        src_mac: [u8; 6],
        pkt: &wire::ib::RoceRepr<'_>,
    ) {
        let Some(mad) = gsi::mad_of(pkt) else {
            self.stats.rx_unknown += 1;
            return;
        };
        self.cm.gsi.learn(src_ip, src_mac);
        self.cm.cm.handle_mad(now, src_ip, mad);
    }

    /// Whether the CM has MADs to send.
    pub(super) fn cm_wants_transmit(&self) -> bool {
        self.cm.cm.wants_transmit()
    }

    /// Runs the CM's timers, turns its events into rdma_cm events, sends its MADs. Returns the
    /// work done and whether the datapath still has room.
    pub(super) fn cm_progress(&mut self, now: Duration, mut room: bool) -> Result<(usize, bool), VerbsError> {
        let mut work = 0;
        if self.cm.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.cm.handle_timeout(now);
            work += 1;
        }
        while let Some(ev) = self.cm.cm.poll_event() {
            work += 1;
            self.cm_on_event(ev);
        }
        // Only the IDs resolving an address; those that left the state (resolved, failed,
        // destroyed, reused) leave the list.
        let ids = &self.cm.ids;
        let in_query =
            |i: u32| matches!(ids.get(i as usize), Some(Some(Id { state: IdState::AddrQuery { .. }, .. })));
        self.cm.querying.retain(|&i| in_query(i));
        for k in 0..self.cm.querying.len() {
            let id = self.cm.querying[k];
            let due = matches!(self.cm.ids[id as usize], Some(Id { state: IdState::AddrQuery { next_poll, .. }, .. }) if next_poll <= now);
            if due {
                work += usize::from(self.cm_query_addr(id, now));
            }
        }
        let src = (self.dp.mac(), self.dp.gid());
        let port = self.dp.udp_src_port().unwrap_or(GSI_UDP_PORT);
        while room {
            let Some((peer, traffic_class, mad)) = self.cm.cm.poll_transmit_classed() else { break };
            let Some(dmac) = self.cm.gsi.mac(peer).or_else(|| self.dp.resolve_now(peer)) else {
                // Not known yet: dropped; the CM's retry sends it again.
                continue;
            };
            let mut frame = self.dp.alloc();
            match self.cm.gsi.build(
                src,
                (dmac, peer),
                (port, self.peer_udp_port),
                traffic_class,
                &mad,
                frame.buffer_mut(),
            ) {
                Ok(n) => frame.set_len(n),
                Err(_) => {
                    self.dp.recycle(frame);
                    continue;
                }
            }
            work += 1;
            room = offer(&mut *self.dp, &mut self.stats, &mut self.pending, frame, false)?;
        }
        Ok((work, room))
    }

    fn cm_on_event(&mut self, ev: CmEvent) {
        let now = self.dp.now();
        match ev {
            CmEvent::Request(conn, req) => self.cm_on_request(conn, req),
            CmEvent::SidrRequest(conn, peer, svc, pd) => self.cm_on_sidr_request(conn, peer, svc, &pd),
            CmEvent::Reply(conn, rep) => {
                let Some(&id) = self.cm.by_conn.get(&conn) else { return };
                let Some(Some(s)) = self.cm.ids.get_mut(id as usize) else { return };
                // From the receiver's view, as rdma_cm reports it: what we may send and accept.
                let param = ConnParam {
                    private_data: rep.private_data.clone(),
                    responder_resources: rep.initiator_depth,
                    initiator_depth: rep.responder_resources,
                    retry_count: 0,
                    rnr_retry_count: rep.rnr_retry_count,
                    srq: rep.srq,
                    qp_num: rep.remote_qpn,
                };
                s.rep = Some(rep);
                match s.qp.map(Qp) {
                    Some(qp) => match self.cm_ready_qp(CmId(id), qp) {
                        Ok(()) => {
                            let _ = self.cm.cm.establish(now, conn);
                        }
                        Err(_) => {
                            let _ = self.cm.cm.reject(now, conn, rej_reason::CONSUMER_REJECT, &[]);
                            self.cm_event(id, CmEventKind::ConnectError, -(libc::EINVAL), param, None);
                        }
                    },
                    None => self.cm_event(id, CmEventKind::ConnectResponse, 0, param, None),
                }
            }
            CmEvent::Established(conn) => {
                let Some(&id) = self.cm.by_conn.get(&conn) else { return };
                let Some(Some(s)) = self.cm.ids.get_mut(id as usize) else { return };
                s.state = IdState::Connected;
                let param = match &s.rep {
                    Some(r) => ConnParam {
                        private_data: r.private_data.clone(),
                        responder_resources: r.initiator_depth,
                        initiator_depth: r.responder_resources,
                        retry_count: 0,
                        rnr_retry_count: r.rnr_retry_count,
                        srq: r.srq,
                        qp_num: r.remote_qpn,
                    },
                    None => ConnParam::default(),
                };
                self.cm_event(id, CmEventKind::Established, 0, param, None);
            }
            CmEvent::Rejected(conn, reason, pd) => {
                let Some(id) = self.cm_end(conn) else { return };
                // A rejected connection's QP is of no more use (librdmacm moves it to ERROR).
                if let Some(Some(Id { qp: Some(qp), .. })) = self.cm.ids.get(id as usize) {
                    let qp = Qp(*qp);
                    let _ = self.modify_qp(qp, QpState::Error, &QpAttr::default());
                }
                let param = ConnParam { private_data: pd, ..ConnParam::default() };
                self.cm_event(id, CmEventKind::Rejected, i32::from(reason), param, None);
            }
            CmEvent::Unreachable(conn) => {
                let Some(id) = self.cm_end(conn) else { return };
                self.cm_event(id, CmEventKind::Unreachable, -(libc::ETIMEDOUT), ConnParam::default(), None);
            }
            CmEvent::DisconnectRequest(conn, _) => {
                // Answered at once, as the kernel's rdma_cm does; the QP is left as it is until
                // the consumer's own disconnect.
                let _ = self.cm.cm.disconnect(now, conn, &[]);
                let Some(&id) = self.cm.by_conn.get(&conn) else { return };
                let Some(Some(s)) = self.cm.ids.get_mut(id as usize) else { return };
                s.state = IdState::Disconnected;
                s.down_reported = true;
                self.cm_event(id, CmEventKind::Disconnected, 0, ConnParam::default(), None);
            }
            CmEvent::Disconnected(conn) => {
                let Some(id) = self.cm_end(conn) else { return };
                let Some(Some(s)) = self.cm.ids.get_mut(id as usize) else { return };
                if !std::mem::replace(&mut s.down_reported, true) {
                    self.cm_event(id, CmEventKind::Disconnected, 0, ConnParam::default(), None);
                }
            }
            CmEvent::SidrReply(conn, info) => {
                let Some(id) = self.cm_end(conn) else { return };
                let Some(Some(s)) = self.cm.ids.get_mut(id as usize) else { return };
                let param = ConnParam {
                    private_data: info.private_data.clone(),
                    qp_num: info.qpn,
                    ..ConnParam::default()
                };
                if info.status != 0 {
                    s.state = IdState::Disconnected;
                    self.cm_event(id, CmEventKind::Unreachable, i32::from(info.status), param, None);
                    return;
                }
                s.state = IdState::Connected;
                let remote = s.remote.map_or(self.dp.gid(), |r| r.ip());
                let mut ah = AddressVector::new(remote);
                ah.dmac = s.dmac;
                let ud = UdParam { qp_num: info.qpn, qkey: info.qkey, ah };
                self.cm_event(id, CmEventKind::Established, 0, param, Some(ud));
            }
        }
    }

    /// The connection's CM record is done with: forget the mapping, return the ID.
    fn cm_end(&mut self, conn: ConnId) -> Option<u32> {
        let id = *self.cm.by_conn.get(&conn)?;
        if let Some(Some(s)) = self.cm.ids.get_mut(id as usize) {
            s.state = IdState::Disconnected;
        }
        Some(id)
    }

    /// A new ID for a request to a listener, on the listener's channel.
    fn cm_child(
        &mut self,
        conn: ConnId,
        svc: u64,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Option<(u32, u32)> {
        let Some(&lid) = self.cm.listeners.get(&svc) else {
            let _ = self.cm.cm.reject(self.dp.now(), conn, rej_reason::INVALID_SERVICE_ID, &[]);
            return None;
        };
        let listener = self.cm.ids.get(lid as usize)?.as_ref()?;
        let mut child = Id::new(listener.channel, listener.ps);
        child.state = IdState::Connecting;
        child.local = Some(local);
        child.remote = Some(remote);
        child.dmac = self.cm.gsi.mac(remote.ip());
        child.conn = Some(conn);
        let id = self.cm_insert(child);
        self.cm.by_conn.insert(conn, id.0);
        Some((id.0, lid))
    }

    fn cm_on_request(&mut self, conn: ConnId, req: Box<ReqInfo>) {
        let now = self.dp.now();
        // rdma_cm's REQs carry the addressing header; without it the port space cannot be served.
        let hdr = match CmaHdr::parse(&req.private_data) {
            Ok(h) => h,
            Err(_) => {
                let _ = self.cm.cm.reject(now, conn, rej_reason::CONSUMER_REJECT, &[]);
                return;
            }
        };
        let port = wire::ib::cma::split_service_id(req.service_id).map_or(0, |(_, p)| p);
        let local = SocketAddr::new(hdr.dst, port);
        let remote = SocketAddr::new(hdr.src, hdr.src_port);
        let Some((id, lid)) = self.cm_child(conn, req.service_id, local, remote) else { return };
        // From the receiver's view, as rdma_cm reports it.
        let param = ConnParam {
            private_data: req.private_data[CMA_HDR_LEN..].to_vec(),
            responder_resources: req.initiator_depth,
            initiator_depth: req.responder_resources,
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
            srq: req.srq,
            qp_num: req.remote_qpn,
        };
        if let Some(Some(s)) = self.cm.ids.get_mut(id as usize) {
            s.req = Some(req);
        }
        self.cm_push(CmIdEvent {
            id: CmId(id),
            listen_id: Some(CmId(lid)),
            kind: CmEventKind::ConnectRequest,
            status: 0,
            param,
            ud: None,
        });
    }

    fn cm_on_sidr_request(&mut self, conn: ConnId, peer: IpAddr, svc: u64, pd: &[u8]) {
        let now = self.dp.now();
        let Ok(hdr) = CmaHdr::parse(pd) else {
            let _ = self.cm.cm.sidr_reply(now, conn, 2, 0, 0, &[]);
            return;
        };
        let port = wire::ib::cma::split_service_id(svc).map_or(0, |(_, p)| p);
        let remote = SocketAddr::new(peer.to_canonical(), hdr.src_port);
        let Some((id, lid)) = self.cm_child(conn, svc, SocketAddr::new(hdr.dst, port), remote) else {
            let _ = self.cm.cm.sidr_reply(now, conn, 1, 0, 0, &[]);
            return;
        };
        let mut ah = AddressVector::new(remote.ip());
        ah.dmac = self.cm.gsi.mac(remote.ip());
        let param = ConnParam { private_data: pd[CMA_HDR_LEN..].to_vec(), ..ConnParam::default() };
        self.cm_push(CmIdEvent {
            id: CmId(id),
            listen_id: Some(CmId(lid)),
            kind: CmEventKind::ConnectRequest,
            status: 0,
            param,
            ud: Some(UdParam { qp_num: 0, qkey: RDMA_UDP_QKEY, ah }),
        });
    }
}
