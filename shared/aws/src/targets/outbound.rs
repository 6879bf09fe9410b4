//! The HTTP client of requests made on a user's behalf, and the check before each one: the URL's
//! host resolved through a [`Lookup`] and every address checked by the [`Egress`] policy; then the
//! client resolves the name again through the same policy, so it connects only to an address that
//! passed (a name that changes its answer in between cannot reach a refused address). No proxy,
//! no redirects.

use async_trait::async_trait;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use sundial_domain::egress::{Egress, Refused};
use url::{Host, Url};

/// Resolves host names (the system's resolver; tests give names of their own).
#[async_trait]
pub trait Lookup: Send + Sync + std::fmt::Debug {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>>;
}

/// The system's resolver.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

#[async_trait]
impl Lookup for SystemLookup {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, 0)).await?.map(|a| a.ip()).collect())
    }
}

/// Why a request may not be sent.
#[derive(Debug, thiserror::Error)]
pub enum Blocked {
    /// The destination is refused: a permanent failure.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The name does not resolve now: worth another attempt.
    #[error("`{host}` does not resolve: {source}")]
    Unresolved { host: String, source: std::io::Error },
}

/// The policy, the resolver and a client that obeys both.
#[derive(Debug, Clone)]
pub struct Outbound {
    egress: Arc<Egress>,
    lookup: Arc<dyn Lookup>,
    /// Built on first use: building it loads the system's root certificates (half of a
    /// function's init, measured), which the tick and the watchdog never need. A build that
    /// failed stays failed: no request goes out through a client without the guard.
    client: Arc<std::sync::OnceLock<Result<reqwest::Client, String>>>,
}

impl Outbound {
    pub fn new(egress: Egress, lookup: Arc<dyn Lookup>) -> Self {
        Outbound { egress: Arc::new(egress), lookup, client: Arc::default() }
    }

