//! The resource types quickshake subscribes to, their type URLs and stat scopes.

/// One xDS resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Cluster,
    Endpoint,
    Listener,
    Route,
    Secret,
}

impl Kind {
    /// Every kind, in Envoy's warming order: clusters and their endpoints before the listeners,
    /// routes and secrets that use them.
    pub const ALL: [Kind; 5] = [
        Kind::Cluster,
        Kind::Endpoint,
        Kind::Listener,
        Kind::Route,
        Kind::Secret,
    ];

    pub fn type_url(self) -> &'static str {
        match self {
            Kind::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            Kind::Endpoint => "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            Kind::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            Kind::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            Kind::Secret => "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
        }
    }

    pub fn from_type_url(url: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.type_url() == url)
    }

    /// Whether a subscription asks for every resource of the type (LDS, CDS) rather than named
    /// ones (RDS, EDS, SDS).
    pub fn wildcard(self) -> bool {
        matches!(self, Kind::Listener | Kind::Cluster)
    }

    /// Envoy's stat scope for the type's update counters: `listener_manager.lds.`,
    /// `cluster_manager.cds.`; RDS, EDS and SDS, which Envoy counts per resource, are counted
    /// here per type (`rds.`, `eds.`, `sds.`).
    pub fn stat_scope(self) -> &'static str {
        match self {
            Kind::Listener => "listener_manager.lds.",
            Kind::Cluster => "cluster_manager.cds.",
            Kind::Route => "rds.",
            Kind::Endpoint => "eds.",
            Kind::Secret => "sds.",
        }
    }

    /// The word Envoy's NACK messages use.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Listener => "listener",
            Kind::Cluster => "cluster",
            Kind::Route => "route configuration",
            Kind::Endpoint => "cluster load assignment",
            Kind::Secret => "secret",
        }
    }

    /// The field that names a resource of this type.
    pub fn name_field(self) -> &'static str {
        match self {
            Kind::Endpoint => "cluster_name",
            _ => "name",
        }
    }
}
