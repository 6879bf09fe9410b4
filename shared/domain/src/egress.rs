//! Where Sundial may connect on a user's behalf. Every HTTP request made for a job (its target;
//! its `notify.https` endpoints as far as Sundial sees them) is checked by an [`Egress`] policy:
//!
//! - the URL is parsed by the `url` crate, which reads the odd spellings of an address (decimal,
//!   octal or hex IPv4, IPv4-mapped IPv6) as the address they are;
//! - every address the host is or resolves to is refused when it is loopback, private,
//!   link-local, shared (CGNAT), multicast, broadcast, unspecified or reserved, and so is an IPv6
//!   address that embeds such an IPv4 one (mapped, compatible, NAT64, 6to4), unless the
//!   deployment's allow-list names its network or its host;
//! - the cloud metadata and credential endpoints are refused whatever the allow-list says;
//! - Sundial's own endpoints (its API, the AWS endpoint it is configured with, the Lambda Runtime
//!   API) are refused by host and port.
//!
//! At create and PATCH the literal cases are refused (nothing is resolved there); at call time
//! the worker resolves the name and checks every address, and its client connects only to
//! addresses checked again by its own resolver (`worker::outbound`).

use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use url::{Host, Url};

/// The instance metadata service and the container and pod credential endpoints: their answers
/// are the function's own credentials, so no allow-list opens them.
const CREDENTIAL_ENDPOINTS: [IpAddr; 5] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 23)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)),
];

/// Why an address is not one a job may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Loopback,
    Private,
    LinkLocal,
    /// 100.64.0.0/10, carrier-grade NAT.
    Shared,
    Multicast,
    Broadcast,
    Unspecified,
    /// Documentation, benchmarking, protocol assignments, future use.
    Reserved,
    /// The metadata and credential endpoints.
    Credentials,
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Class::Loopback => "a loopback address",
            Class::Private => "a private address",
            Class::LinkLocal => "a link-local address",
            Class::Shared => "a shared (carrier-grade NAT) address",
            Class::Multicast => "a multicast address",
            Class::Broadcast => "the broadcast address",
            Class::Unspecified => "an unspecified address",
            Class::Reserved => "a reserved address",
            Class::Credentials => "a cloud metadata or credentials endpoint",
        })
    }
}

/// A destination the policy refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "`{host}` is {class} ({ip}); only the deployment's allow-list (SUNDIAL_ALLOWED_NETWORKS) opens it"
    )]
    Address { host: String, ip: IpAddr, class: Class },
    #[error("`{host}` is {class} ({ip}), which is never reachable from a job")]
    Credentials { host: String, ip: IpAddr, class: Class },
    #[error("`{0}` is one of Sundial's own endpoints")]
    Own(String),
    #[error("`{0}` has no host")]
    NoHost(String),
}

/// The class of an address no job may reach unless allowed, or `None` for a public one.
pub fn class(ip: IpAddr) -> Option<Class> {
    if CREDENTIAL_ENDPOINTS.contains(&ip) {
        return Some(Class::Credentials);
    }
    match ip {
        IpAddr::V4(v4) => class_v4(v4),
        IpAddr::V6(v6) => class_v6(v6),
    }
}

fn class_v4(ip: Ipv4Addr) -> Option<Class> {
    let [a, b, c, _] = ip.octets();
    if CREDENTIAL_ENDPOINTS.contains(&IpAddr::V4(ip)) {
        Some(Class::Credentials)
    } else if ip.is_loopback() {
        Some(Class::Loopback)
    } else if ip.is_private() {
        Some(Class::Private)
    } else if ip.is_link_local() {
        Some(Class::LinkLocal)
    } else if a == 100 && (64..128).contains(&b) {
        Some(Class::Shared)
    } else if ip.is_multicast() {
        Some(Class::Multicast)
    } else if ip.is_broadcast() {
        Some(Class::Broadcast)
    } else if a == 0 {
        Some(Class::Unspecified)
    } else if ip.is_documentation()
        || a >= 240
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b & 0xfe) == 18)
    {
        Some(Class::Reserved)
    } else {
        None
    }
}

