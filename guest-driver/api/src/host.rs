//! What every part of the API needs of the node it belongs to: the node
//! (adapter and shared memory) and its tables. Each part's own narrow
//! trait (`LockHost`, `RegionHost`, `JoinHost`) adds what only it needs;
//! the handle's `Inner` provides them all.

use crate::node::Node;
use crate::table::Tables;

pub(crate) trait NodeHost: Send + Sync {
    fn node(&self) -> &Node;
    fn tables(&self) -> &Tables;
}
