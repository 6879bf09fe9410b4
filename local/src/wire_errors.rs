//! The HTTP layer's own refusals, answered in JSON like every other error.
//!
//! hyper answers a request it cannot parse before any route sees it — a header section past its
//! limits (431), a path too long (414), a request line or header that is not HTTP (400) — with a
//! status line and an empty body, and offers no hook to change that. [`JsonErrors`] wraps each
//! accepted connection and recognises those answers as they are written: a head with one of
//! those statuses and `content-length: 0` (the API never sends such an answer itself: its
//! errors all carry a JSON body) is replaced by the same status with the API's error body. In
//! AWS, API Gateway answers these requests itself, before the function.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// A listener whose connections answer the HTTP layer's refusals in JSON.
#[derive(Debug)]
pub struct JsonErrorListener(pub TcpListener);

impl axum::serve::Listener for JsonErrorListener {
    type Io = JsonErrors<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.0).await;
        (JsonErrors { inner: io, replacing: None }, addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// A connection whose empty-bodied refusals are written as JSON ones. It does not offer
/// vectored writes, so hyper writes each answer's head in one buffer, which is what lets a
/// refusal be recognised whole.
#[derive(Debug)]
pub struct JsonErrors<S> {
    inner: S,
    /// The JSON answer being written in place of the caller's buffer, and how much of it is
    /// written.
    replacing: Option<(Vec<u8>, usize)>,
}

/// The JSON answer for an empty-bodied refusal written as `head`, if it is one.
fn json_answer(head: &[u8]) -> Option<Vec<u8>> {
    // Most writes are answers and bodies of the API's own: passed over at the first bytes.
    if !head.starts_with(b"HTTP/1.1 4") {
        return None;
    }
    let text = std::str::from_utf8(head).ok()?;
    let end = text.find("\r\n\r\n")?;
    if end + 4 != text.len() {
        return None;
    }
    let mut lines = text[..end].split("\r\n");
    let status_line = lines.next()?;
    let empty = lines.any(|l| l.eq_ignore_ascii_case("content-length: 0"));
    let (code, message) = match status_line.strip_prefix("HTTP/1.1 ")?.get(..3)? {
        "400" => ("malformed_request", "the request is not well-formed HTTP"),
        "414" => ("uri_too_long", "the path and query are too long"),
        "431" => ("headers_too_large", "the header section is too large or has too many fields"),
        _ => return None,
    };
    if !empty {
        return None;
    }
    let body = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    let answer = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    Some(answer.into_bytes())
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonErrors<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonErrors<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacing.is_none() {
            match json_answer(buf) {
                Some(answer) => this.replacing = Some((answer, 0)),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        // The caller writes the same buffer again until it is taken: take it once the whole
        // replacement is out.
        while let Some((answer, written)) = this.replacing.as_mut() {
            if *written == answer.len() {
                this.replacing = None;
                return Poll::Ready(Ok(buf.len()));
            }
            match Pin::new(&mut this.inner).poll_write(cx, &answer[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failed test

    use super::*;

    #[test]
    fn only_empty_bodied_refusals_are_rewritten() {
        let refused = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let answer = String::from_utf8(json_answer(refused).unwrap()).unwrap();
        assert!(answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{answer}");
        assert!(answer.ends_with(r#"{"error":{"code":"headers_too_large","message":"the header section is too large or has too many fields"}}"#));
        // The API's own answers carry bodies; other statuses and partial heads pass as they are.
        let api = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 57\r\n\r\n";
        assert_eq!(json_answer(api), None);
        assert_eq!(json_answer(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"), None);
        assert_eq!(json_answer(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}"), None);
        assert_eq!(json_answer(b"{\"jobs\": []}"), None);
    }
}