fn class_v6(ip: Ipv6Addr) -> Option<Class> {
    let segments = ip.segments();
    // IPv4 carried inside IPv6 reaches the IPv4 address: mapped (::ffff:a.b.c.d), compatible
    // (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
    let embedded = |high: u16, low: u16| Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
    if let Some(v4) = ip.to_ipv4_mapped() {
        return class_v4(v4);
    }
    if segments[..6] == [0, 0, 0, 0, 0, 0] && !ip.is_loopback() && !ip.is_unspecified() {
        return class_v4(embedded(segments[6], segments[7])).or(Some(Class::Reserved));
    }
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return class_v4(embedded(segments[6], segments[7]));
    }
    if segments[0] == 0x2002 {
        return class_v4(embedded(segments[1], segments[2]));
    }
    if ip.is_loopback() {
        Some(Class::Loopback)
    } else if ip.is_unspecified() {
        Some(Class::Unspecified)
    } else if ip.is_multicast() {
        Some(Class::Multicast)
    } else if segments[0] & 0xffc0 == 0xfe80 {
        Some(Class::LinkLocal)
    } else if segments[0] & 0xfe00 == 0xfc00 || segments[0] & 0xffc0 == 0xfec0 {
        // Unique local, and the deprecated site-local.
        Some(Class::Private)
    } else if segments[..2] == [0x2001, 0xdb8] || segments[..4] == [0x100, 0, 0, 0] {
        Some(Class::Reserved)
    } else {
        None
    }
}

/// A host as compared: lower case, no trailing dot, an IPv6 address without its brackets.
fn bare(host: &str) -> String {
    host.trim_end_matches('.').trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

/// A host and port of one of Sundial's own endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    host: String,
    port: u16,
}

/// The policy: what the deployment allows besides public addresses, and its own endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Egress {
    networks: Vec<IpNet>,
    hosts: Vec<String>,
    own: Vec<Endpoint>,
}

/// An allow-list entry that is neither a network nor a host name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is neither a network (CIDR such as 10.1.0.0/16, or an address) nor a host name")]
pub struct BadEntry(pub String);

