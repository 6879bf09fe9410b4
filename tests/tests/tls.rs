//! The HTTPS clients speak TLS: every test elsewhere talks plain HTTP to the emulator and to
//! loopback targets, so these hold a loopback listener that reads the first bytes a client sends
//! to an `https://` URL and finds the start of a TLS handshake there. Both clients use rustls
//! over ring (`sundial_wiring::config::aws_https_client`, `Outbound::client`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use sundial_aws::targets::outbound::{Lookup, Outbound};
use sundial_domain::egress::Egress;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// A TLS record of type handshake (22), protocol major version 3.
const HANDSHAKE_RECORD: [u8; 2] = [0x16, 0x03];

/// A listener on loopback that answers nothing, and the first two bytes of its first connection.
async fn listener() -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let first_bytes = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("a connection");
        let mut bytes = vec![0u8; 2];
        stream.read_exact(&mut bytes).await.expect("two bytes");
        bytes
    });
    (port, first_bytes)
}

async fn first_bytes(handle: tokio::task::JoinHandle<Vec<u8>>) -> Vec<u8> {
    tokio::time::timeout(std::time::Duration::from_secs(30), handle)
        .await
        .expect("the client connected")
        .expect("the listener read")
}

#[tokio::test]
async fn the_aws_sdk_client_speaks_tls() {
    let (port, seen) = listener().await;
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .http_client(sundial_wiring::config::aws_https_client())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(format!("https://127.0.0.1:{port}"))
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    let call = tokio::spawn(async move { client.list_tables().send().await });
    assert_eq!(first_bytes(seen).await, HANDSHAKE_RECORD);
    call.abort();
}

/// Every name is the loopback address.
#[derive(Debug)]
struct Loopback;

#[async_trait::async_trait]
impl Lookup for Loopback {
    async fn lookup(&self, _host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
    }
}

#[tokio::test]
async fn the_targets_client_speaks_tls() {
    let (port, seen) = listener().await;
    let egress = Egress::new(&["127.0.0.1/32".to_string()], &[]).expect("an allow-list");
    let outbound = Outbound::new(egress, Arc::new(Loopback));
    let client = outbound.client().expect("the client builds").clone();
    let call = tokio::spawn(async move { client.get(format!("https://target.test:{port}/")).send().await });
    assert_eq!(first_bytes(seen).await, HANDSHAKE_RECORD);
    call.abort();
}
