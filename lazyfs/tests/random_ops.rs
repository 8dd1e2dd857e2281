//! Seeded random sequences of writes, fsyncs, renames, unlinks, fsyncdirs
//! and cuts on a real mount, checked after every step against a small
//! reference model of the per-file / per-directory durability rules.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::fs;

const DIRS: [&str; 2] = [".", "sub"];
const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const STEPS: usize = 300;

/// A file of the model: its current and its durable content.
#[derive(Debug, Clone, Default)]
struct Inode {
    current: Vec<u8>,
    durable: Vec<u8>,
}

/// Names are per directory and map to inode ids, as in the filesystem.
#[derive(Debug, Default)]
struct Model {
    current: [BTreeMap<&'static str, usize>; 2],
    durable: [BTreeMap<&'static str, usize>; 2],
    inodes: Vec<Inode>,
}

impl Model {
    fn cut(&mut self) {
        for d in 0..2 {
            self.current[d] = self.durable[d].clone();
        }
        for inode in &mut self.inodes {
            inode.current = inode.durable.clone();
        }
    }

    fn expected(&self, d: usize) -> BTreeMap<String, Vec<u8>> {
        self.current[d]
            .iter()
            .map(|(name, id)| (name.to_string(), self.inodes[*id].current.clone()))
            .collect()
    }
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

fn actual(fx: &Fixture, d: usize) -> BTreeMap<String, Vec<u8>> {
    let dir = fx.at(DIRS[d]);
    names(&dir)
        .into_iter()
        .filter(|n| d != 0 || n != "sub")
        .map(|n| {
            let data = fs::read(dir.join(&n)).unwrap();
            (n, data)
        })
        .collect()
}

/// One random step on both the mount and the model; returns its description.
fn step(fx: &Fixture, model: &mut Model, rng: &mut Rng, i: usize) -> String {
    let d = rng.next(2);
    let name = NAMES[rng.next(NAMES.len())];
    let path = fx.at(DIRS[d]).join(name);
    let exists = model.current[d].get(name).copied();
    match (rng.next(7), exists) {
        (0 | 1, _) => {
            let data = random_bytes(1 + rng.next(9000), i as u64 + 1);
            write(&path, &data);
            let id = exists.unwrap_or_else(|| {
                model.inodes.push(Inode::default());
                model.inodes.len() - 1
            });
            model.current[d].insert(name, id);
            model.inodes[id].current = data;
            format!("write {}/{name}", DIRS[d])
        }
        (2, Some(id)) => {
            fs::File::open(&path).unwrap().sync_all().unwrap();
            model.inodes[id].durable = model.inodes[id].current.clone();
            format!("fsync {}/{name}", DIRS[d])
        }
        (3, Some(id)) => {
            let to = NAMES[rng.next(NAMES.len())];
            fs::rename(&path, fx.at(DIRS[d]).join(to)).unwrap();
            model.current[d].remove(name);
            model.current[d].insert(to, id);
            format!("rename {}/{name} -> {to}", DIRS[d])
        }
        (4, Some(_)) => {
            fs::remove_file(&path).unwrap();
            model.current[d].remove(name);
            format!("unlink {}/{name}", DIRS[d])
        }
        (5, _) => {
            sync_dir(&fx.at(DIRS[d]));
            model.durable[d] = model.current[d].clone();
            format!("fsyncdir {}", DIRS[d])
        }
        (6, _) if rng.next(3) == 0 => {
            fx.mount.cut();
            model.cut();
            "cut".to_string()
        }
        _ => "nothing".to_string(),
    }
}

fn run(seed: u64) {
    let prepare = |b: &std::path::Path| fs::create_dir(b.join("sub")).unwrap();
    let Some(fx) = mount_with(prepare, |_| {}) else {
        return;
    };
    let mut model = Model::default();
    let mut rng = Rng(seed);
    let mut log = Vec::new();
    for i in 0..STEPS {
        log.push(step(&fx, &mut model, &mut rng, i));
        for (d, dir_name) in DIRS.iter().enumerate() {
            let (got, want) = (actual(&fx, d), model.expected(d));
            let short = |m: &BTreeMap<String, Vec<u8>>| -> Vec<(String, usize)> {
                m.iter().map(|(k, v)| (k.clone(), v.len())).collect()
            };
            assert!(
                got == want,
                "seed {seed}, dir {dir_name}: got {:?}, want {:?}\nsteps: {log:?}",
                short(&got),
                short(&want)
            );
        }
    }
    // Finally the backing directory itself must hold the durable state.
    fx.mount.cut();
    model.cut();
    for (d, dir_name) in DIRS.iter().enumerate() {
        let dir = fx.durable(dir_name);
        let got: BTreeMap<String, Vec<u8>> = names(&dir)
            .into_iter()
            .filter(|n| d != 0 || (n != "sub" && n != lazyfs::STORE_NAME))
            .map(|n| (n.clone(), fs::read(dir.join(&n)).unwrap()))
            .collect();
        assert!(
            got == model.expected(d),
            "seed {seed}: backing dir {} differs",
            DIRS[d]
        );
    }
}

#[test]
fn random_ops_seed_1() {
    run(0x1234_5678);
}

#[test]
fn random_ops_seed_2() {
    run(0xdead_beef_cafe);
}

#[test]
fn random_ops_seed_3() {
    run(0x0bad_f00d_0001);
}
