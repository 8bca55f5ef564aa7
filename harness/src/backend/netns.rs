//! A network namespace of one node, and the two doors through it.
//!
//! A node on a real runtime has addresses off loopback: its CNI bridge and its
//! pods' IPs. They exist only here, in a namespace the harness makes for the
//! node ([`NetNs::new`]), with its own loopback and nothing routed off the
//! machine; the node's runtime and agent run inside it
//! ([`NetNs::enter_in_child`]). Two forwarders connect it to the harness's own
//! namespace, both on loopback:
//!
//! - [`NetNs::forward_in`]: a listener on the namespace's `127.0.0.1:PORT`
//!   whose connections go to the host's `127.0.0.1:PORT` — the API server, so
//!   the agent's kubeconfig is the harness's own;
//! - [`NetNs::forward_out`]: a listener on the host's loopback whose
//!   connections go to a port of the namespace's loopback — the agent's
//!   kubelet endpoint, which the API server reaches for logs, exec and
//!   port-forward.
//!
//! A socket belongs to the namespace it was made in, whichever thread uses
//! it: each is made on a short-lived thread that entered the namespace.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, OwnedFd};

use std::sync::Mutex;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::AbortHandle;

/// The namespace is held by an open descriptor: it ends when the descriptor is
/// closed and no process is left in it.
#[derive(Debug)]
pub struct NetNs {
    fd: OwnedFd,
    /// The forwarders' accept loops, stopped when the namespace is dropped.
    forwarders: Mutex<Vec<AbortHandle>>,
}

/// Runs `f` on a new thread that entered the namespace `fd`.
fn on_thread_in<T: Send>(
    fd: &OwnedFd,
    f: impl FnOnce() -> std::io::Result<T> + Send,
) -> std::io::Result<T> {
    let raw = fd.as_raw_fd();
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                // SAFETY: setns(2) on a descriptor of a network namespace we own;
                // it changes this thread only, which ends after `f`.
                if unsafe { libc::setns(raw, libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("namespace thread panicked")))
    })
}

/// An interface ioctl and what it sets in the request first.
type IfCall<'a> = (libc::Ioctl, &'a dyn Fn(&mut libc::ifreq));