impl Egress {
    /// A policy allowing `allowed` (CIDRs, addresses or host names) and refusing `own` (URLs, or
    /// `host:port`, of Sundial's own endpoints).
    pub fn new(allowed: &[String], own: &[String]) -> Result<Self, BadEntry> {
        let mut egress = Egress::default();
        for entry in allowed.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            if let Ok(net) = entry.parse::<IpNet>() {
                egress.networks.push(net);
            } else if let Ok(ip) = entry.parse::<IpAddr>() {
                egress.networks.push(IpNet::from(ip));
            } else if Host::parse(entry).is_ok_and(|h| matches!(h, Host::Domain(_))) {
                egress.hosts.push(entry.to_ascii_lowercase());
            } else {
                return Err(BadEntry(entry.to_string()));
            }
        }
        for endpoint in own {
            let parsed = Url::parse(endpoint).or_else(|_| Url::parse(&format!("http://{endpoint}")));
            if let Ok(url) = parsed
                && let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default())
            {
                let host = bare(host);
                if host == "localhost" {
                    egress.own.push(Endpoint { host: Ipv4Addr::LOCALHOST.to_string(), port });
                }
                egress.own.push(Endpoint { host, port });
            }
        }
        Ok(egress)
    }

    /// This policy, loopback allowed too (the local runtime and the tests, whose targets listen
    /// on loopback).
    pub fn allowing_loopback(mut self) -> Self {
        for net in ["127.0.0.0/8", "::1/128"] {
            if let Ok(net) = net.parse() {
                self.networks.push(net);
            }
        }
        self
    }

    /// This policy, refusing `endpoint` (a URL or `host:port`) too.
    pub fn refusing(self, endpoint: &str) -> Self {
        let mut more = Egress::new(&[], &[endpoint.to_string()]).unwrap_or_default();
        let mut egress = self;
        egress.own.append(&mut more.own);
        egress
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.contains(&host)
    }

    /// Checks one address `host` is or resolves to.
    pub fn check_ip(&self, host: &str, ip: IpAddr) -> Result<(), Refused> {
        let Some(class) = class(ip) else { return Ok(()) };
        let host = host.to_string();
        if class == Class::Credentials {
            return Err(Refused::Credentials { host, ip, class });
        }
        if self.networks.iter().any(|net| net.contains(&ip)) || self.host_allowed(&host) {
            return Ok(());
        }
        Err(Refused::Address { host, ip, class })
    }

    /// Refuses Sundial's own endpoints, by host (or address) and port.
    pub fn check_own(&self, host: &str, port: u16) -> Result<(), Refused> {
        let host = bare(host);
        let own = self.own.iter().any(|e| {
            e.port == port
                && (e.host == host
                    || matches!((e.host.parse::<IpAddr>(), host.parse::<IpAddr>()),
                        (Ok(a), Ok(b)) if a.to_canonical() == b.to_canonical()))
        });
        if own { Err(Refused::Own(format!("{host}:{port}"))) } else { Ok(()) }
    }

    /// Checks a URL as written, without resolving it (create and PATCH): an address host, a
    /// `localhost` name, an own endpoint.
    pub fn check_url(&self, url: &Url) -> Result<(), Refused> {
        let host = url.host().ok_or_else(|| Refused::NoHost(url.to_string()))?;
        let port = url.port_or_known_default().unwrap_or(0);
        let name = url.host_str().unwrap_or_default();
        self.check_own(name, port)?;
        match host {
            Host::Ipv4(ip) => self.check_ip(name, IpAddr::V4(ip)),
            Host::Ipv6(ip) => self.check_ip(name, IpAddr::V6(ip)),
            Host::Domain(domain) => {
                let domain = domain.trim_end_matches('.').to_ascii_lowercase();
                if domain == "localhost" || domain.ends_with(".localhost") {
                    // Always loopback (RFC 6761): checked as the address it will be.
                    self.check_own(&Ipv4Addr::LOCALHOST.to_string(), port)?;
                    self.check_own(&Ipv6Addr::LOCALHOST.to_string(), port)?;
                    self.check_ip(name, IpAddr::V4(Ipv4Addr::LOCALHOST))
                } else {
                    Ok(())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    fn url(text: &str) -> Url {
        Url::parse(text).expect("a URL")
    }

    #[test]
    fn every_inside_class_is_refused_and_public_addresses_pass() {
        let cases = [
            ("127.0.0.1", Class::Loopback),
            ("127.255.0.9", Class::Loopback),
            ("10.1.2.3", Class::Private),
            ("172.16.0.1", Class::Private),
            ("172.31.255.255", Class::Private),
            ("192.168.1.1", Class::Private),
            ("169.254.1.1", Class::LinkLocal),
            ("100.64.0.1", Class::Shared),
            ("100.127.255.255", Class::Shared),
            ("224.0.0.1", Class::Multicast),
            ("255.255.255.255", Class::Broadcast),
            ("0.0.0.0", Class::Unspecified),
            ("0.1.2.3", Class::Unspecified),
            ("192.0.2.1", Class::Reserved),
            ("198.18.0.1", Class::Reserved),
            ("240.0.0.1", Class::Reserved),
            ("169.254.169.254", Class::Credentials),
            ("169.254.170.2", Class::Credentials),
            ("fd00:ec2::254", Class::Credentials),
            ("::1", Class::Loopback),
            ("::", Class::Unspecified),
            ("fe80::1", Class::LinkLocal),
            ("fc00::1", Class::Private),
            ("fd12:3456::1", Class::Private),
            ("ff02::1", Class::Multicast),
            ("2001:db8::1", Class::Reserved),
            // IPv4 inside IPv6 is the IPv4 address.
            ("::ffff:127.0.0.1", Class::Loopback),
            ("::ffff:169.254.169.254", Class::Credentials),
            ("::10.0.0.1", Class::Private),
            ("64:ff9b::a9fe:a9fe", Class::Credentials),
            ("2002:0a00:0001::1", Class::Private),
        ];
        for (text, want) in cases {
            assert_eq!(class(ip(text)), Some(want), "{text}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "100.63.255.255", "172.32.0.1", "2606:4700::1111"] {
            assert_eq!(class(ip(public)), None, "{public}");
        }
    }

    #[test]
    fn odd_spellings_of_an_address_are_the_address() {
        let egress = Egress::default();
        for spelling in [
            "http://2130706433/",         // decimal
            "http://017700000001/",       // octal
            "http://0x7f.0.0.1/",         // hex
            "http://127.1/",              // short form
            "http://[::ffff:127.0.0.1]/", // IPv4-mapped IPv6
            "http://[::ffff:7f00:1]/",
            "http://localhost:8080/",
            "http://api.localhost/",
            "http://LOCALHOST./",
        ] {
            assert!(
                matches!(
                    egress.check_url(&url(spelling)),
                    Err(Refused::Address { class: Class::Loopback, .. })
                ),
                "{spelling}: {:?}",
                egress.check_url(&url(spelling))
            );
        }
        assert!(matches!(
            egress.check_url(&url("http://0251.0376.0251.0376/latest/meta-data/")),
            Err(Refused::Credentials { .. })
        ));
        assert_eq!(egress.check_url(&url("https://example.com/hook")), Ok(()));
    }

    #[test]
    fn the_allow_list_opens_networks_and_hosts_but_never_the_credential_endpoints() {
        let allowed: Vec<String> =
            ["10.1.0.0/16", "192.168.7.7", "jobs.internal", "169.254.0.0/16"].map(String::from).to_vec();
        let egress = Egress::new(&allowed, &[]).expect("a valid allow-list");
        assert_eq!(egress.check_ip("x", ip("10.1.200.3")), Ok(()));
        assert!(egress.check_ip("x", ip("10.2.0.1")).is_err());
        assert_eq!(egress.check_ip("x", ip("192.168.7.7")), Ok(()));
        assert_eq!(egress.check_ip("jobs.internal", ip("10.9.9.9")), Ok(()));
        assert_eq!(egress.check_ip("x", ip("169.254.1.1")), Ok(()));
        assert!(matches!(egress.check_ip("x", ip("169.254.169.254")), Err(Refused::Credentials { .. })));
        assert!(matches!(
            egress.check_ip("jobs.internal", ip("169.254.170.2")),
            Err(Refused::Credentials { .. })
        ));
        assert_eq!(
            Egress::new(&["not a network/99".to_string()], &[]),
            Err(BadEntry("not a network/99".into()))
        );
    }

    #[test]
    fn loopback_opens_only_by_configuration_and_own_endpoints_stay_closed() {
        let own = ["http://127.0.0.1:4566".to_string(), "127.0.0.1:9001".to_string()];
        let closed = Egress::new(&[], &own).expect("a valid policy");
        assert!(closed.check_url(&url("http://127.0.0.1:8080/")).is_err());
        let open = closed.allowing_loopback();
        assert_eq!(open.check_url(&url("http://127.0.0.1:8080/")), Ok(()));
        assert_eq!(open.check_url(&url("http://[::1]:8080/")), Ok(()));
        for endpoint in
            ["http://127.0.0.1:4566/", "http://127.0.0.1:4566/000000000000/q", "http://127.0.0.1:9001/"]
        {
            assert!(matches!(open.check_url(&url(endpoint)), Err(Refused::Own(_))), "{endpoint}");
        }
        assert!(open.check_own("127.0.0.1", 4566).is_err(), "a resolved address of an own endpoint");
    }
}
