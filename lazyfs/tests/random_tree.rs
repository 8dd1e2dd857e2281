//! Seeded random sequences over a small directory tree (mkdir, rmdir,
//! renames of files and directories within their parent, writes, fsyncs,
//! fsyncdirs, cuts) on a real mount, checked after every step against a
//! reference model in which every directory has current and durable entries.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

const NAMES: [&str; 3] = ["a", "b", "c"];
const MAX_DEPTH: usize = 3;
const STEPS: usize = 400;

#[derive(Debug, Clone)]
enum MNode {
    File {
        current: Vec<u8>,
        durable: Vec<u8>,
    },
    Dir {
        current: BTreeMap<String, usize>,
        durable: BTreeMap<String, usize>,
    },
}

/// What a tree looks like: path -> None for a directory, Some(content).
type Listing = BTreeMap<String, Option<Vec<u8>>>;

struct Model {
    nodes: Vec<MNode>,
}

impl Model {
    fn new() -> Model {
        let root = MNode::Dir {
            current: BTreeMap::new(),
            durable: BTreeMap::new(),
        };
        Model { nodes: vec![root] }
    }

    fn entries(&self, dir: usize) -> &BTreeMap<String, usize> {
        match &self.nodes[dir] {
            MNode::Dir { current, .. } => current,
            MNode::File { .. } => panic!("not a dir"),
        }
    }

    fn entries_mut(&mut self, dir: usize) -> &mut BTreeMap<String, usize> {
        match &mut self.nodes[dir] {
            MNode::Dir { current, .. } => current,
            MNode::File { .. } => panic!("not a dir"),
        }
    }

    fn is_dir(&self, id: usize) -> bool {
        matches!(self.nodes[id], MNode::Dir { .. })
    }

    fn is_empty_dir(&self, id: usize) -> bool {
        self.is_dir(id) && self.entries(id).is_empty()
    }

    /// Reachable directories: (id, relative path, depth).
    fn dirs(&self) -> Vec<(usize, PathBuf, usize)> {
        let mut out = vec![(0, PathBuf::new(), 0)];
        let mut i = 0;
        while i < out.len() {
            let (id, path, depth) = out[i].clone();
            for (name, child) in self.entries(id) {
                if self.is_dir(*child) {
                    out.push((*child, path.join(name), depth + 1));
                }
            }
            i += 1;
        }
        out
    }

    fn listing(&self) -> Listing {
        let mut out = Listing::new();
        for (id, path, _) in self.dirs() {
            for (name, child) in self.entries(id) {
                let key = path.join(name).to_string_lossy().into_owned();
                let value = match &self.nodes[*child] {
                    MNode::File { current, .. } => Some(current.clone()),
                    MNode::Dir { .. } => None,
                };
                out.insert(key, value);
            }
        }
        out
    }

    fn cut(&mut self) {
        for node in &mut self.nodes {
            match node {
                MNode::File { current, durable } => *current = durable.clone(),
                MNode::Dir { current, durable } => *current = durable.clone(),
            }
        }
    }
}

fn listing_of(root: &Path, rel: &Path, out: &mut Listing) {
    for name in names(&root.join(rel)) {
        if rel.as_os_str().is_empty() && name == lazyfs::STORE_NAME {
            continue;
        }
        let path = rel.join(&name);
        let full = root.join(&path);
        let key = path.to_string_lossy().into_owned();
        if full.is_dir() {
            out.insert(key, None);
            listing_of(root, &path, out);
        } else {
            out.insert(key, Some(fs::read(&full).unwrap()));
        }
    }
}

fn listing(root: &Path) -> Listing {
    let mut out = Listing::new();
    listing_of(root, Path::new(""), &mut out);
    out
}

struct Rng(u64);

