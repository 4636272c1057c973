//! Typed identifiers used across the core and on the wire.

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u32);

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// An item (file) of the repository, numbered by the server's catalogue.
    ItemId
);
id_type!(
    /// A client, numbered by the server when its request connection opens.
    ClientId
);
id_type!(
    /// One transmission on the data channel; increases strictly over a session.
    TransmissionId
);
id_type!(
    /// A source block of an item (u32: items may have many blocks).
    BlockId
);
id_type!(
    /// A server session; packets of another session are dropped.
    SessionId
);
