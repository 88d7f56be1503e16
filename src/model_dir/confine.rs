//! Which files a model may read natively: those whose real path (symlinks
//! followed) lies inside the model's root. The root is the model's folder,
//! or, for a Hugging Face hub cache snapshot
//! (`models--org--name/snapshots/<revision>/…`, whose files are symlinks
//! into the repository's `blobs/`), the repository folder, so real hub
//! layouts load while a link out of the repository is refused.

use std::path::{Component, Path, PathBuf};

use crate::engine::EngineError;

/// The root of the model whose files lie in `dir`.
pub fn model_root(dir: &Path) -> PathBuf {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    for a in abs.ancestors() {
        let (Some(snapshots), Some(repo)) = (a.parent(), a.parent().and_then(Path::parent)) else {
            continue;
        };
        let is_repo = repo
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("models--"));
        if snapshots.file_name().is_some_and(|n| n == "snapshots")
            && is_repo
            && repo.join("blobs").is_dir()
        {
            return repo.to_path_buf();
        }
    }
    abs
}

/// Whether `name` is a plain relative path: no root, no `..`, no `.`.
pub fn plain_relative(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('\\')
        && Path::new(name)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// A model's root, resolved once.
#[derive(Debug, Clone)]
pub struct Root {
    root: PathBuf,
    real: PathBuf,
}

impl Root {
    /// The root of the model whose files lie in `dir`.
    pub fn of(dir: &Path) -> Result<Self, EngineError> {
        let root = model_root(dir);
        let real = std::fs::canonicalize(&root).map_err(|e| EngineError::ModelFile {
            file: root.display().to_string(),
            message: format!("model folder unreadable ({e})"),
        })?;
        Ok(Self { root, real })
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    fn refuse(&self, role: &str, path: &Path, reason: String) -> EngineError {
        EngineError::OutsideRoot {
            role: role.to_string(),
            path: path.display().to_string(),
            root: self.root.display().to_string(),
            reason,
        }
    }

    /// Refuses `path` (the file `role` names) when its real path leaves the
    /// root. A path that does not resolve is let through: reading it then
    /// fails by name, and nothing outside was read.
    pub fn check(&self, role: &str, path: &Path) -> Result<(), EngineError> {
        match std::fs::canonicalize(path) {
            Ok(real) if real.starts_with(&self.real) => Ok(()),
            Ok(real) => Err(self.refuse(
                role,
                path,
                format!("resolves to {}, outside the model's root", real.display()),
            )),
            Err(_) => Ok(()),
        }
    }

    /// `name`, as a file names another relative to `dir`: refused unless a
    /// plain relative path whose real path stays inside the root.
    pub fn check_name(&self, role: &str, dir: &Path, name: &str) -> Result<PathBuf, EngineError> {
        let path = dir.join(name);
        if !plain_relative(name) {
            return Err(self.refuse(
                role,
                &path,
                format!("{name:?} is not a plain relative path (absolute, or with ..)"),
            ));
        }
        self.check(role, &path)?;
        Ok(path)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("readout-confine-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_symlink_out_of_the_folder_is_refused_and_one_inside_is_not() {
        let d = scratch("link");
        let model = d.join("model");
        std::fs::create_dir_all(&model).unwrap();
        std::fs::write(d.join("secret"), b"x").unwrap();
        std::fs::write(model.join("real.data"), b"x").unwrap();
        symlink(d.join("secret"), model.join("out.data")).unwrap();
        symlink("real.data", model.join("in.data")).unwrap();
        let root = Root::of(&model).unwrap();
        let e = root
            .check_name("external data", &model, "out.data")
            .unwrap_err();
        assert_eq!(e.info().code, "outside_root");
        assert_eq!(e.info().field.as_deref(), Some("external data"));
        assert!(root.check_name("external data", &model, "in.data").is_ok());
        for bad in ["../secret", "/etc/passwd", "a/../../secret", ""] {
            assert!(
                root.check_name("external data", &model, bad).is_err(),
                "{bad}"
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_hub_cache_snapshot_is_rooted_at_its_repository() {
        let d = scratch("hub");
        let repo = d.join("models--org--m");
        let snap = repo.join("snapshots").join("abc123");
        std::fs::create_dir_all(repo.join("blobs")).unwrap();
        std::fs::create_dir_all(snap.join("onnx")).unwrap();
        std::fs::write(repo.join("blobs").join("b1"), b"x").unwrap();
        symlink("../../../../blobs/b1", snap.join("onnx").join("model.onnx")).unwrap();
        assert_eq!(
            model_root(&snap.join("onnx")),
            std::path::absolute(&repo).unwrap()
        );
        let root = Root::of(&snap.join("onnx")).unwrap();
        assert!(root
            .check("graph", &snap.join("onnx").join("model.onnx"))
            .is_ok());
        // Outside the repository is still outside.
        std::fs::write(d.join("elsewhere"), b"x").unwrap();
        symlink(d.join("elsewhere"), snap.join("config.json")).unwrap();
        assert!(root.check("config", &snap.join("config.json")).is_err());
        // Not a hub layout: the folder itself.
        assert_eq!(model_root(&d), std::path::absolute(&d).unwrap());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
