//! Server-chosen connection IDs that name their worker: byte 0 is the worker's index, the
//! rest random. Every worker has its own SO_REUSEPORT socket; the kernel picks the socket by
//! the 4-tuple, so a client whose address changes (NAT rebinding) may land on another worker,
//! which reads the worker from the destination connection ID and forwards the datagram
//! there. A connection's state, and its provider queue, never leave the worker it started on.

/// Length of the connection IDs the server chooses.
pub(crate) const CID_LEN: usize = 16;

/// A fresh connection ID for a connection of `worker` (random from BoringSSL's RNG; a
/// failing RNG leaves zeroes after the worker byte, still a valid ID).
pub(crate) fn new_cid(worker: usize) -> Vec<u8> {
    let mut id = vec![0u8; CID_LEN];
    let _ = boring::rand::rand_bytes(&mut id[1..]);
    id[0] = worker_byte(worker);
    id
}

/// The worker a server-chosen connection ID names; `None` for an ID of another length (one a
/// client chose).
pub(crate) fn worker_of(dcid: &[u8], workers: usize) -> Option<usize> {
    if dcid.len() != CID_LEN {
        return None;
    }
    let w = usize::from(dcid[0]);
    (w < workers).then_some(w)
}

/// Workers past 256 share bytes (their datagrams reach the lowest index of the byte, which
/// forwards nothing further: they are served only when the kernel routes them right).
fn worker_byte(worker: usize) -> u8 {
    (worker % 256) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_id_names_its_worker() {
        let a = new_cid(3);
        assert_eq!(a.len(), CID_LEN);
        assert_eq!(worker_of(&a, 4), Some(3));
        assert_eq!(worker_of(&a, 2), None);
        assert_ne!(a, new_cid(3));
        assert_eq!(worker_of(&[3; 8], 4), None);
    }
}
