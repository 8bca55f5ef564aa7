//! What a command or a forwarded port writes to, whichever protocol carries
//! it: a SPDY stream or a channel of a WebSocket connection.

use bytes::Bytes;

use crate::{Closed, spdy, websocket};

/// The sending side of one stream or channel.
#[derive(Debug, Clone)]
pub enum Writer {
    /// A SPDY stream.
    Spdy(spdy::Writer),
    /// A channel of a WebSocket connection.
    WebSocket(websocket::ChannelWriter),
}

impl Writer {
    /// Sends bytes.
    pub async fn write(&self, data: impl Into<Bytes>) -> Result<(), Closed> {
        match self {
            Writer::Spdy(w) => w.write(data).await,
            Writer::WebSocket(w) => w.write(data.into()).await,
        }
    }

    /// Ends the sending side (a SPDY `FIN`; a WebSocket channel has none).
    pub async fn close(&self) -> Result<(), Closed> {
        match self {
            Writer::Spdy(w) => w.close().await,
            Writer::WebSocket(_) => Ok(()),
        }
    }
}