impl Rng {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// One random step on the mount and the model; returns its description.
fn step(fx: &Fixture, m: &mut Model, rng: &mut Rng, i: usize) -> String {
    let dirs = m.dirs();
    let (dir, rel, depth) = dirs[rng.next(dirs.len())].clone();
    let name = NAMES[rng.next(NAMES.len())].to_string();
    let path = fx.at(&rel.join(&name).to_string_lossy());
    let here = m.entries(dir).get(&name).copied();
    let what = format!("{}/{name}", rel.display());
    match (rng.next(9), here) {
        (0 | 1, None) | (0 | 1, Some(_)) if here.is_none_or(|id| !m.is_dir(id)) => {
            let data = random_bytes(1 + rng.next(5000), i as u64 + 7);
            write(&path, &data);
            let id = here.unwrap_or_else(|| {
                let f = MNode::File {
                    current: Vec::new(),
                    durable: Vec::new(),
                };
                m.nodes.push(f);
                m.nodes.len() - 1
            });
            m.entries_mut(dir).insert(name, id);
            if let MNode::File { current, .. } = &mut m.nodes[id] {
                *current = data;
            }
            format!("write {what}")
        }
        (2, Some(id)) if !m.is_dir(id) => {
            fs::File::open(&path).unwrap().sync_all().unwrap();
            if let MNode::File { current, durable } = &mut m.nodes[id] {
                *durable = current.clone();
            }
            format!("fsync {what}")
        }
        (3, None) if depth < MAX_DEPTH => {
            fs::create_dir(&path).unwrap();
            let d = MNode::Dir {
                current: BTreeMap::new(),
                durable: BTreeMap::new(),
            };
            m.nodes.push(d);
            let id = m.nodes.len() - 1;
            m.entries_mut(dir).insert(name, id);
            format!("mkdir {what}")
        }
        (4, Some(id)) if !m.is_dir(id) || m.is_empty_dir(id) => {
            if m.is_dir(id) {
                fs::remove_dir(&path).unwrap();
            } else {
                fs::remove_file(&path).unwrap();
            }
            m.entries_mut(dir).remove(&name);
            format!("remove {what}")
        }
        (5, Some(id)) => {
            let to = NAMES[rng.next(NAMES.len())].to_string();
            let target = m.entries(dir).get(&to).copied();
            let ok = match target {
                None => true,
                Some(t) if t == id => return "nothing".into(),
                Some(t) => (m.is_dir(id) && m.is_empty_dir(t)) || (!m.is_dir(id) && !m.is_dir(t)),
            };
            if !ok {
                return "nothing".into();
            }
            fs::rename(&path, fx.at(&rel.join(&to).to_string_lossy())).unwrap();
            m.entries_mut(dir).remove(&name);
            m.entries_mut(dir).insert(to.clone(), id);
            format!("rename {what} -> {to}")
        }
        (6 | 7, _) => {
            sync_dir(&fx.at(&rel.to_string_lossy()));
            if let MNode::Dir { current, durable } = &mut m.nodes[dir] {
                *durable = current.clone();
            }
            format!("fsyncdir {}", rel.display())
        }
        (8, _) if rng.next(3) == 0 => {
            fx.mount.cut();
            m.cut();
            "cut".into()
        }
        _ => "nothing".into(),
    }
}

fn run(seed: u64) {
    let Some(fx) = mount() else { return };
    let mut model = Model::new();
    let mut rng = Rng(seed);
    let mut log = Vec::new();
    for i in 0..STEPS {
        log.push(step(&fx, &mut model, &mut rng, i));
        let (got, want) = (listing(fx.mnt.path()), model.listing());
        if got != want {
            let keys = |l: &Listing| l.keys().cloned().collect::<Vec<_>>();
            let recent = &log[log.len().saturating_sub(40)..];
            panic!(
                "seed {seed} step {i}: got {:?}\nwant {:?}\nlast steps: {recent:?}",
                keys(&got),
                keys(&want)
            );
        }
    }
    fx.mount.cut();
    model.cut();
    assert_eq!(
        listing(fx.mnt.path()),
        model.listing(),
        "seed {seed}: after the last cut"
    );
    assert_eq!(
        listing(fx.backing.path()),
        model.listing(),
        "seed {seed}: backing dir"
    );
}

#[test]
fn random_tree_seed_1() {
    run(0x5eed_0001);
}

#[test]
fn random_tree_seed_2() {
    run(0x5eed_0002_abcd);
}

#[test]
fn random_tree_seed_3() {
    run(0x5eed_0003_7777);
}
