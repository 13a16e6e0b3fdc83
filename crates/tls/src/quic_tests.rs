//! The spike the QUIC listener is built on: a quiche server handshake completes with an
//! asynchronous private key method whose operation is answered later, the connection driven
//! again when the answer arrives.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use boring::hash::MessageDigest;
use boring::pkey::{PKey, Private};
use boring::sign::Signer;
use boring::ssl::{
    AsyncPrivateKeyMethod, AsyncPrivateKeyMethodError, BoxPrivateKeyMethodFuture,
    SslContextBuilder, SslMethod, SslRef, SslSignatureAlgorithm,
};
use boring::x509::X509;

use quickshake_test_support::paths::read_cert as cert;

/// Signs at once but answers 20 ms later, from another task: what a provider's batch does.
struct LateSigner {
    key: PKey<Private>,
    signed: Arc<AtomicUsize>,
}

impl AsyncPrivateKeyMethod for LateSigner {
    fn sign(
        &self,
        _ssl: &mut SslRef,
        input: &[u8],
        alg: SslSignatureAlgorithm,
        _output: &mut [u8],
    ) -> Result<BoxPrivateKeyMethodFuture, AsyncPrivateKeyMethodError> {
        assert_eq!(alg, SslSignatureAlgorithm::ECDSA_SECP256R1_SHA256);
        let mut signer = Signer::new(MessageDigest::sha256(), &self.key)
            .map_err(|_| AsyncPrivateKeyMethodError)?;
        let sig = signer
            .sign_oneshot_to_vec(input)
            .map_err(|_| AsyncPrivateKeyMethodError)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = tx.send(sig);
        });
        let signed = self.signed.clone();
        Ok(Box::pin(async move {
            let sig = rx.await.map_err(|_| AsyncPrivateKeyMethodError)?;
            signed.fetch_add(1, Ordering::Relaxed);
            let finish: boring::ssl::BoxPrivateKeyMethodFinish =
                Box::new(move |_ssl: &mut SslRef, out: &mut [u8]| {
                    out[..sig.len()].copy_from_slice(&sig);
                    Ok(sig.len())
                });
            Ok(finish)
        }))
    }

    fn decrypt(
        &self,
        _ssl: &mut SslRef,
        _input: &[u8],
        _output: &mut [u8],
    ) -> Result<BoxPrivateKeyMethodFuture, AsyncPrivateKeyMethodError> {
        Err(AsyncPrivateKeyMethodError)
    }
}

fn transport(c: &mut quiche::Config) {
    c.set_application_protos(quiche::h3::APPLICATION_PROTOCOL)
        .unwrap();
    c.set_initial_max_data(1 << 20);
    c.set_initial_max_stream_data_bidi_local(1 << 20);
    c.set_initial_max_stream_data_bidi_remote(1 << 20);
    c.set_initial_max_stream_data_uni(1 << 20);
    c.set_initial_max_streams_bidi(10);
    c.set_initial_max_streams_uni(10);
}

/// Move every datagram `from` has to send into `to`.
fn flush(from: &mut quiche::Connection, to: &mut quiche::Connection, to_addr: SocketAddr) -> usize {
    let mut buf = [0u8; 1500];
    let mut moved = 0;
    while let Ok((n, info)) = from.send(&mut buf) {
        let recv = quiche::RecvInfo {
            from: info.from,
            to: to_addr,
        };
        // A packet the peer cannot use yet is dropped, as the network might.
        let _ = to.recv(&mut buf[..n], recv);
        moved += 1;
    }
    moved
}

#[tokio::test(flavor = "current_thread")]
async fn a_quiche_handshake_completes_with_an_asynchronous_key_answered_later() {
    let key = PKey::private_key_from_pem(&cert("ecdsa-p256.key.pem")).unwrap();
    let leaf = X509::from_pem(&cert("ecdsa-p256.cert.pem")).unwrap();
    let signed = Arc::new(AtomicUsize::new(0));
    let mut b = SslContextBuilder::new(SslMethod::tls()).unwrap();
    b.set_certificate(&leaf).unwrap();
    b.set_async_private_key_method(LateSigner {
        key,
        signed: signed.clone(),
    });
    let mut server_cfg =
        quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, b).unwrap();
    transport(&mut server_cfg);
    let mut client_cfg = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
    transport(&mut client_cfg);
    client_cfg.verify_peer(false);

    let (caddr, saddr): (SocketAddr, SocketAddr) = (
        "127.0.0.1:5000".parse().unwrap(),
        "127.0.0.1:443".parse().unwrap(),
    );
    let ccid = quiche::ConnectionId::from_ref(&[1; 16]);
    let scid = quiche::ConnectionId::from_ref(&[2; 16]);
    let mut client =
        quiche::connect(Some("localhost"), &ccid, caddr, saddr, &mut client_cfg).unwrap();
    let mut server = quiche::accept(&scid, None, saddr, caddr, &mut server_cfg).unwrap();

    let mut wakes = 0;
    for _ in 0..200 {
        // The task's waker on the `Ssl` before every drive, as the QUIC listener does.
        poll_fn(|cx| {
            super::set_waker(server.as_mut(), cx.waker());
            Poll::Ready(())
        })
        .await;
        flush(&mut client, &mut server, saddr);
        flush(&mut server, &mut client, caddr);
        if client.is_established() && server.is_established() {
            break;
        }
        if signed.load(Ordering::Relaxed) == 0 {
            // The key operation is out: yield until its answer wakes this task (the timer
            // task runs meanwhile), then drive the connection again.
            tokio::time::sleep(Duration::from_millis(5)).await;
            wakes += 1;
        }
    }
    assert!(server.is_established(), "server handshake did not complete");
    assert!(client.is_established(), "client handshake did not complete");
    assert_eq!(
        signed.load(Ordering::Relaxed),
        1,
        "one signature, from the async method"
    );
    assert!(wakes > 0, "the handshake waited for the key operation");
    assert_eq!(server.application_proto(), b"h3");
}

#[test]
fn retry_tokens_bind_the_address_and_expire() {
    let tokens = super::RetryTokens::new(Duration::from_secs(10)).unwrap();
    let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
    let other: SocketAddr = "192.0.2.2:4433".parse().unwrap();
    let t = tokens.mint(&peer, b"original-dcid").unwrap();
    assert_eq!(
        tokens.validate(&peer, &t).as_deref(),
        Some(&b"original-dcid"[..])
    );
    assert_eq!(tokens.validate(&other, &t), None);
    let mut forged = t.clone();
    forged[9] ^= 1;
    assert_eq!(tokens.validate(&peer, &forged), None);
    assert_eq!(tokens.validate(&peer, &t[..10]), None);
    let expired = super::RetryTokens::new(Duration::ZERO).unwrap();
    let t = expired.mint(&peer, b"x").unwrap();
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(expired.validate(&peer, &t), None);
}
