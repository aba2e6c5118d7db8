//! How nodes reach each other. By default over TCP (with the listener's bounds, TLS and the
//! cluster secret, all in [`crate::node`] and [`crate::network`]); a simulation supplies a
//! [`Transport`] of its own, whose byte streams carry the same gRPC calls over a simulated
//! network. Everything above the byte stream (HTTP/2, the node-to-node service, Raft) is the same
//! code either way.

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A byte stream between two nodes.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// A boxed byte stream.
pub type BoxIo = Box<dyn Io>;

/// Connections a node accepts.
pub type Incoming = BoxStream<'static, io::Result<BoxIo>>;

/// A network other than the machine's TCP: connections to `host:port` addresses, and a listener.
/// Its connections do not get the TCP listener's bounds (connections in all and per address,
/// deadlines for the first bytes and for authenticating); TLS and the cluster secret apply as
/// configured. Meant for simulations, where the network is part of the test.
pub trait Transport: Send + Sync + std::fmt::Debug + 'static {
    /// Opens a connection to `addr` (`host:port`).
    fn connect(&self, addr: String) -> BoxFuture<'static, io::Result<BoxIo>>;

    /// Listens on `addr`; returns the address bound and the connections accepted.
    fn listen(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<(SocketAddr, Incoming)>>;
}

/// An accepted connection of a custom transport, as the tonic server takes it.
pub(crate) struct Accepted(pub(crate) BoxIo);

impl tonic::transport::server::Connected for Accepted {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Accepted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A transport of in-memory pipes: one listener, connections handed to it through a channel.
    #[derive(Debug)]
    struct Pipes {
        to_listener: tokio::sync::mpsc::UnboundedSender<BoxIo>,
        incoming: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<BoxIo>>>,
    }

    impl Transport for Pipes {
        fn connect(&self, _addr: String) -> BoxFuture<'static, io::Result<BoxIo>> {
            let (a, b) = tokio::io::duplex(1024);
            let sent = self.to_listener.send(Box::new(b));
            Box::pin(async move {
                sent.map_err(|_| io::Error::from(io::ErrorKind::ConnectionRefused))?;
                Ok(Box::new(a) as BoxIo)
            })
        }

        fn listen(
            &self,
            addr: SocketAddr,
        ) -> BoxFuture<'static, io::Result<(SocketAddr, Incoming)>> {
            let rx = self.incoming.lock().unwrap().take();
            Box::pin(async move {
                let rx = rx.ok_or_else(|| io::Error::from(io::ErrorKind::AddrInUse))?;
                let s = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(Ok);
                Ok((addr, s.boxed()))
            })
        }
    }

    #[tokio::test]
    async fn bytes_written_on_one_end_of_a_connection_arrive_at_the_other() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let t = Pipes {
            to_listener: tx,
            incoming: std::sync::Mutex::new(Some(rx)),
        };
        let (_, mut incoming) = t.listen("10.0.0.1:1".parse().unwrap()).await.unwrap();
        assert!(t.listen("10.0.0.1:1".parse().unwrap()).await.is_err());
        let mut client = t.connect("10.0.0.1:1".into()).await.unwrap();
        let mut server = Accepted(incoming.next().await.unwrap().unwrap());
        client.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        server.write_all(b"pong").await.unwrap();
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
    }
}