/// Runs interface ioctls: `calls` one after another on one `ifreq` named `name`, on a
/// datagram socket of the calling thread's namespace; the first that fails stops them.
fn interface_ioctls(name: &[u8], calls: &[IfCall<'_>]) -> std::io::Result<()> {
    // SAFETY: a datagram socket for the interface ioctls, closed below.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `ifreq` is plain data; the name is copied with room for its NUL.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    let room = request.ifr_name.len() - 1;
    for (slot, byte) in request
        .ifr_name
        .iter_mut()
        .zip(&name[..name.len().min(room)])
    {
        *slot = *byte as libc::c_char;
    }
    let mut result = Ok(());
    for (call, prepare) in calls {
        prepare(&mut request);
        // SAFETY: an interface ioctl with a valid `ifreq` on our socket.
        if unsafe { libc::ioctl(sock, *call, &mut request) } != 0 {
            result = Err(std::io::Error::last_os_error());
            break;
        }
    }
    // SAFETY: closing the socket made above.
    unsafe { libc::close(sock) };
    result
}

/// Brings the loopback interface up in the calling thread's namespace.
fn loopback_up() -> std::io::Result<()> {
    interface_ioctls(
        b"lo",
        &[
            (libc::SIOCGIFFLAGS, &|_| {}),
            // SAFETY (union access): SIOCGIFFLAGS filled in the flags.
            (libc::SIOCSIFFLAGS, &|r| unsafe {
                r.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short
            }),
        ],
    )
}

/// An IPv4 address as the `sockaddr` of an `ifreq`.
fn sockaddr(addr: Ipv4Addr) -> libc::sockaddr {
    // SAFETY: `sockaddr_in` is plain data.
    let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_addr.s_addr = u32::from(addr).to_be();
    // SAFETY: a `sockaddr_in` is a `sockaddr` of the same size (16 bytes).
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// Gives the calling thread's namespace `ip` as a /32 on its loopback (the alias `lo:node`),
/// so a program there that insists on an address of its own off 127.0.0.0/8 finds one. The
/// address alone would get its class's mask, routing a whole /8 to the loopback.
fn add_loopback_address(ip: Ipv4Addr) -> std::io::Result<()> {
    interface_ioctls(
        b"lo:node",
        &[
            (libc::SIOCSIFADDR, &|r| r.ifr_ifru.ifru_addr = sockaddr(ip)),
            (libc::SIOCSIFNETMASK, &|r| {
                r.ifr_ifru.ifru_netmask = sockaddr(Ipv4Addr::BROADCAST)
            }),
        ],
    )
}

/// Copies both ways between two connections until either side ends.
async fn splice(mut a: TcpStream, mut b: TcpStream) {
    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
}

impl NetNs {
    /// Makes a network namespace with its loopback up and nothing else.
    pub fn new() -> std::io::Result<Self> {
        let fd = std::thread::spawn(|| -> std::io::Result<OwnedFd> {
            // SAFETY: unshare(2) of this thread's network namespace; the thread
            // ends right after, so no other code runs in it.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            loopback_up()?;
            let file = std::fs::File::open("/proc/thread-self/ns/net")?;
            Ok(OwnedFd::from(file))
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("namespace thread panicked")))?;
        Ok(Self {
            fd,
            forwarders: Mutex::default(),
        })
    }

    /// Gives the namespace `ip` as an address of its own, on its loopback: a kubelet
    /// refuses a loopback node IP and wants one of its host's. Given the host's own
    /// address, nothing inside is routed off the machine (the namespace has no other
    /// interface but the pods' bridge), and a connection of the API server to that
    /// address on the host is refused there and dialled again on 127.0.0.1, where
    /// [`NetNs::forward_out`] listens.
    pub fn add_address(&self, ip: Ipv4Addr) -> std::io::Result<()> {
        on_thread_in(&self.fd, || add_loopback_address(ip))
    }

    /// Makes `command`'s process start in this namespace.
    pub fn enter_in_child(&self, command: &mut tokio::process::Command) {
        let raw = self.fd.as_raw_fd();
        // SAFETY: runs in the forked child before exec: setns(2) is
        // async-signal-safe, and the descriptor is open there (inherited).
        unsafe {
            command.pre_exec(move || {
                if libc::setns(raw, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// A listener on `addr` inside the namespace.
    pub fn listen_inside(&self, addr: SocketAddr) -> std::io::Result<TcpListener> {
        let listener = on_thread_in(&self.fd, || {
            let listener = std::net::TcpListener::bind(addr)?;
            listener.set_nonblocking(true)?;
            Ok(listener)
        })?;
        TcpListener::from_std(listener)
    }

    /// A connection to `addr` from inside the namespace.
    pub async fn connect_inside(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        let socket = on_thread_in(&self.fd, TcpSocket::new_v4)?;
        socket.connect(addr).await
    }

    /// Serves the namespace's `127.0.0.1:port` with the host's `127.0.0.1:port`.
    pub fn forward_in(&self, port: u16) -> std::io::Result<()> {
        let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
        let listener = self.listen_inside(addr)?;
        let task = tokio::spawn(async move {
            loop {
                let inside = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        tracing::warn!(%error, "accepting in a node's namespace");
                        continue;
                    }
                };
                tokio::spawn(async move {
                    match TcpStream::connect(addr).await {
                        Ok(host) => splice(inside, host).await,
                        Err(error) => {
                            tracing::debug!(%error, %addr, "forwarding out of a node's namespace")
                        }
                    }
                });
            }
        });
        self.keep(task.abort_handle());
        Ok(())
    }

    /// A listener on a free port of the host's loopback whose connections go to the
    /// same port of the namespace's loopback (where the agent is told to listen);
    /// returns the port.
    pub async fn forward_out(self: &std::sync::Arc<Self>) -> std::io::Result<u16> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let host_port = listener.local_addr()?.port();
        let target = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, host_port));
        let this = std::sync::Arc::downgrade(self);
        let task = tokio::spawn(async move {
            loop {
                let host = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        tracing::warn!(%error, "accepting for a node's namespace");
                        continue;
                    }
                };
                let Some(netns) = this.upgrade() else { return };
                tokio::spawn(async move {
                    match netns.connect_inside(target).await {
                        Ok(inside) => splice(host, inside).await,
                        Err(error) => {
                            tracing::debug!(%error, %target, "forwarding into a node's namespace")
                        }
                    }
                });
            }
        });
        self.keep(task.abort_handle());
        Ok(host_port)
    }
}

impl NetNs {
    fn keep(&self, task: AbortHandle) {
        self.forwarders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task);
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        for task in self
            .forwarders
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}
