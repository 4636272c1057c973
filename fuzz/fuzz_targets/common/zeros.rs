//! The block hashes of an item of zero bytes, for the targets whose items
//! are zeros (a zero source, zero symbols): with these, the checks on
//! what they read or decode pass.

use repocast_core::fec::layout::Layout;

/// The BLAKE3 hash of each of `layout`'s blocks when every byte is zero.
pub fn zero_block_hashes(layout: &Layout) -> Vec<[u8; 32]> {
    (0..layout.blocks())
        .map(|b| *blake3::hash(&vec![0; layout.block_len(b) as usize]).as_bytes())
        .collect()
}
