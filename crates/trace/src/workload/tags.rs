//! The tags a workload gives its blocks: what each block is for, which an allocator
//! set-up may route on (`bento demo` puts [`FRAME`] blocks in a frame
//! arena and [`PARTICLE`] blocks in a pool).

/// Level data: loaded with a level (or cell), freed when it unloads.
pub const LEVEL: u32 = 1;
/// A frame's temporaries: freed before the frame after next ends.
pub const FRAME: u32 = 2;
/// Streamed assets (64 KiB–4 MiB), alive for tens of frames.
pub const STREAM: u32 = 3;
/// Long-lived blocks that grow by `realloc`.
pub const GROWER: u32 = 4;
/// Blocks that live for the whole session.
pub const GLOBAL: u32 = 5;
/// 64-byte particles, alive for tens of frames.
pub const PARTICLE: u32 = 6;
/// Load-time temporaries: short-lived blocks between a load's resident ones.
pub const LOAD: u32 = 7;
/// State that outlives levels: saves, UI text, script objects.
pub const LASTING: u32 = 8;
/// Entries of a cache that evicts its oldest (AI and path queries).
pub const CACHE: u32 = 9;
/// Blocks of the synthetic workloads, which have no purpose.
pub const NONE: u32 = 0;

/// The name of a tag, for tables and charts ("tag 9" for one not listed here).
///
/// ```
/// use bento_trace::workload::tags;
///
/// assert_eq!(tags::name(tags::PARTICLE), "particle");
/// assert_eq!(tags::name(42), "tag 42");
/// ```
pub fn name(tag: u32) -> std::borrow::Cow<'static, str> {
    match tag {
        NONE => "none".into(),
        LEVEL => "level".into(),
        FRAME => "frame".into(),
        STREAM => "stream".into(),
        GROWER => "grower".into(),
        GLOBAL => "global".into(),
        PARTICLE => "particle".into(),
        LOAD => "load".into(),
        LASTING => "lasting".into(),
        CACHE => "cache".into(),
        other => format!("tag {other}").into(),
    }
}