    /// The client; send only requests whose URL [`Outbound::check`] passed. An error when it
    /// could not be built (no root certificates, say): nothing can be sent.
    pub fn client(&self) -> Result<&reqwest::Client, &str> {
        self.client
            .get_or_init(|| {
                let resolver = GuardedResolver { egress: self.egress.clone(), lookup: self.lookup.clone() };
                // reqwest's TLS takes the process's crypto provider: ring, as the SDK's client
                // uses (an Err only says that one is installed already).
                let _ = rustls::crypto::ring::default_provider().install_default();
                reqwest::Client::builder()
                    .dns_resolver(resolver)
                    .no_proxy()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| format!("the HTTP client could not be built: {e}"))
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// Checks `url` as written, then every address its host resolves to.
    pub async fn check(&self, url: &Url) -> Result<(), Blocked> {
        self.egress.check_url(url)?;
        let Some(Host::Domain(domain)) = url.host() else { return Ok(()) };
        let port = url.port_or_known_default().unwrap_or(0);
        let addresses = self
            .lookup
            .lookup(domain)
            .await
            .map_err(|source| Blocked::Unresolved { host: domain.to_string(), source })?;
        for ip in addresses {
            self.egress.check_ip(domain, ip)?;
            self.egress.check_own(&ip.to_string(), port)?;
        }
        Ok(())
    }
}

/// The client's resolver: the lookup's answer, every address checked.
#[derive(Debug)]
struct GuardedResolver {
    egress: Arc<Egress>,
    lookup: Arc<dyn Lookup>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let (egress, lookup) = (self.egress.clone(), self.lookup.clone());
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addresses = lookup.lookup(&host).await?;
            for ip in &addresses {
                egress.check_ip(&host, *ip)?;
            }
            let addrs: Vec<SocketAddr> = addresses.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect();
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The refusal in an error's chain of sources, if a refusal caused it.
pub fn refusal_in<'e>(error: &'e (dyn std::error::Error + 'static)) -> Option<&'e Refused> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return Some(refused);
        }
        cause = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;
    use sundial_domain::egress::Class;

    /// Names of the test's own; each lookup takes the next answer of its name (the last repeats).
    #[derive(Debug, Default)]
    struct Names(Mutex<HashMap<String, Vec<Vec<IpAddr>>>>);

    #[async_trait]
    impl Lookup for Names {
        async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
            let mut names = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match names.get_mut(host) {
                Some(answers) if answers.len() > 1 => Ok(answers.remove(0)),
                Some(answers) => Ok(answers[0].clone()),
                None => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such name")),
            }
        }
    }

    fn names(entries: &[(&str, &[&str])]) -> Arc<Names> {
        let map = entries
            .iter()
            .map(|(name, answers)| {
                let answers = answers.iter().map(|a| vec![a.parse().expect("an address")]).collect();
                (name.to_string(), answers)
            })
            .collect();
        Arc::new(Names(Mutex::new(map)))
    }

    fn url(text: &str) -> Url {
        Url::parse(text).expect("a URL")
    }

    #[tokio::test]
    async fn a_name_that_resolves_inside_is_refused_and_one_that_does_not_resolve_is_not_refused() {
        let outbound = Outbound::new(
            Egress::default(),
            names(&[
                ("inside.test", &["10.0.0.7"]),
                ("meta.test", &["169.254.169.254"]),
                ("public.test", &["93.184.216.34"]),
            ]),
        );
        assert!(matches!(outbound.check(&url("http://inside.test/")).await, Err(Blocked::Refused(_))));
        assert!(matches!(
            outbound.check(&url("http://meta.test/")).await,
            Err(Blocked::Refused(Refused::Credentials { .. }))
        ));
        assert!(outbound.check(&url("https://public.test/")).await.is_ok());
        assert!(matches!(
            outbound.check(&url("http://nowhere.test/")).await,
            Err(Blocked::Unresolved { .. })
        ));
    }

    #[tokio::test]
    async fn a_name_is_refused_for_each_inside_class_it_resolves_to() {
        let classes = [
            ("127.0.0.2", Class::Loopback),
            ("192.168.4.4", Class::Private),
            ("169.254.9.9", Class::LinkLocal),
            ("100.100.0.1", Class::Shared),
            ("239.1.1.1", Class::Multicast),
            ("255.255.255.255", Class::Broadcast),
            ("0.0.0.0", Class::Unspecified),
            ("198.51.100.7", Class::Reserved),
            ("fd00:ec2::254", Class::Credentials),
            ("fe80::9", Class::LinkLocal),
            ("64:ff9b::0a00:0001", Class::Private),
        ];
        for (ip, want) in classes {
            let outbound = Outbound::new(Egress::default(), names(&[("name.test", &[ip])]));
            match outbound.check(&url("https://name.test/")).await {
                Err(Blocked::Refused(
                    Refused::Address { class, .. } | Refused::Credentials { class, .. },
                )) => {
                    assert_eq!(class, want, "{ip}")
                }
                other => panic!("{ip}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_name_resolving_to_an_own_endpoint_with_its_port_is_refused() {
        let egress =
            Egress::new(&[], &["http://127.0.0.1:4566".to_string()]).expect("a policy").allowing_loopback();
        let outbound = Outbound::new(egress, names(&[("emulator.test", &["127.0.0.1"])]));
        assert!(matches!(
            outbound.check(&url("http://emulator.test:4566/")).await,
            Err(Blocked::Refused(Refused::Own(_)))
        ));
        assert!(outbound.check(&url("http://emulator.test:8080/")).await.is_ok());
    }

    #[tokio::test]
    async fn a_name_rebound_inside_after_the_check_is_never_connected_to() {
        // Public when checked, loopback when the client resolves it: the client refuses.
        let outbound =
            Outbound::new(Egress::default(), names(&[("rebind.test", &["93.184.216.34", "127.0.0.1"])]));
        let target = url("http://rebind.test:9/");
        assert!(outbound.check(&target).await.is_ok());
        let error = outbound
            .client()
            .expect("the client builds")
            .get(target)
            .send()
            .await
            .expect_err("the client must refuse");
        assert!(
            matches!(refusal_in(&error), Some(Refused::Address { .. })),
            "{:?}",
            super::refusal_in(&error)
        );
    }
}
