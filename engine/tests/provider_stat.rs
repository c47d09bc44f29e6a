//! The provider's counters for `softrdma stat` (issue 58): a fabric hands every endpoint's node to
//! its stat sink from a progress call when the sink is due, never when it is not, and once more as
//! an endpoint closes, with that endpoint's last counters beside the others'.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use engine::provider::{
    ControlPlane, EpAttr, FI_ADDR_UNSPEC, Fabric, Hints, ProviderConfig, StatNode, StatSink, bind, getinfo,
};
use nicsim::LinkConfig;
use wire::uet::ses::SesOpcode;

/// What a sink was handed at one publication: per node, its name, SEND requests sent and
/// received, and PDS packets sent.
type Seen = Vec<(String, u64, u64, u64)>;

/// A sink that is due when the test says so and records what it is handed.
struct Recorder {
    due: Rc<Cell<bool>>,
    seen: Rc<RefCell<Vec<Seen>>>,
}

impl StatSink for Recorder {
    fn due(&mut self) -> bool {
        self.due.get()
    }

    fn publish(&mut self, nodes: &mut [StatNode<'_>]) {
        let one = nodes
            .iter_mut()
            .map(|n| {
                let s = *n.node.ses().stats();
                let packets = n.node.ses().pds().stats().tx_packets;
                let send = u8::from(SesOpcode::Send);
                (n.name.to_string(), s.ops_tx.get(send), s.ops_rx.get(send), packets)
            })
            .collect();
        self.seen.borrow_mut().push(one);
    }
}

#[test]
fn endpoints_publish_when_due_and_as_they_close() {
    let mut cp = ControlPlane::new();
    cp.assign_job(1, 10).unwrap();
    let config = ProviderConfig::default();
    let hints =
        Hints { profile: Some(ses::Profile::Hpc), ep_type: Some(ses::EpType::Rdm), ..Hints::default() };
    let info = getinfo(&hints, &config).unwrap().remove(0);
    let fabric = Fabric::open_sim(1, LinkConfig::default(), cp);
    let (due, seen) = (Rc::new(Cell::new(false)), Rc::new(RefCell::new(Vec::new())));
    fabric.set_stat_sink(Box::new(Recorder { due: due.clone(), seen: seen.clone() }));
    let d = fabric.domain(&info, 1);
    let (a, b) = (d.endpoint(EpAttr::default()).unwrap(), d.endpoint(EpAttr::default()).unwrap());
    let (cq_a, cq_b) = (d.cq_open(), d.cq_open());
    a.bind_cq(&cq_a, bind::TRANSMIT | bind::RECV);
    b.bind_cq(&cq_b, bind::TRANSMIT | bind::RECV);
    let (av_a, av_b) = (d.av_open(), d.av_open());
    a.bind_av(&av_a);
    b.bind_av(&av_b);
    let to_b = av_a.insert(&[b.getname()])[0];
    b.recv(100, FI_ADDR_UNSPEC, 7).unwrap();
    a.send(b"ping", to_b, 1).unwrap();
    let wait = Duration::from_secs(2);
    assert!(cq_b.sread(wait).expect("a completion").is_ok());
    assert!(cq_a.sread(wait).expect("a completion").is_ok());
    assert!(seen.borrow().is_empty(), "published while not due: {:?}", seen.borrow());
    due.set(true);
    let _ = cq_a.read();
    due.set(false);
    let names = |s: &Seen| s.iter().map(|n| n.0.clone()).collect::<Vec<_>>();
    {
        let s = seen.borrow();
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(names(&s[0]), ["ep0 rdm hpc", "ep1 rdm hpc"]);
        let (a_sent, b_got) = ((s[0][0].1, s[0][0].2), (s[0][1].1, s[0][1].2));
        assert_eq!((a_sent, b_got), ((1, 0), (0, 1)), "{s:?}");
        assert!(s[0][0].3 > 0, "{s:?}");
    }
    // A closing endpoint's last counters go with the others'; then it is gone.
    drop(b);
    drop(cq_b);
    drop(av_b);
    {
        let s = seen.borrow();
        assert_eq!(s.len(), 2, "{s:?}");
        let mut closing = names(&s[1]);
        closing.sort();
        assert_eq!(closing, ["ep0 rdm hpc", "ep1 rdm hpc"]);
        assert!(s[1].iter().any(|n| n.0 == "ep1 rdm hpc" && n.2 == 1), "{s:?}");
    }
    due.set(true);
    let _ = cq_a.read();
    assert_eq!(names(seen.borrow().last().unwrap()), ["ep0 rdm hpc"]);
}
