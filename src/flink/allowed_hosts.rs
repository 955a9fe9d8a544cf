//! `--flink-allowed-hosts`: which Flink REST URLs the executor may send requests to.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// `--flink-allowed-hosts`: the hosts the executor may send requests to. Host names match
/// the URL's host exactly (case-insensitively), whatever they resolve to; IP addresses and
/// CIDR networks match an IP host, or every address a host name resolves to. Empty: any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    names: Vec<String>,
    nets: Vec<(IpAddr, u8)>,
}

impl AllowedHosts {
    /// Parses `jobmanager,10.0.0.0/8,127.0.0.1,::1,[fd00::]/8`.
    pub fn parse(list: &str) -> Result<AllowedHosts, String> {
        let mut allowed = AllowedHosts::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (addr, prefix) = match entry.split_once('/') {
                Some((a, p)) => (a, Some(p)),
                None => (entry, None),
            };
            let unbracketed = addr
                .strip_prefix('[')
                .and_then(|a| a.strip_suffix(']'))
                .unwrap_or(addr);
            match (unbracketed.parse::<IpAddr>(), prefix) {
                (Ok(ip), prefix) => {
                    let ip = ip.to_canonical();
                    let max = if ip.is_ipv4() { 32 } else { 128 };
                    let bits = match prefix {
                        None => max,
                        Some(p) => match p.parse::<u8>() {
                            Ok(b) if b <= max => b,
                            _ => {
                                return Err(format!(
                                    "{entry:?}: the prefix length must be 0 to {max}"
                                ));
                            }
                        },
                    };
                    allowed.nets.push((ip, bits));
                }
                (Err(_), None) => {
                    let ok = entry.len() <= 253
                        && entry.split('.').all(|label| {
                            !label.is_empty()
                                && label.len() <= 63
                                && label
                                    .bytes()
                                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                        });
                    if !ok {
                        return Err(format!(
                            "{entry:?} is neither a host name, an IP address nor a CIDR network"
                        ));
                    }
                    allowed.names.push(entry.to_ascii_lowercase());
                }
                (Err(_), Some(_)) => {
                    return Err(format!("{entry:?}: a CIDR network needs an IP address"));
                }
            }
        }
        Ok(allowed)
    }

    /// No restriction.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.nets.is_empty()
    }

    fn allows_name(&self, name: &str) -> bool {
        self.names.iter().any(|n| n.eq_ignore_ascii_case(name))
    }

    fn allows_ip(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|&(net, bits)| in_net(ip, net, bits))
    }

    /// Checks the host of a (normalised) Flink URL; resolves a host name that is not
    /// listed by name and checks every address it resolves to. The error names the host.
    pub async fn check_url(&self, url: &str) -> Result<(), String> {
        if self.is_empty() {
            return Ok(());
        }
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?}: {e}"))?;
        let port = parsed.port_or_known_default().unwrap_or(80);
        let host = parsed.host_str().unwrap_or_default();
        let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
        match literal.unwrap_or(host).parse::<IpAddr>() {
            Ok(ip) => self.check_ip(host, ip),
            Err(_) if host.is_empty() => Err(format!("{url:?} has no host")),
            Err(_) if self.allows_name(host) => Ok(()),
            Err(_) => self.resolve(host, port).await.map(|_| ()),
        }
    }

    fn check_ip(&self, host: &str, ip: IpAddr) -> Result<(), String> {
        if self.allows_ip(ip) {
            Ok(())
        } else {
            Err(format!("host {host} is not in --flink-allowed-hosts"))
        }
    }

    /// The addresses of `name`, all of them allowed (or `name` is listed by name).
    async fn resolve(&self, name: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| format!("host {name} cannot be resolved: {e}"))?
            .collect();
        if self.is_empty() || self.allows_name(name) {
            return Ok(addrs);
        }
        if addrs.is_empty() {
            return Err(format!("host {name} resolves to no address"));
        }
        if let Some(bad) = addrs.iter().find(|a| !self.allows_ip(a.ip())) {
            return Err(format!(
                "host {name} resolves to {}, which is not in --flink-allowed-hosts",
                bad.ip()
            ));
        }
        Ok(addrs)
    }
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// The client's resolver: the connection goes only to addresses the allow-list accepts,
/// whatever the name resolves to by the time of the connection (no DNS rebinding between
/// the check and the connection).
pub(super) struct CheckedResolver(pub(super) Arc<AllowedHosts>);

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allowed = self.0.clone();
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = allowed.resolve(&name, 0).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}
