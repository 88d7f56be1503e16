//! Why a surgery refuses an output path, and the marker file that shows a
//! directory is one readout wrote (apart from `output`, so the error type
//! can name a refusal without importing the code that makes it).

/// Written into every output directory at write time, so that a later run
/// can tell a directory readout made from one it did not.
pub const MARKER: &str = ".readout-surgery";

/// Why an output path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("is the input model; choose a new directory")]
    IsInput,
    #[error("contains the input model {input}; replacing it would delete the input")]
    ContainsInput { input: String },
    #[error("contains the current directory; choose a new directory")]
    ContainsCwd,
    #[error("is a filesystem root")]
    IsRoot,
    #[error("is a symbolic link; name the directory itself")]
    Symlink,
    #[error("exists and is not a directory; readout replaces only model directories it wrote")]
    NotADirectory,
    #[error("exists and was not written by readout (no {MARKER} in it); choose a new directory, or remove it yourself")]
    NotWrittenByReadout,
    #[error(
        "holds {entry:?}, which readout did not write; remove it first to replace this directory"
    )]
    ForeignEntry { entry: String },
    #[error("holds a model readout wrote ({command}); pass --force to replace it")]
    NeedsForce { command: String },
}
