//! What MPI asks of the provider beyond `fi_pingpong` (issue 55), on the simulated fabric:
//! receives directed at one sender (FI_DIRECTED_RECV, FI_ADDR_UNSPEC the wildcard) and address
//! vector removal (`fi_av_remove`) with the other indices kept. Regions registered on a domain
//! (no FI_MR_ENDPOINT) are the program's memory, so they are run through the C ABI by Open MPI's
//! BTL (`engine/cli/tests/netns_mpi.rs`); their virtual addressing is tested in `ses::key`.

use std::time::Duration;

use engine::provider::{
    ControlPlane, CqEntry, CqErrEntry, EpAttr, FI_ADDR_UNSPEC, Fabric, FiErrno, Hints, ProviderConfig, bind,
    getinfo,
};
use nicsim::LinkConfig;
use ses::Profile;

const WAIT: Duration = Duration::from_secs(2);

struct Rank {
    ep: engine::provider::Endpoint,
    cq: engine::provider::CompletionQueue,
    av: engine::provider::AddressVector,
}

/// `n` processes of one job (JobID 10) on the simulated fabric, HPC profile, each with its AV
/// holding every rank in rank order.
fn job(n: u32) -> (Fabric, Vec<Rank>) {
    let mut cp = ControlPlane::new();
    for p in 0..n {
        cp.assign_job(p + 1, 10).unwrap();
    }
    let hints = Hints { profile: Some(Profile::Hpc), ep_type: Some(ses::EpType::Rdm), ..Hints::default() };
    let info = getinfo(&hints, &ProviderConfig::default()).unwrap().remove(0);
    let fabric = Fabric::open_sim(3, LinkConfig::default(), cp);
    let ranks: Vec<Rank> = (0..n)
        .map(|p| {
            let d = fabric.domain(&info, p + 1);
            let ep = d.endpoint(EpAttr { rank: Some(p), ordered: true, ..EpAttr::default() }).unwrap();
            let (cq, av) = (d.cq_open(), d.av_open());
            ep.bind_cq(&cq, bind::TRANSMIT | bind::RECV);
            ep.bind_av(&av);
            Rank { ep, cq, av }
        })
        .collect();
    let names: Vec<_> = ranks.iter().map(|r| r.ep.getname()).collect();
    for r in &ranks {
        assert_eq!(r.av.insert(&names), (0..u64::from(n)).collect::<Vec<_>>());
    }
    (fabric, ranks)
}

fn next(cq: &engine::provider::CompletionQueue) -> Result<CqEntry, CqErrEntry> {
    cq.sread(WAIT).expect("a completion")
}

/// The receive completions at `r` (its sends' completions skipped) until `n` came.
fn receives(r: &Rank, n: usize) -> Vec<CqEntry> {
    let mut out = Vec::new();
    while out.len() < n {
        let e = next(&r.cq).expect("no error");
        if e.flags & engine::provider::cq_flags::RECV != 0 {
            out.push(e);
        }
    }
    out
}

#[test]
fn directed_receives_take_only_their_senders_messages() {
    let (_f, r) = job(3);
    // Rank 2 waits for rank 0 first, then for anyone; rank 1 sends before rank 0 does.
    r[2].ep.trecv(16, 0, 5, 0, 100).unwrap();
    r[2].ep.trecv(16, FI_ADDR_UNSPEC, 5, 0, 101).unwrap();
    r[1].ep.tsend(b"from one", 2, 5, 1).unwrap();
    let got = receives(&r[2], 1);
    assert_eq!((got[0].op_context, got[0].src, &got[0].buf[..]), (101, 1, &b"from one"[..]));
    r[0].ep.tsend(b"from zero", 2, 5, 2).unwrap();
    let got = receives(&r[2], 1);
    assert_eq!((got[0].op_context, got[0].src, &got[0].buf[..]), (100, 0, &b"from zero"[..]));
    // A message that arrives first waits (unexpected) for the receive directed at its sender.
    r[1].ep.tsend(b"early", 2, 6, 3).unwrap();
    r[0].ep.tsend(b"later", 2, 6, 4).unwrap();
    r[2].ep.trecv(16, 0, 6, 0, 102).unwrap();
    let got = receives(&r[2], 1);
    assert_eq!((got[0].op_context, &got[0].buf[..]), (102, &b"later"[..]));
    r[2].ep.trecv(16, 1, 6, 0, 103).unwrap();
    let got = receives(&r[2], 1);
    assert_eq!((got[0].op_context, &got[0].buf[..]), (103, &b"early"[..]));
}

#[test]
fn removed_addresses_name_nobody_and_the_others_keep_their_index() {
    let (_f, r) = job(3);
    r[0].av.remove(&[1]).unwrap();
    assert_eq!(r[0].av.lookup(1), None);
    assert_eq!(r[0].av.lookup(2), Some(r[2].ep.getname()), "index 2 is still rank 2");
    assert_eq!(r[0].ep.send(b"x", 1, 1).unwrap_err().errno, FiErrno::EINVAL);
    assert_eq!(r[0].ep.recv(8, 1, 1).unwrap_err().errno, FiErrno::EINVAL, "a receive directed at it");
    assert_eq!(r[0].av.remove(&[2, 1]).unwrap_err().errno, FiErrno::EINVAL, "all or nothing");
    assert_eq!(r[0].av.lookup(2), Some(r[2].ep.getname()));
    // New addresses follow the last index; a removed sender's messages have no source.
    assert_eq!(r[0].av.insert(&[r[1].ep.getname()]), [3]);
    r[0].av.remove(&[3]).unwrap();
    r[0].ep.recv(8, FI_ADDR_UNSPEC, 7).unwrap();

    r[1].ep.send(b"hi", 0, 8).unwrap();
    let got = receives(&r[0], 1);
    assert_eq!((got[0].op_context, got[0].src, &got[0].buf[..]), (7, FI_ADDR_UNSPEC, &b"hi"[..]));
    r[2].ep.recv(8, FI_ADDR_UNSPEC, 10).unwrap();
    r[0].ep.send(b"still", 2, 9).unwrap();
    assert_eq!(&receives(&r[2], 1)[0].buf[..], b"still");
}
